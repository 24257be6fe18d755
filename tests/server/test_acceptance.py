"""What the Open Responses acceptance suite checks, against `serve --engine demo --media placeholder`.

The server runs two worker processes, so these tests also show `--workers` sharing one port.

Requests as the suite sends them (plain HTTP, a model name the server does not serve, a bearer key
although none is configured); every response and every streamed event is validated against the
published OpenAPI document, and the event order against the spec's streaming rules.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from responses_checker import assert_valid_response, check_stream

from serverkit import Server, sse_events

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a location",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"}},
        "required": ["location"],
    },
}
# An image as a data URL (the PNG signature and a header; with --media placeholder it is never decoded).
IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAIAAAD8GO2j"
# A PDF as a data URL (its first bytes; with --media placeholder it is never decoded either).
PDF = "data:application/pdf;base64,JVBERi0xLjEKMSAwIG9iago8PCAvVHlwZSAvQ2F0YWxvZyA+PgplbmRvYmoK"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    proc = Server("--engine", "demo", "--media", "placeholder", "--workers", "2")
    try:
        yield proc.url + "/v1"
    finally:
        proc.stop()


def post(base: str, body: dict[str, Any], stream: bool = False) -> httpx.Response:
    return httpx.post(
        base + "/responses",
        json={"model": "gpt-4o-mini", **body, "stream": stream},
        headers={"Authorization": "Bearer test-key"},
        timeout=30,
    )


def final(base: str, body: dict[str, Any]) -> dict[str, Any]:
    response = post(base, body)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    assert_valid_response(data)
    assert data["output"], "no output items"
    return data


def streamed(base: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = post(base, body, stream=True)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.endswith("data: [DONE]\n\n")
    events = sse_events(response.text)
    check_stream(events)
    assert_valid_response(events[-1]["response"])
    return events


def test_basic_text_response(base: str) -> None:
    data = final(base, {"input": [{"type": "message", "role": "user", "content": "Say hello in exactly 3 words."}]})
    assert data["status"] == "completed" and data["model"] == "gpt-4o-mini"


def test_streaming_response(base: str) -> None:
    events = streamed(base, {"input": [{"type": "message", "role": "user", "content": "Count from 1 to 5."}]})
    assert events[-1]["type"] == "response.completed" and events[-1]["response"]["status"] == "completed"
    assert any(e["type"] == "response.output_text.delta" for e in events)


def test_system_prompt(base: str) -> None:
    data = final(
        base,
        {
            "input": [
                {"type": "message", "role": "system", "content": "You are a pirate. Always respond in pirate speak."},
                {"type": "message", "role": "user", "content": "Say hello."},
            ]
        },
    )
    assert data["status"] == "completed"


def test_tool_calling(base: str) -> None:
    body = {"input": [{"type": "message", "role": "user", "content": "What's the weather like in San Francisco?"}]}
    data = final(base, {**body, "tools": [WEATHER]})
    calls = [item for item in data["output"] if item["type"] == "function_call"]
    assert len(calls) == 1 and calls[0]["name"] == "get_weather" and calls[0]["status"] == "completed"


def test_tool_calling_streaming(base: str) -> None:
    body = {"input": [{"type": "message", "role": "user", "content": "What's the weather like in San Francisco?"}]}
    events = streamed(base, {**body, "tools": [WEATHER]})
    kinds = [e["type"] for e in events]
    assert any(e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call" for e in events)
    assert "response.function_call_arguments.delta" in kinds and "response.function_call_arguments.done" in kinds
    assert any(e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call" for e in events)


def test_image_input(base: str) -> None:
    content = [
        {"type": "input_text", "text": "What do you see in this image? Answer in one sentence."},
        {"type": "input_image", "image_url": IMAGE},
    ]
    data = final(base, {"input": [{"type": "message", "role": "user", "content": content}]})
    assert data["status"] == "completed"
    assert "[image omitted: this model reads text only]" in data["output"][-1]["content"][0]["text"]


def test_file_input(base: str) -> None:
    content = [
        {"type": "input_text", "text": "Read the attached file and answer with its title only."},
        {"type": "input_file", "filename": "fixture.pdf", "file_data": PDF},
    ]
    data = final(base, {"input": [{"type": "message", "role": "user", "content": content}]})
    assert data["status"] == "completed"


def test_previous_response_id(base: str) -> None:
    first = final(base, {"input": "Remember this code word: papaya. Reply with only OK."})
    second = final(base, {"previous_response_id": first["id"], "input": "What code word did I ask you to remember?"})
    assert second["status"] == "completed" and second["previous_response_id"] == first["id"]


def test_function_call_round_trip(base: str) -> None:
    forced = {"type": "function", "name": "get_weather"}
    first = final(base, {"input": "Use the weather tool for San Francisco.", "tools": [WEATHER], "tool_choice": forced})
    calls = [item for item in first["output"] if item["type"] == "function_call"]
    assert calls and calls[0]["call_id"]
    answer = {"type": "function_call_output", "call_id": calls[0]["call_id"], "output": "64 degrees and clear"}
    second = final(base, {"previous_response_id": first["id"], "input": [answer]})
    assert second["status"] == "completed" and second["output"][-1]["type"] == "message"
    assert "64 degrees and clear" in second["output"][-1]["content"][0]["text"]


def test_multi_turn(base: str) -> None:
    data = final(
        base,
        {
            "input": [
                {"type": "message", "role": "user", "content": "My name is Alice."},
                {"type": "message", "role": "assistant", "content": "Hello Alice! How can I help you today?"},
                {"type": "message", "role": "user", "content": "What is my name?"},
            ]
        },
    )
    assert data["status"] == "completed" and "What is my name?" in data["output"][-1]["content"][0]["text"]


def test_two_workers_answer(base: str) -> None:
    pids: set[int] = set()
    deadline = time.monotonic() + 20
    while len(pids) < 2 and time.monotonic() < deadline:  # a new connection each time: either worker may take it
        pids.add(httpx.get(base.removesuffix("/v1") + "/health", headers={"connection": "close"}).json()["pid"])
    assert len(pids) == 2
