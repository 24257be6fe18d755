"""A continued conversation's prompt equals, token for token, the prompt of the whole history sent as input.

Both prompts are read where they arrive: a fake vLLM process records the token-id prompt of every
request the server makes. The conversation mixes answers (with their reasoning), function calls and
their outputs. Output items go back as input exactly as the server wrote them (reasoning with its
`content` included).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from serverkit import FakeEngine, Server

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
}


@pytest.fixture(scope="module")
def setup() -> Iterator[tuple[FakeEngine, Server]]:
    fake = FakeEngine("vllm")
    try:
        server = Server("--engine", f"vllm:{fake.url}", "--store", "memory")
        try:
            yield fake, server
        finally:
            server.stop()
    finally:
        fake.stop()


def post(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(
        server.url + "/v1/responses",
        json={"model": "gpt-oss", "instructions": "Be brief.", "tools": [WEATHER], **body},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def last_prompt(fake: FakeEngine) -> list[int]:
    prompt: list[int] = fake.stats()["requests"][-1]["prompt"]
    return prompt


def test_a_continued_prompt_is_the_whole_history_token_for_token(setup: tuple[FakeEngine, Server]) -> None:
    fake, server = setup
    turns: list[list[dict[str, Any]]] = [
        [{"type": "message", "role": "user", "content": "Hello! What can you do?"}],
        [{"type": "message", "role": "user", "content": "SCENARIO=tool What's the weather in Zürich?"}],
    ]
    history: list[dict[str, Any]] = []
    previous: str | None = None
    prompts: list[list[int]] = []
    for n in range(4):
        given = turns[n] if n < len(turns) else []
        calls = [item for item in history if item["type"] == "function_call"]
        if n >= len(turns):  # answer the call the last turn made (its id is only in the stored turn)
            given = [{"type": "function_call_output", "call_id": calls[-1]["call_id"], "output": f'{{"temp": {n}}}'}]
        made = post(server, {"input": given, "previous_response_id": previous})
        prompts.append(last_prompt(fake))
        assert made["usage"]["input_tokens"] == len(prompts[-1])
        history += given + made["output"]
        previous = made["id"]
    kinds = [item["type"] for item in history]
    assert {"reasoning", "message", "function_call", "function_call_output"} <= set(kinds)

    final_input = [{"type": "message", "role": "user", "content": "Thanks. Summarise?"}]
    post(server, {"input": final_input, "previous_response_id": previous})
    continued = last_prompt(fake)
    post(server, {"input": history + final_input, "store": False})
    whole = last_prompt(fake)
    assert continued == whole
    assert len(continued) > len(prompts[-1]) > len(prompts[0])
