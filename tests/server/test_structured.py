"""Structured outputs: the model reasons first, then its answer is decoded under the JSON Schema, per engine.

Real processes throughout: `serve` in front of a fake engine process per wire format (tests/fake_engines/,
which answers an instance of the schema only when the request carries the constraint in that engine's own
field, and prose otherwise), and `serve --engine demo` behind the openai SDK's `parse` helpers. Each case
checks both engine requests the fake received (the first unconstrained, the second continuing the same
prefix with the constraint), the answer (it parses and validates), and every event against the spec.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, cast

import httpx
import jsonschema
import pytest
from openai import OpenAI
from pydantic import BaseModel
from responses_checker import assert_valid_response, check_stream

from harmony_responses import load_harmony_encoding
from harmony_responses.server import structured
from harmony_responses.server.structured import ANSWER_HEADER

from serverkit import FakeEngine, Server, sse_events

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fake_engines"))
from fakemodel import fake_logprob, fake_top  # noqa: E402

ENC = load_harmony_encoding("HarmonyGptOss")
REASONING = "Thinking about café ☕ and 日本語 before answering."  # the fake's reasoning (fakemodel.ANSWER)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 3},
        "days": {"type": "array", "items": {"$ref": "#/$defs/day"}, "minItems": 2},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["city", "days", "unit", "note"],
    "additionalProperties": False,
    "$defs": {
        "day": {
            "type": "object",
            "properties": {"high": {"type": "integer", "minimum": -80}, "rain": {"type": "boolean"}},
            "required": ["high", "rain"],
            "additionalProperties": False,
        }
    },
}
TEXT_FORMAT = {"format": {"type": "json_schema", "name": "forecast", "schema": SCHEMA, "strict": True}}
CHAT_FORMAT = {"type": "json_schema", "json_schema": {"name": "forecast", "schema": SCHEMA, "strict": True}}
# engine kind → the fake's route prefix
ENGINES = {"vllm": "vllm", "sglang": "sglang", "sglang-completions": "sglang", "llamacpp": "llamacpp"}
ENGINES["ollama"] = "ollama"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeEngine]:
    proc = FakeEngine("all")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module", params=sorted(ENGINES))
def served(request: pytest.FixtureRequest, fake: FakeEngine) -> Iterator[tuple[str, Server, FakeEngine]]:
    kind = request.param
    query = "?model=gpt-oss:20b" if kind == "ollama" else ""
    proc = Server("--engine", f"{kind}:{fake.url}/{ENGINES[kind]}{query}", "--model", "gpt-oss")
    try:
        yield kind, proc, fake
    finally:
        proc.stop()


def constraint(kind: str, sent: dict[str, Any]) -> Any:
    """The JSON Schema an engine request carries in that engine's own field (None: none)."""
    if kind == "vllm":
        return (sent.get("structured_outputs") or {}).get("json")
    if kind == "sglang-completions":
        return json.loads(sent["json_schema"]) if "json_schema" in sent else None
    if kind == "sglang":
        params = sent["sampling_params"]
        return json.loads(params["json_schema"]) if "json_schema" in params else None
    if kind == "llamacpp":
        return sent.get("json_schema")
    return sent.get("format")


def prompt_text(kind: str, sent: dict[str, Any]) -> str:
    if kind == "ollama":
        text: str = sent["prompt"]
        return text
    ids = sent["input_ids"] if kind == "sglang" else sent["prompt"]
    return ENC.decode(ids)


def stop_strings(kind: str, sent: dict[str, Any]) -> list[str]:
    where = sent["sampling_params"] if kind == "sglang" else sent
    stops: list[str] = where.get("stop") or []
    return stops


def check_two_steps(kind: str, fake: FakeEngine, answer: str) -> None:
    """The fake's last two requests are the two steps of one structured output, and `answer` holds."""
    first, second = fake.wait_idle()["requests"][-2:]
    assert constraint(kind, first) is None, "the reasoning is not constrained"
    assert constraint(kind, second) == SCHEMA, "the answer is decoded under the schema, in the engine's field"
    if kind in ("vllm", "sglang", "sglang-completions"):
        assert ANSWER_HEADER in stop_strings(kind, first) and not stop_strings(kind, second)
    else:  # llama.cpp and Ollama drop a matched stop word's text: the server cuts the stream itself
        assert "stop" not in first and "stop" not in first.get("options", {})
    before, after = prompt_text(kind, first), prompt_text(kind, second)
    assert after.startswith(before), "the second request continues the same prefix"
    assert after[len(before) :] == f"<|channel|>analysis<|message|>{REASONING}<|end|><|start|>assistant{ANSWER_HEADER}"
    jsonschema.validate(json.loads(answer), SCHEMA)


def test_responses_two_steps_per_engine(served: tuple[str, Server, FakeEngine]) -> None:
    kind, server, fake = served
    fake.reset()
    raw = {"model": "gpt-oss", "input": "Forecast for Zürich, as JSON.", "text": TEXT_FORMAT, "max_output_tokens": 300}
    got = httpx.post(server.url + "/v1/responses", json=raw, timeout=30)
    assert got.status_code == 200, got.text
    response = got.json()
    assert_valid_response(response)
    assert response["status"] == "completed"
    reasoning, message = response["output"]
    assert reasoning["type"] == "reasoning" and reasoning["content"][0]["text"] == REASONING
    answer = message["content"][0]["text"]
    assert message["type"] == "message" and "harmony:validation" not in message
    check_two_steps(kind, fake, answer)
    first, second = fake.stats()["requests"][-2:]
    prompts = len(ENC.encode(prompt_text(kind, first), allowed_special="all"))
    prompts += len(ENC.encode(prompt_text(kind, second), allowed_special="all"))
    assert response["usage"]["input_tokens"] == prompts, "usage counts both requests' prompts"
    assert response["text"]["format"]["type"] == "json_schema" and response["text"]["format"]["strict"] is True

    fake.reset()
    with httpx.stream("POST", server.url + "/v1/responses", json={**raw, "stream": True}, timeout=30) as streamed:
        events = sse_events(streamed.read().decode())
    check_stream(events)
    assert events[-1]["type"] == "response.completed"
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == events[-1]["response"]["output"][-1]["content"][0]["text"]
    check_two_steps(kind, fake, deltas)


def test_chat_response_format_per_engine(served: tuple[str, Server, FakeEngine]) -> None:
    kind, server, fake = served
    fake.reset()
    raw = {
        "model": "gpt-oss",
        "messages": [{"role": "user", "content": "Forecast for Zürich, as JSON."}],
        "response_format": CHAT_FORMAT,
        "max_tokens": 300,
    }
    got = httpx.post(server.url + "/v1/chat/completions", json=raw, timeout=30)
    assert got.status_code == 200, got.text
    choice = got.json()["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["message"]["reasoning_content"] == REASONING
    check_two_steps(kind, fake, choice["message"]["content"])

    fake.reset()
    with httpx.stream("POST", server.url + "/v1/chat/completions", json={**raw, "stream": True}, timeout=30) as s:
        chunks = [json.loads(line[6:]) for line in s.read().decode().splitlines() if line.startswith("data: {")]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    check_two_steps(kind, fake, content)

    fake.reset()
    any_object = {**raw, "response_format": {"type": "json_object"}}
    got = httpx.post(server.url + "/v1/chat/completions", json=any_object, timeout=30)
    assert isinstance(json.loads(got.json()["choices"][0]["message"]["content"]), dict)
    assert constraint(kind, fake.wait_idle()["requests"][-1]) == {"type": "object"}


def test_a_tool_call_still_ends_the_first_step(served: tuple[str, Server, FakeEngine]) -> None:
    kind, server, fake = served
    fake.reset()
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    raw = {"model": "gpt-oss", "input": "Weather? SCENARIO=tool", "text": TEXT_FORMAT, "tools": [weather]}
    response = httpx.post(server.url + "/v1/responses", json=raw, timeout=30).json()
    assert [item["type"] for item in response["output"]] == ["reasoning", "function_call"]
    assert response["output"][1]["arguments"] == '{"location":"Zürich"}' and response["status"] == "completed"
    sent = fake.wait_idle()["requests"]
    assert len(sent) == 1 and constraint(kind, sent[0]) is None, "a call needs no second step"


# -- the openai SDK's parse helpers against the demo engine -----------------------------------------------


class Day(BaseModel):
    high: int
    rain: bool


class Forecast(BaseModel):
    city: str
    days: list[Day]
    unit: Literal["celsius", "fahrenheit"]
    note: str | None


@pytest.fixture(scope="module")
def client() -> Iterator[OpenAI]:
    proc = Server("--engine", "demo", "--model", "gpt-oss-demo")
    try:
        yield OpenAI(base_url=proc.url + "/v1", api_key="unused", max_retries=0)
    finally:
        proc.stop()


def test_responses_parse(client: OpenAI) -> None:
    response = client.responses.parse(model="gpt-oss-demo", input="Forecast for Paris.", text_format=Forecast)
    assert [item.type for item in response.output] == ["reasoning", "message"], "reasoning first"
    assert isinstance(response.output_parsed, Forecast) and response.output_parsed.unit == "celsius"
    assert response.status == "completed" and response.usage is not None


def test_responses_stream_with_text_format(client: OpenAI) -> None:
    with client.responses.stream(model="gpt-oss-demo", input="Forecast for Oslo.", text_format=Forecast) as stream:
        kinds: list[str] = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert kinds.index("response.reasoning.delta") < kinds.index("response.output_text.delta"), "reasoning first"
    assert isinstance(final.output_parsed, Forecast)


def test_chat_completions_parse(client: OpenAI) -> None:
    completion = client.chat.completions.parse(
        model="gpt-oss-demo", messages=[{"role": "user", "content": "Forecast for Rome."}], response_format=Forecast
    )
    message = completion.choices[0].message
    assert isinstance(message.parsed, Forecast) and completion.choices[0].finish_reason == "stop"


def test_an_engine_that_cannot_constrain_reports_a_failed_check(tmp_path: Any) -> None:
    """Replay cannot constrain: the answer is checked, and one that breaks the schema says so on the message."""
    recordings = tmp_path / "rec.jsonl"
    recordings.write_text(
        json.dumps(
            {
                "completion": "<|channel|>analysis<|message|>hm<|end|><|start|>assistant"
                '<|channel|>final<|message|>{"city": "Oslo"}<|return|>'
            }
        )
        + "\n",  # fmt: skip
        encoding="utf-8",
    )
    proc = Server("--engine", f"replay:{recordings}?tps=0", "--model", "m")
    try:
        raw = {"model": "m", "input": "x", "text": TEXT_FORMAT}
        response = httpx.post(proc.url + "/v1/responses", json=raw, timeout=30).json()
        assert_valid_response(response)
        message = response["output"][-1]
        assert response["status"] == "completed" and message["content"][0]["text"] == '{"city": "Oslo"}'
        validation = message["harmony:validation"]
        assert validation["valid"] is False and '"days" is a required property' in validation["errors"][0]["message"]
        loose = {**raw, "text": {"format": {**TEXT_FORMAT["format"], "strict": False}}}
        message = httpx.post(proc.url + "/v1/responses", json=loose, timeout=30).json()["output"][-1]
        assert "harmony:validation" not in message, "without strict, JSON that parses holds"
    finally:
        proc.stop()


def test_a_budget_that_runs_out_in_the_answer_ends_incomplete(client: OpenAI) -> None:
    text: Any = TEXT_FORMAT
    whole = client.responses.create(model="gpt-oss-demo", input="Forecast.", text=text)
    used = whole.usage.output_tokens if whole.usage is not None else 0
    cut = client.responses.create(model="gpt-oss-demo", input="Forecast.", text=text, max_output_tokens=used - 3)
    assert cut.status == "incomplete" and cut.incomplete_details is not None
    assert [item.type for item in cut.output] == ["reasoning", "message"]
    assert cut.output[1].model_dump()["status"] == "incomplete"
    assert cut.usage is not None and cut.usage.output_tokens == used - 3, "both steps share the one budget"
    chat = client.chat.completions.create(
        model="gpt-oss-demo",
        messages=[{"role": "user", "content": "Forecast."}],
        response_format=cast(Any, CHAT_FORMAT),
        max_tokens=used - 3,
    )
    assert chat.choices[0].finish_reason == "length"


# -- include: ["message.output_text.logprobs"] with top_logprobs ----------------------------------------------

LOGPROBS = "message.output_text.logprobs"


def test_logprobs_where_the_engine_returns_them(served: tuple[str, Server, FakeEngine]) -> None:
    """vLLM, SGLang /generate and llama.cpp return log probabilities: each answer token gets its own, with
    `top_logprobs` alternatives, shaped as OpenAI's output_text logprobs; the other engines refuse with a 400."""
    kind, server, fake = served
    fake.reset()
    raw = {"model": "gpt-oss", "input": "Hello.", "include": [LOGPROBS], "top_logprobs": 2}
    got = httpx.post(server.url + "/v1/responses", json=raw, timeout=30)
    if kind in ("sglang-completions", "ollama"):
        assert got.status_code == 400 and got.json()["error"]["param"] == "top_logprobs", got.text
        alone = httpx.post(server.url + "/v1/responses", json={**raw, "top_logprobs": 0}, timeout=30)
        assert alone.status_code == 400 and alone.json()["error"]["param"] == "include[0]"
        assert LOGPROBS in alone.json()["error"]["message"] and not fake.stats()["requests"], "nothing reached it"
        chat = {"model": "gpt-oss", "messages": [{"role": "user", "content": "Hello."}], "logprobs": True}
        refused = httpx.post(server.url + "/v1/chat/completions", json=chat, timeout=30)
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "logprobs"
        return
    assert got.status_code == 200, got.text
    response = got.json()
    assert_valid_response(response)
    part = response["output"][-1]["content"][0]
    answer = ENC.encode(part["text"], disallowed_special=())
    assert [p["logprob"] for p in part["logprobs"]] == [fake_logprob(t) for t in answer]
    assert b"".join(bytes(p["bytes"]) for p in part["logprobs"]) == part["text"].encode()
    assert [p["token"] for p in part["logprobs"]] == [ENC.decode_bytes([t]).decode("utf-8", "replace") for t in answer]
    for p, token in zip(part["logprobs"], answer, strict=True):
        assert [(q["bytes"], q["logprob"]) for q in p["top_logprobs"]] == [
            (list(ENC.decode_bytes([i])), lp) for i, lp in fake_top(token, 2)
        ]
    assert "logprobs" not in response["output"][0]["content"][0], "reasoning carries none"

    with httpx.stream("POST", server.url + "/v1/responses", json={**raw, "stream": True}, timeout=30) as streamed:
        events = sse_events(streamed.read().decode())
    check_stream(events)
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert done["logprobs"] == events[-1]["response"]["output"][-1]["content"][0]["logprobs"] == part["logprobs"]

    chat = {"model": "gpt-oss", "messages": [{"role": "user", "content": "Hello."}], "logprobs": True}
    chat["top_logprobs"] = 2
    whole = httpx.post(server.url + "/v1/chat/completions", json=chat, timeout=30).json()["choices"][0]
    assert whole["logprobs"] == {"content": part["logprobs"], "refusal": None}
    with httpx.stream("POST", server.url + "/v1/chat/completions", json={**chat, "stream": True}, timeout=30) as s:
        chunks = [json.loads(line[6:]) for line in s.read().decode().splitlines() if line.startswith("data: {")]
    streamed_logprobs = [
        p for c in chunks for ch in c["choices"] for p in (ch.get("logprobs") or {}).get("content", [])
    ]
    assert streamed_logprobs == part["logprobs"] and all(c["id"] == chunks[0]["id"] for c in chunks)

    fake.reset()  # with a structured output, the answer's tokens come from the second, constrained request
    structured = httpx.post(server.url + "/v1/responses", json={**raw, "text": TEXT_FORMAT}, timeout=30).json()
    part = structured["output"][-1]["content"][0]
    answer = ENC.encode(part["text"], disallowed_special=())
    assert [p["logprob"] for p in part["logprobs"]] == [fake_logprob(t) for t in answer]
    jsonschema.validate(json.loads(part["text"]), SCHEMA)


def test_engines_without_logprobs_refuse_them() -> None:
    proc = Server("--engine", "demo", "--model", "m")
    try:
        got = httpx.post(proc.url + "/v1/responses", json={"model": "m", "input": "x", "include": [LOGPROBS]})
        assert got.status_code == 400 and got.json()["error"]["param"] == "include[0]"
        chat = {"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": True}
        got = httpx.post(proc.url + "/v1/chat/completions", json=chat)
        assert got.status_code == 400 and got.json()["error"]["param"] == "logprobs"
    finally:
        proc.stop()


def test_text_is_cut_after_each_message_spelling_even_across_chunks() -> None:
    pieces = structured._TextPieces()
    out = pieces.feed("<|channel|>analysis<|mes") + pieces.feed("sage|>think<|end|><|start|>assistant<|channel|>final<")
    assert out == ["<|channel|>analysis", "<|message|>", "think<|end|><|start|>assistant<|channel|>final"]
    assert pieces.held == "<" and pieces.feed("|message|>{") == ["<|message|>", "{"]
    whole = "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>{"
    assert "".join(out) + "<|message|>{" == whole, "no text lost or doubled"
