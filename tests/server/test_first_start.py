"""`serve` explains itself: it asks the engine which model it serves, lists the engines in --help, and says at
start-up what runs where. Real processes: the server and fake engines that list models as the engines do."""

from __future__ import annotations

import subprocess
import sys

import httpx

from harmony_responses.server.engines.discover import with_model
from harmony_responses.server.engines.spec import _OPTIONS, KINDS

from serverkit import FakeEngine, Server


def _ask(server: Server) -> httpx.Response:
    body = {"model": "gpt-oss", "input": "Say hello."}
    return httpx.post(server.url + "/v1/responses", json=body, timeout=30)


def test_vllm_without_a_model_name_uses_the_one_model_the_engine_serves() -> None:
    engine = FakeEngine("vllm", "--models", "openai/gpt-oss-20b")
    try:
        server = Server("--engine", f"vllm:{engine.url}", "--store", "memory")
        try:
            reply = _ask(server)
            assert reply.status_code == 200, reply.text
            assert reply.json()["status"] == "completed"
            sent = engine.stats()["requests"][-1]
            assert sent["model"] == "openai/gpt-oss-20b"  # not the served name, which vLLM would answer with 404
            out = server.output()
            assert "model   openai/gpt-oss-20b at the engine, served as 'gpt-oss'" in out
            assert f"{server.url}/v1/responses" in out and "curl -s" in out  # one curl line to try it
            assert "store   memory" in out
        finally:
            server.stop()
    finally:
        engine.stop()


def test_an_engine_serving_several_models_stops_serve_with_the_list() -> None:
    engine = FakeEngine("vllm", "--models", "openai/gpt-oss-20b,openai/gpt-oss-120b")
    try:
        run = subprocess.run(
            [sys.executable, "-m", "harmony_responses.cli", "serve", "--engine", f"vllm:{engine.url}", "--port", "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 2
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1, run.stderr
        assert "serves 2 models (openai/gpt-oss-20b, openai/gpt-oss-120b)" in lines[0]
        assert "?model=openai/gpt-oss-20b" in lines[0]
    finally:
        engine.stop()


def test_ollama_is_asked_through_its_tags() -> None:
    engine = FakeEngine("ollama", "--models", "gpt-oss:20b")
    try:
        server = Server("--engine", f"ollama:{engine.url}", "--store", "memory")
        try:
            assert _ask(server).status_code == 200
            assert engine.stats()["requests"][-1]["model"] == "gpt-oss:20b"
        finally:
            server.stop()
    finally:
        engine.stop()


def test_an_engine_that_lists_nothing_falls_back_to_the_served_name_and_says_so() -> None:
    engine = FakeEngine("vllm")  # no /v1/models: 404
    try:
        server = Server("--engine", f"vllm:{engine.url}", "--store", "memory")
        try:
            assert _ask(server).status_code == 200
            assert engine.stats()["requests"][-1]["model"] == "gpt-oss"
            assert "could not ask the engine which models it serves (/v1/models answered 404)" in server.output()
        finally:
            server.stop()
    finally:
        engine.stop()


def test_serve_help_lists_every_engine_and_its_options() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "harmony_responses.cli", "serve", "--help"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0
    engines = run.stdout.split("engines (--engine", 1)[1]
    for kind in KINDS:
        assert f"\n  {kind}" in engines, kind
        for option in _OPTIONS[kind]:
            assert f"{option}=" in engines, (kind, option)


def test_with_model_adds_or_joins_the_option() -> None:
    assert with_model("vllm:http://h:1", "openai/gpt-oss-20b") == "vllm:http://h:1?model=openai/gpt-oss-20b"
    assert with_model("ollama:http://h:1?x=1", "gpt-oss:20b") == "ollama:http://h:1?x=1&model=gpt-oss:20b"


def test_a_tool_schema_that_is_not_json_schema_is_a_400_naming_its_place() -> None:
    server = Server("--engine", "demo", "--store", "memory")
    try:
        bad = {"type": "object", "properties": {"city": {"type": "strin"}}}
        tool = {"type": "function", "name": "get_weather", "parameters": bad, "strict": True}
        reply = httpx.post(
            server.url + "/v1/responses", json={"model": "gpt-oss", "input": "Weather?", "tools": [tool]}, timeout=30
        )
        assert reply.status_code == 400, reply.text
        error = reply.json()["error"]
        assert error["param"] == "tools[0].parameters.properties.city.type"
        assert error["code"] == "invalid_function_parameters"
        assert "get_weather's parameters are not a valid JSON Schema" in error["message"]
        objetc = {"type": "function", "function": {"name": "f", "parameters": {"type": "objetc"}}}
        chat = httpx.post(
            server.url + "/v1/chat/completions",
            json={"model": "gpt-oss", "messages": [{"role": "user", "content": "hi"}], "tools": [objetc]},
            timeout=30,
        )
        assert chat.status_code == 400 and chat.json()["error"]["param"] == "tools[0].function.parameters.type"
        # A strict tool's arguments are checked for real now that the server extra brings jsonschema: the demo
        # engine's example city cannot match a pattern (it guesses), and the report says how (not "not installed").
        city = {"type": "string", "pattern": "^[0-9]+$"}
        good = {**tool, "parameters": {"type": "object", "properties": {"city": city}, "required": ["city"]}}
        ok = httpx.post(
            server.url + "/v1/responses", json={"model": "gpt-oss", "input": "Weather?", "tools": [good]}, timeout=30
        )
        call = ok.json()["output"][-1]
        assert call["type"] == "function_call", call
        assert call["harmony:validation"]["valid"] is False
        assert call["harmony:validation"]["errors"][0]["path"] == "/city"
    finally:
        server.stop()
