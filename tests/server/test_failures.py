"""Engine failures and departing clients, end to end: a real server process in front of a fake vLLM process.

Before the first output an engine failure is an HTTP status (502, 504, or 400 for a request the engine
rejects); after it, the stream ends with an `error` event and `response.failed` and is never left
hanging. A client that disconnects has its engine request cancelled within 100 ms.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from responses_checker import check_stream

from serverkit import FakeEngine, Server, sse_events

TIMEOUT = 1.0


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeEngine]:
    proc = FakeEngine("vllm")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def url(fake: FakeEngine) -> Iterator[str]:
    proc = Server("--engine", f"vllm:{fake.url}", "--engine-timeout", str(TIMEOUT))
    try:
        yield proc.url
    finally:
        proc.stop()


def respond(url: str, text: str, stream: bool = False, **extra: Any) -> httpx.Response:
    return httpx.post(url + "/v1/responses", json={"input": text, "stream": stream, **extra}, timeout=30)


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    error: dict[str, Any] = response.json()["error"]
    return error


def test_a_normal_answer_passes_through(url: str) -> None:
    data = respond(url, "hello").json()
    assert (
        data["status"] == "completed"
        and data["output"][-1]["content"][0]["text"] == "Héllo wörld 👋🏽 — naïve café 🎉 日本"
    )


@pytest.mark.parametrize("stream", [False, True])
def test_engine_failure_before_streaming_is_502(url: str, stream: bool) -> None:
    error = error_of(respond(url, "SCENARIO=error_before", stream), 502)
    assert error["type"] == "server_error" and error["code"] == "engine_failed" and "HTTP 500" in error["message"]


def test_engine_rejection_is_400_with_the_engines_message(url: str) -> None:
    error = error_of(respond(url, "SCENARIO=reject"), 400)
    assert error["code"] == "engine_rejected_request" and "fake engine" in error["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_engine_timeout_before_streaming_is_504(url: str, stream: bool) -> None:
    started = time.monotonic()
    error = error_of(respond(url, "SCENARIO=stall_before", stream), 504)
    assert error["code"] == "engine_timeout" and time.monotonic() - started < TIMEOUT + 3


MID_STREAM = [("error_mid", "engine_failed"), ("cut_mid", "engine_failed"), ("no_finish", "engine_failed"),
              ("stall_mid", "engine_timeout")]  # fmt: skip


@pytest.mark.parametrize(("scenario", "code"), MID_STREAM)
def test_engine_failure_mid_stream_ends_with_error_then_failed(url: str, scenario: str, code: str) -> None:
    started = time.monotonic()
    response = respond(url, f"SCENARIO={scenario}", stream=True)
    assert response.status_code == 200 and time.monotonic() - started < TIMEOUT + 5
    assert response.text.endswith("data: [DONE]\n\n")
    events = sse_events(response.text)
    check_stream(events)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-2]["error"]["code"] == code and events[-1]["response"]["error"]["code"] == code
    assert any(e["type"].endswith(".delta") for e in events), "the failure came after some output"


def test_the_sdk_sees_a_mid_stream_failure_as_an_error(url: str) -> None:
    client = OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    seen: list[str] = []
    with pytest.raises(openai.APIError) as info:
        for event in client.responses.create(model="gpt-oss", input="SCENARIO=error_mid", stream=True):
            seen.append(event.type)
    assert "engine failed mid-stream" in str(info.value) and any(kind.endswith(".delta") for kind in seen)
    chat = client.chat.completions.create(
        model="gpt-oss", messages=[{"role": "user", "content": "SCENARIO=cut_mid"}], stream=True
    )
    with pytest.raises(openai.APIError):
        for _chunk in chat:
            pass


def test_engine_failure_mid_response_without_streaming_is_502(url: str) -> None:
    assert error_of(respond(url, "SCENARIO=error_mid"), 502)["code"] == "engine_failed"
    assert error_of(respond(url, "SCENARIO=stall_mid"), 504)["code"] == "engine_timeout"


def test_tool_choice_required_is_checked_when_it_cannot_be_forced(url: str) -> None:
    tools = [{"type": "function", "name": n, "parameters": {"type": "object"}} for n in ("a", "b")]
    error = error_of(respond(url, "hello", tools=tools, tool_choice="required"), 502)
    assert error["code"] == "tool_choice_violated" and "without one" in error["message"]
    events = sse_events(respond(url, "hello", True, tools=tools, tool_choice="required").text)
    assert events[-2]["error"]["code"] == "tool_choice_violated" and events[-1]["type"] == "response.failed"


def test_named_tool_choice_is_forced_through_the_prompt_and_the_json_constraint(url: str, fake: FakeEngine) -> None:
    tools = [
        {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}},
        {"type": "function", "name": "other"},
    ]
    data = respond(url, "hello", tools=tools, tool_choice={"type": "function", "name": "get_weather"}).json()
    assert [(i["type"], i["name"], i["arguments"]) for i in data["output"]] == [
        ("function_call", "get_weather", '{"location":"Zürich"}')
    ]
    assert fake.stats()["requests"][-1]["structured_outputs"] == {"json": {"type": "object", "properties": {}}}


@pytest.mark.parametrize("stream", [True, False])
def test_client_disconnect_cancels_the_engine_request_within_100ms(url: str, fake: FakeEngine, stream: bool) -> None:
    fake.reset()
    body = {"input": "SCENARIO=slow", "stream": stream}
    with httpx.Client(timeout=30) as client:
        if stream:
            with client.stream("POST", url + "/v1/responses", json=body) as response:
                lines = response.iter_lines()
                while "response.output_text.delta" not in next(lines):
                    pass
                assert fake.stats()["active"] == 1
                closed_at = time.time()
        else:
            with pytest.raises(httpx.ReadTimeout):
                client.post(url + "/v1/responses", json=body, timeout=0.5)
            closed_at = time.time()
    stats = fake.wait_idle()
    assert stats["active"] == 0 and stats["cancelled"] == 1, stats
    assert stats["disconnect_times"][0] - closed_at < 0.1, stats["disconnect_times"][0] - closed_at
    health = httpx.get(url + "/health").json()
    assert health["in_flight"] == 0 and health["engine"]["active_requests"] == 0


KEYS = {"Authorization": "Bearer sk-right"}


@pytest.fixture(scope="module")
def restricted(fake: FakeEngine) -> Iterator[Server]:
    """A server that takes one engine request at a time and wants one of two keys."""
    proc = Server(
        "--engine", f"vllm:{fake.url}", "--max-concurrency", "1", "--api-key", "sk-right", "--api-key", "sk-other"
    )
    try:
        yield proc
    finally:
        proc.stop()


def test_concurrency_limit_answers_429(restricted: Server) -> None:
    url = restricted.url
    with httpx.stream(
        "POST", url + "/v1/responses", json={"input": "SCENARIO=slow", "stream": True}, headers=KEYS
    ) as first:
        assert first.status_code == 200
        lines = first.iter_lines()  # kept: a dropped line iterator closes the connection
        next(lines)
        refused = httpx.post(url + "/v1/responses", json={"input": "hi"}, headers=KEYS, timeout=30)
        error = error_of(refused, 429)
        assert error["type"] == "rate_limit_error" and refused.headers["retry-after"] == "1"
    deadline = time.monotonic() + 5  # the first stream was dropped: its slot comes back
    while httpx.get(url + "/health").json()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert httpx.post(url + "/v1/responses", json={"input": "hi"}, headers=KEYS, timeout=30).status_code == 200


def test_api_keys_are_enforced_when_configured(restricted: Server) -> None:
    for key in ("sk-right", "sk-other"):
        ok = OpenAI(base_url=restricted.url + "/v1", api_key=key, max_retries=0)
        assert ok.responses.create(model="gpt-oss", input="hi").status == "completed"
    wrong = OpenAI(base_url=restricted.url + "/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as info:
        wrong.responses.create(model="gpt-oss", input="hi")
    assert info.value.status_code == 401 and info.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model="gpt-oss", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    missing = httpx.post(restricted.url + "/v1/responses", json={"input": "hi"})
    assert error_of(missing, 401)["message"].startswith("missing API key")
    assert httpx.get(restricted.url + "/health").status_code == 200  # health and metrics need no key
