"""WebSocket mode at `/v1/responses` through a real server process and a real WebSocket client (`websockets`),
and once through the official SDK's `responses.connect()`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI
from responses_checker import assert_valid_event, check_stream, component_validator
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from serverkit import Server

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
KEY = "sk-socket"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    proc = Server("--engine", "demo")
    try:
        yield proc
    finally:
        proc.stop()


def socket(server: Server, key: str | None = KEY) -> ClientConnection:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return connect(server.url.replace("http://", "ws://") + "/v1/responses", additional_headers=headers)


def create(ws: ClientConnection, **body: Any) -> None:
    ws.send(json.dumps({"type": "response.create", "model": "gpt-oss", **body}))


def frames(ws: ClientConnection) -> list[dict[str, Any]]:
    """One response's events (up to its terminal event), or the one error event that refused it."""
    events = []
    while True:
        raw = ws.recv(timeout=30)
        assert isinstance(raw, str), "every event is a text frame"
        event = json.loads(raw)
        events.append(event)
        if event["type"] in TERMINAL or (event["type"] == "error" and "status" in event):
            return events


def answered(ws: ClientConnection, **body: Any) -> dict[str, Any]:
    create(ws, **body)
    events = frames(ws)
    check_stream(events)
    for event in events:
        assert_valid_event(event)
    response: dict[str, Any] = events[-1]["response"]
    return response


def refused(ws: ClientConnection, **body: Any) -> dict[str, Any]:
    create(ws, **body)
    return error_event(ws)


def error_event(ws: ClientConnection) -> dict[str, Any]:
    [event] = frames(ws)
    component_validator("WebSocketErrorEvent").validate(event)
    return event


def test_responses_continue_on_one_socket_from_its_cache_with_store_false(server: Server) -> None:
    with socket(server) as ws:
        first = answered(ws, input="My name is Alice.", store=False)
        second = answered(ws, input="What is my name?", store=False, previous_response_id=first["id"])
        third = answered(ws, input="And again?", store=False, previous_response_id=second["id"])
    assert [r["status"] for r in (first, second, third)] == ["completed"] * 3
    assert first["store"] is False and third["previous_response_id"] == second["id"]
    tokens = [r["usage"]["input_tokens"] for r in (first, second, third)]
    assert tokens[0] < tokens[1] < tokens[2]  # each prompt holds the turns before it
    assert httpx.get(f"{server.url}/v1/responses/{first['id']}").status_code == 404  # nothing was stored


def test_messages_sent_together_are_answered_one_after_another(server: Server) -> None:
    with socket(server) as ws:
        create(ws, input="first")
        create(ws, input="second")
        one, two = frames(ws), frames(ws)
    assert one[0]["type"] == "response.created" and one[-1]["type"] == "response.completed"
    assert two[0]["type"] == "response.created" and two[-1]["type"] == "response.completed"
    assert "first" in json.dumps(one[-1]["response"]["output"]) and "second" in json.dumps(
        two[-1]["response"]["output"]
    )


def test_after_a_reconnect_only_stored_responses_continue(server: Server) -> None:
    with socket(server) as ws:
        kept = answered(ws, input="Keep this.")
        lost = answered(ws, input="Not this.", store=False)
    with socket(server) as ws:
        error = refused(ws, input="Go on.", store=False, previous_response_id=lost["id"])
        assert error["status"] == 400 and error["error"]["code"] == "previous_response_not_found"
        assert error["error"]["param"] == "previous_response_id"
        again = answered(ws, input="Go on.", previous_response_id=kept["id"])  # from the store
    assert again["status"] == "completed" and again["previous_response_id"] == kept["id"]


def test_a_failed_continuation_evicts_the_response_it_continued(server: Server) -> None:
    with socket(server) as ws:
        first = answered(ws, input="Remember me.", store=False)
        error = refused(ws, input="x", store=False, previous_response_id=first["id"], tool_choice="required")
        assert error["error"]["code"] == "invalid_tool_choice"  # a request the model cannot take: 400
        gone = refused(ws, input="x", store=False, previous_response_id=first["id"])
        assert gone["error"]["code"] == "previous_response_not_found"  # evicted by the failure
        fresh = answered(ws, input="Start over.", store=False)
        assert answered(ws, input="ok", store=False, previous_response_id=fresh["id"])["status"] == "completed"


@pytest.mark.parametrize(
    ("message", "status", "code", "param"),
    [
        (b"\x00binary", 400, "invalid_request", None),
        ("not json", 400, "invalid_request", None),
        ("[1, 2]", 400, "invalid_request", None),
        (json.dumps({"type": "response.cancel"}), 400, "invalid_request", "type"),
        (json.dumps({"type": "response.create", "input": "x", "stream": True}), 400, "unsupported_parameter", "stream"),
        (json.dumps({"type": "response.create", "input": "x", "background": False}), 400, "unsupported_parameter",
         "background"),
        (json.dumps({"type": "response.create", "input": 5}), 400, "invalid_request", "input"),
        (json.dumps({"type": "response.create", "input": "x", "previous_response_id": "resp_x"}), 400,
         "previous_response_not_found", "previous_response_id"),
    ],
)  # fmt: skip
def test_a_bad_message_gets_an_error_event_and_the_socket_stays_open(
    server: Server, message: str | bytes, status: int, code: str, param: str | None
) -> None:
    with socket(server) as ws:
        ws.send(message)
        error = error_event(ws)
        assert (error["status"], error["error"]["code"], error["error"]["param"]) == (status, code, param)
        assert answered(ws, input="still here")["status"] == "completed"


def test_raw_reasoning_events_and_function_calls_stream_as_on_sse(server: Server) -> None:
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    with socket(server) as ws:
        create(ws, input="Weather?", tools=[weather])
        events = frames(ws)
    kinds = [e["type"] for e in events]
    assert "response.reasoning.delta" in kinds and "response.function_call_arguments.done" in kinds
    check_stream(events)


@pytest.mark.filterwarnings("ignore:connect\\(\\) must be used as a context manager:DeprecationWarning")
def test_the_sdk_connects_and_continues(server: Server) -> None:
    client = OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    seen: list[str] = []
    with client.responses.connect(max_retries=0) as connection:
        previous = None
        for text in ("Hello.", "And again."):
            connection.response.create(model="gpt-oss", input=text, store=False, previous_response_id=previous)
            for event in connection:
                seen.append(event.type)
                if event.type == "response.completed":
                    previous = event.response.id
                    assert text in event.response.output_text
                    break
    assert seen.count("response.completed") == 2 and seen[0] == "response.created"


# -- keys, and a client that leaves mid-response (a slow engine and API keys) --------------------------------


@pytest.fixture(scope="module")
def guarded() -> Iterator[Server]:
    proc = Server("--engine", "demo:?tps=40", "--api-key", KEY, "--store", "memory")
    try:
        yield proc
    finally:
        proc.stop()


def test_a_socket_without_a_valid_key_is_told_and_closed(guarded: Server) -> None:
    for key in (None, "sk-wrong"):
        with socket(guarded, key) as ws:
            error = error_event(ws)
            assert (error["status"], error["error"]["code"]) == (401, "invalid_api_key")
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


def test_a_client_that_leaves_mid_response_leaves_it_failed_in_the_store(guarded: Server) -> None:
    with socket(guarded) as ws:
        create(ws, input="Take your time answering.")
        created = json.loads(ws.recv(timeout=10))
        assert created["type"] == "response.created"
        ws.recv(timeout=10)
    headers = {"Authorization": f"Bearer {KEY}"}
    deadline = time.monotonic() + 10
    while True:
        stored = httpx.get(f"{guarded.url}/v1/responses/{created['response']['id']}", headers=headers).json()
        if stored["status"] != "in_progress" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert stored["status"] == "failed" and stored["error"]["code"] == "client_disconnected"


def test_a_structured_output_holds_over_the_socket(server: Server) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    fmt = {"format": {"type": "json_schema", "name": "n", "schema": schema, "strict": True}}
    with socket(server, None) as ws:
        response = answered(ws, input="A number, please.", text=fmt)
    reasoning, message = response["output"]
    assert reasoning["type"] == "reasoning" and json.loads(message["content"][0]["text"]) == {"n": 1}
