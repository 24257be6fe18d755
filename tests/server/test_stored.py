"""Stored responses through a real `serve --engine demo` process and the official SDK: continuation,
ownership by key, GET/DELETE, input items, item references and compaction.

The server runs on its default store (a SQLite file under a data folder of its own, `serverkit`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import httpx
import openai
import pytest
from openai import OpenAI
from openai.types.responses import (
    FunctionToolParam,
    ResponseInputParam,
    ResponseInputText,
    ResponseItem,
    ResponseOutputItem,
    ResponseOutputText,
)
from responses_checker import assert_valid_response, component_validator

from serverkit import Server

# The SDK's FunctionToolParam marks `strict` required; Open Responses does not, and this tool is sent without it.
WEATHER = cast(
    FunctionToolParam,
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    proc = Server("--engine", "demo")
    try:
        yield proc
    finally:
        proc.stop()


def sdk(server: Server, key: str = "sk-alice") -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def post(server: Server, body: dict[str, Any], key: str = "sk-alice", path: str = "/v1/responses") -> httpx.Response:
    return httpx.post(
        server.url + path, json={"model": "gpt-oss", **body}, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )


def first_part_text(item: ResponseItem | ResponseOutputItem) -> str:
    """The text of a message item's first content part, as the SDK parsed it."""
    assert item.type == "message", item.type
    part = item.content[0]
    assert isinstance(part, ResponseInputText | ResponseOutputText), part
    return part.text


def sent_text(item: ResponseItem) -> str:
    """An input message's text: the server keeps a string content as it was sent (the SDK's type says a list)."""
    assert item.type == "message", item.type
    content: object = item.content
    return content if isinstance(content, str) else first_part_text(item)


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def test_a_stored_response_is_retrieved_as_it_was_answered(server: Server) -> None:
    client = sdk(server)
    made = client.responses.create(model="gpt-oss", input="Remember the number 42.")
    assert made.model_dump()["store"] is True and made.status == "completed"  # `store` is not in the SDK's model
    fetched = client.responses.retrieve(made.id)
    assert fetched.model_dump() == made.model_dump()
    raw = httpx.get(f"{server.url}/v1/responses/{made.id}", headers={"Authorization": "Bearer sk-alice"}).json()
    assert_valid_response(raw)


def test_a_streamed_response_is_stored_complete_once_completed_is_seen(server: Server) -> None:
    client = sdk(server)
    events = list(client.responses.create(model="gpt-oss", input="Stream and store.", stream=True))
    last = events[-1]
    assert last.type == "response.completed"
    final = last.response
    assert client.responses.retrieve(final.id).model_dump() == final.model_dump()


def test_store_false_keeps_nothing(server: Server) -> None:
    client = sdk(server)
    made = client.responses.create(model="gpt-oss", input="Forget this.", store=False)
    assert made.model_dump()["store"] is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(made.id)
    error = error_of(post(server, {"input": "and?", "previous_response_id": made.id}), 400)
    assert (error["code"], error["param"]) == ("previous_response_not_found", "previous_response_id")


def test_a_continuation_sees_the_earlier_turns(server: Server) -> None:
    client = sdk(server)
    first = client.responses.create(model="gpt-oss", input="My name is Alice.")
    second = client.responses.create(model="gpt-oss", input="What is my name?", previous_response_id=first.id)
    assert second.previous_response_id == first.id and second.status == "completed"
    alone = client.responses.create(model="gpt-oss", input="What is my name?")
    assert second.usage is not None and alone.usage is not None and first.usage is not None
    # The continued prompt holds the first turn (its question and answer) before the new question.
    assert second.usage.input_tokens > alone.usage.input_tokens + first.usage.output_tokens // 2


def test_a_function_call_made_in_one_turn_is_answered_in_the_next(server: Server) -> None:
    client = sdk(server)
    first = client.responses.create(model="gpt-oss", input="Weather in Paris?", tools=[WEATHER])
    call = next(item for item in first.output if item.type == "function_call")
    second = client.responses.create(
        model="gpt-oss",
        previous_response_id=first.id,
        tools=[WEATHER],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": '{"temp_c": 21}'}],
    )
    # The call id was found in the stored turn: the demo engine saw the output come from get_weather.
    assert "received from get_weather" in second.output_text and '{"temp_c": 21}' in second.output_text


def test_another_key_gets_not_found_for_everything(server: Server) -> None:
    mine = sdk(server, "sk-alice").responses.create(model="gpt-oss", input="Mine.")
    other = sdk(server, "sk-bob")
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(mine.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.delete(mine.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.input_items.list(mine.id)
    error = error_of(post(server, {"input": "x", "previous_response_id": mine.id}, key="sk-bob"), 400)
    assert error["code"] == "previous_response_not_found"
    assert sdk(server, "sk-alice").responses.retrieve(mine.id).id == mine.id  # untouched


def test_delete_is_for_good_and_breaks_the_chains_after_it(server: Server) -> None:
    client = sdk(server)
    first = client.responses.create(model="gpt-oss", input="One.")
    second = client.responses.create(model="gpt-oss", input="Two.", previous_response_id=first.id)
    deleted = httpx.delete(f"{server.url}/v1/responses/{first.id}", headers={"Authorization": "Bearer sk-alice"})
    assert deleted.json() == {"id": first.id, "object": "response.deleted", "deleted": True}
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(first.id)
    assert error_of(post(server, {"input": "x", "previous_response_id": first.id}), 400)["code"] == (
        "previous_response_not_found"
    )
    broken = error_of(post(server, {"input": "x", "previous_response_id": second.id}), 400)
    assert broken["code"] == "previous_response_not_found" and first.id in broken["message"]
    assert client.responses.retrieve(second.id).id == second.id  # the response itself is still there


def test_input_items_are_paged_as_the_spec_says(server: Server) -> None:
    client = sdk(server)
    given: ResponseInputParam = [{"type": "message", "role": "user", "content": f"line {i}"} for i in range(5)]
    made = client.responses.create(model="gpt-oss", input=given)
    newest_first = client.responses.input_items.list(made.id)
    texts = [sent_text(item) for item in newest_first.data]
    assert texts == [f"line {i}" for i in reversed(range(5))]
    page = client.responses.input_items.list(made.id, order="asc", limit=2)
    assert len(page.data) == 2 and page.has_more
    rest = client.responses.input_items.list(made.id, order="asc", limit=10, after=page.data[-1].id)
    assert [i.id for i in page.data + rest.data] == [i.id for i in reversed(newest_first.data)] and not rest.has_more
    assert len({i.id for i in newest_first.data}) == 5  # every item got an id
    bad = httpx.get(
        f"{server.url}/v1/responses/{made.id}/input_items?limit=0", headers={"Authorization": "Bearer sk-alice"}
    )
    assert error_of(bad, 400)["param"] == "limit"
    bad = httpx.get(
        f"{server.url}/v1/responses/{made.id}/input_items?after=msg_x", headers={"Authorization": "Bearer sk-alice"}
    )
    assert error_of(bad, 400)["param"] == "after"


def test_item_references_resolve_from_the_store(server: Server) -> None:
    client = sdk(server)
    made = client.responses.create(model="gpt-oss", input="Quote me: the sky is green.")
    answer = next(item for item in made.output if item.type == "message")
    asked = client.responses.input_items.list(made.id).data[0]
    again = post(
        server,
        {"input": [{"type": "item_reference", "id": asked.id}, {"type": "item_reference", "id": answer.id},
                   {"type": "message", "role": "user", "content": "Say it again."}]},
    )  # fmt: skip
    assert again.status_code == 200, again.text
    listed = client.responses.input_items.list(again.json()["id"], order="asc").data
    assert [i.id for i in listed[:2]] == [asked.id, answer.id]  # stored as the items they resolved to
    error = error_of(post(server, {"input": [{"type": "item_reference", "id": "msg_nowhere"}]}), 400)
    assert (error["code"], error["param"]) == ("item_reference_not_found", "input[0].id")
    other = error_of(post(server, {"input": [{"type": "item_reference", "id": answer.id}]}, key="sk-bob"), 400)
    assert other["code"] == "item_reference_not_found"
    # A stored reasoning item (with the content the model wrote) is input like any other item.
    reasoning = next(item for item in made.output if item.type == "reasoning")
    thought = post(
        server,
        {"input": [{"type": "item_reference", "id": reasoning.id},
                   {"type": "message", "role": "user", "content": "Go on."}]},
    )  # fmt: skip
    assert thought.status_code == 200, thought.text
    listed = client.responses.input_items.list(thought.json()["id"], order="asc").data
    assert listed[0].type == "reasoning" and listed[0].id == reasoning.id


def test_compaction_summarises_and_its_item_stands_in_for_the_turns(server: Server) -> None:
    client = sdk(server)
    history: list[Any] = [
        {"type": "message", "role": "user", "content": "My name is Alice and I live in Lyon."},
        {"type": "message", "role": "assistant", "content": "Nice to meet you, Alice. " + "Lyon is lovely. " * 60},
        {"type": "message", "role": "user", "content": "I like trains."},
        {"type": "message", "role": "assistant", "content": "Trains are great. " * 60},
    ]
    raw = post(server, {"input": history}, path="/v1/responses/compact")
    assert raw.status_code == 200, raw.text
    component_validator("CompactResource").validate(raw.json())
    compacted = client.responses.compact(model="gpt-oss", input=history)
    kinds = [item.type for item in compacted.output]
    assert kinds == ["message", "message", "compaction"]  # the user's own messages, then the summary
    texts = [first_part_text(item) for item in compacted.output[:2]]
    assert texts == ["My name is Alice and I live in Lyon.", "I like trains."]
    assert compacted.usage is not None and compacted.usage.output_tokens > 0

    follow: list[Any] = list(raw.json()["output"])  # JSON, sent back as the server wrote it
    follow.append({"type": "message", "role": "user", "content": "Where do I live?"})
    short = client.responses.create(model="gpt-oss", input=follow)
    full = client.responses.create(model="gpt-oss", input=[*history, follow[-1]])
    assert short.status == "completed" and short.usage is not None and full.usage is not None
    assert short.usage.input_tokens < full.usage.input_tokens  # the long answers are gone from the prompt

    tampered = dict(follow[2], encrypted_content=follow[2]["encrypted_content"][:-2] + "AA")
    error = error_of(post(server, {"input": [*follow[:2], tampered, follow[3]]}), 400)
    assert (error["code"], error["param"]) == ("invalid_encrypted_content", "input[2].encrypted_content")


def test_compaction_of_a_stored_conversation(server: Server) -> None:
    client = sdk(server)
    first = client.responses.create(model="gpt-oss", input="Plan a trip to Rome.")
    compacted = client.responses.compact(model="gpt-oss", previous_response_id=first.id)
    assert [item.type for item in compacted.output] == ["message", "compaction"]
    error = error_of(post(server, {"previous_response_id": "resp_gone"}, path="/v1/responses/compact"), 400)
    assert error["code"] == "previous_response_not_found"
    assert error_of(post(server, {}, path="/v1/responses/compact"), 400)["param"] == "input"
    assert error_of(post(server, {"input": "x", "tools": [WEATHER]}, path="/v1/responses/compact"), 400)["param"] == (
        "tools"
    )


def test_truncation_auto_is_accepted_and_echoed(server: Server) -> None:
    made = post(server, {"input": "Short.", "truncation": "auto"})
    assert made.status_code == 200 and made.json()["truncation"] == "auto"


# -- the context window (a server of its own with a small one) ------------------------------------------------

WINDOW = 700


@pytest.fixture(scope="module")
def small() -> Iterator[Server]:
    proc = Server("--engine", "demo", "--store", "memory", "--context-window", str(WINDOW))
    try:
        yield proc
    finally:
        proc.stop()


def test_a_prompt_over_the_window_is_refused_or_shortened_by_auto(small: Server) -> None:
    client = sdk(small)
    previous = None
    for i in range(6):  # each turn: a user message and the demo's answer quoting it
        turn = client.responses.create(
            model="gpt-oss", input=f"Turn {i}: " + "words " * 20, previous_response_id=previous, truncation="auto"
        )
        previous = turn.id
        assert turn.usage is not None and turn.usage.input_tokens + 1 <= WINDOW
    refused = error_of(post(small, {"input": "And now?", "previous_response_id": previous}), 400)
    assert refused["code"] == "context_length_exceeded" and str(WINDOW) in refused["message"]
    kept = post(small, {"input": "And now?", "previous_response_id": previous, "truncation": "auto"})
    assert kept.status_code == 200 and kept.json()["usage"]["input_tokens"] + 1 <= WINDOW
    budget = error_of(post(small, {"input": "Hi", "max_output_tokens": WINDOW}), 400)
    assert budget["code"] == "context_length_exceeded"  # the asked-for output must fit as well
    alone = error_of(post(small, {"input": "long " * WINDOW, "truncation": "auto"}), 400)
    assert alone["code"] == "context_length_exceeded" and alone["param"] == "input"
