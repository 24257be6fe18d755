"""Encrypted reasoning through the official `openai` SDK against real `serve` processes, store off.

A tool loop run as Codex runs it (`store=False`, `include=["reasoning.encrypted_content"]`, the whole
conversation sent back each turn with reasoning items carrying only their blob) gives the engine, token for
token, the prompt the same loop gets with stored state (`previous_response_id`): both are read where they
arrive, in a fake vLLM process that records every prompt. A changed byte is a 400 naming the item; a second
process on the same store opens the first's blobs (the key is the store's), a server with another store
cannot.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from openai import BadRequestError, OpenAI
from openai.types.responses import FunctionToolParam

from serverkit import FakeEngine, Server

WEATHER = cast(
    FunctionToolParam,
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
    },
)
ASK = "SCENARIO=tool What's the weather in Zürich?"
INCLUDE: Any = ["reasoning.encrypted_content"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeEngine, Server, Server, Path]]:
    store = tmp_path_factory.mktemp("encrypted") / "responses.sqlite3"
    fake = FakeEngine("vllm")
    try:
        server = Server("--engine", f"vllm:{fake.url}", "--store", f"sqlite:///{store}")
        try:
            sibling = Server("--engine", f"vllm:{fake.url}", "--store", f"sqlite:///{store}")
            try:
                yield fake, server, sibling, store
            finally:
                sibling.stop()
        finally:
            server.stop()
    finally:
        fake.stop()


def sdk(server: Server) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0)


def last_prompt(fake: FakeEngine) -> list[int]:
    prompt: list[int] = fake.stats()["requests"][-1]["prompt"]
    return prompt


def as_input(item: Any) -> dict[str, Any]:
    """An output item as a store-off client sends it back: reasoning with its blob and no plain content."""
    data: dict[str, Any] = item.model_dump(mode="json", exclude_none=True)
    if data["type"] == "reasoning":
        data.pop("content", None)
        assert data["encrypted_content"].startswith("hrr1.")
    return data


def test_a_store_off_tool_loop_gets_the_stored_state_prompt(setup: tuple[FakeEngine, Server, Server, Path]) -> None:
    fake, server, sibling, _ = setup
    client = sdk(server)
    # stored state
    called = client.responses.create(model="gpt-oss", input=ASK, tools=[WEATHER])
    call = next(item for item in called.output if item.type == "function_call")
    answer = {"type": "function_call_output", "call_id": call.call_id, "output": '{"temp": 3}'}
    client.responses.create(model="gpt-oss", input=cast(Any, [answer]), previous_response_id=called.id, tools=[WEATHER])
    stored_prompt = last_prompt(fake)
    # store off, reasoning sent back sealed
    first = client.responses.create(model="gpt-oss", input=ASK, tools=[WEATHER], store=False, include=INCLUDE)
    assert getattr(first, "store", None) is False  # echoed (the SDK model keeps it as an extra field)
    reasoning = next(item for item in first.output if item.type == "reasoning")
    assert reasoning.encrypted_content and reasoning.content  # the plain reasoning is still shown
    items = [as_input(item) for item in first.output]
    call_id = next(i["call_id"] for i in items if i["type"] == "function_call")
    given = [{"role": "user", "content": ASK}, *items, {**answer, "call_id": call_id}]
    given[0] = {"type": "message", **given[0]}
    second = sdk(sibling).responses.create(  # another process on the store opens the blob
        model="gpt-oss", input=cast(Any, given), tools=[WEATHER], store=False, include=INCLUDE
    )
    assert second.status == "completed"
    assert last_prompt(fake) == stored_prompt

    index = next(n for n, item in enumerate(given) if item["type"] == "reasoning")
    blob = given[index]["encrypted_content"]
    flipped = blob[:-4] + ("A" if blob[-4] != "A" else "B") + blob[-3:]
    broken = [*given[:index], {**given[index], "encrypted_content": flipped}, *given[index + 1 :]]
    with pytest.raises(BadRequestError) as refused:
        client.responses.create(model="gpt-oss", input=cast(Any, broken), tools=[WEATHER], store=False)
    body: Any = refused.value.body
    assert body["param"] == f"input[{index}].encrypted_content" and body["code"] == "invalid_encrypted_content"


def test_another_servers_blob_is_refused(setup: tuple[FakeEngine, Server, Server, Path]) -> None:
    fake, server, _, _ = setup
    first = sdk(server).responses.create(model="gpt-oss", input="Hi", store=False, include=INCLUDE)
    items = [{"type": "message", "role": "user", "content": "Hi"}, *(as_input(i) for i in first.output)]
    other = Server("--engine", f"vllm:{fake.url}", "--store", "memory")
    try:
        with pytest.raises(BadRequestError) as refused:
            sdk(other).responses.create(model="gpt-oss", input=cast(Any, items), store=False)
        body: Any = refused.value.body
        assert body["param"] == "input[1].encrypted_content"
    finally:
        other.stop()
    keyed = [Server("--engine", f"vllm:{fake.url}", "--store", "memory", "--reasoning-key", "shared") for _ in "ab"]
    try:  # processes on different stores share blobs when given the same --reasoning-key
        made = sdk(keyed[0]).responses.create(model="gpt-oss", input="Hi", store=False, include=INCLUDE)
        again = [{"type": "message", "role": "user", "content": "Hi"}, *(as_input(i) for i in made.output)]
        assert sdk(keyed[1]).responses.create(model="gpt-oss", input=cast(Any, again), store=False).status == (
            "completed"
        )
    finally:
        for proc in keyed:
            proc.stop()
