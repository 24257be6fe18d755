"""The bridge's side of stored state: a request continuing earlier turns, compaction items through the
caller's reader, the Harmony messages a response hands to a store, and what the resource echoes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typed_values import harmony_text

from harmony_responses import Conversation, HarmonyEncoding, Message, Role, parse_tokens
from harmony_responses.bridge import (
    Capabilities,
    EventSink,
    KnownCalls,
    RequestError,
    ResponseBuilder,
    Status,
    conversation_parts,
    parse_request,
    request_to_conversation,
)
from harmony_responses.types import CompactionSummaryItemParam

STORE = Capabilities(store=True)
REQUEST = json.loads(
    (Path(__file__).resolve().parent / "bridge" / "function_call_round_trip" / "request.json").read_text()
)


def body(items: list[dict[str, Any]], **extra: Any) -> Any:
    return parse_request({**REQUEST, "input": items, **extra}, STORE)


def test_a_continuation_renders_as_the_whole_history_sent_as_input(encoding: HarmonyEncoding) -> None:
    items = REQUEST["input"]
    developer = [i for i in items if i.get("role") == "developer"]  # each request sends its own again
    turns = [i for i in items if i.get("role") != "developer"]
    whole = encoding.render_conversation_for_completion(request_to_conversation(body(items)), Role.ASSISTANT)
    for cut in range(1, len(turns)):
        earlier = request_to_conversation(body(developer + turns[:cut])).messages
        history = earlier[2:]  # the stored turns: without the system and developer messages
        calls = KnownCalls.of_items(body(turns[:cut]).input or [])  # what a store keeps, as JSON and back
        known = KnownCalls.from_json(json.loads(json.dumps(calls.to_json())))
        continued = body(developer + turns[cut:], previous_response_id="resp_1")
        parts = conversation_parts(continued, history=history, calls=known)
        assert [m.author.role for m in parts.head] == [Role.SYSTEM, Role.DEVELOPER] and parts.history == history
        prompt = encoding.render_conversation_for_completion(parts.conversation(), Role.ASSISTANT)
        assert prompt == whole, f"cut at {cut}"


def test_an_output_for_a_call_the_history_does_not_name_is_refused() -> None:
    later = [{"type": "function_call_output", "call_id": "call_nowhere", "output": "{}"}]
    with pytest.raises(RequestError) as exc:
        known = KnownCalls.of_items(
            body([{"type": "function_call", "call_id": "call_7Hq2", "name": "x", "arguments": "{}"}]).input or []
        )
        conversation_parts(body(later, previous_response_id="resp_1"), history=[], calls=known)
    assert exc.value.code == "unknown_call_id" and exc.value.param == "input[0].call_id"


def test_request_to_conversation_still_refuses_a_previous_response() -> None:
    with pytest.raises(RequestError) as exc:
        request_to_conversation(body([], previous_response_id="resp_1"))
    assert exc.value.param == "previous_response_id"


def test_a_compaction_item_renders_through_the_callers_reader_in_its_place() -> None:
    seen: list[tuple[str, str]] = []

    def reader(item: CompactionSummaryItemParam, where: str) -> list[Message]:
        seen.append((item.encrypted_content, where))
        return [Message.from_role_and_content(Role.USER, "summary of: " + item.encrypted_content)]

    items = [
        {"type": "message", "role": "user", "content": "first"},
        {"type": "compaction", "encrypted_content": "opaque"},
        {"type": "message", "role": "user", "content": "next"},
    ]
    messages = request_to_conversation(body(items), compaction=reader).messages
    texts = [harmony_text(m) for m in messages if m.author.role is Role.USER]
    assert texts == ["first", "summary of: opaque", "next"] and seen == [("opaque", "input[1]")]
    with pytest.raises(RequestError) as exc:  # no reader: the bridge cannot open it
        request_to_conversation(body(items))
    assert exc.value.code == "unsupported_item" and exc.value.param == "input[1].type"


def test_the_builder_hands_over_the_messages_the_model_wrote(encoding: HarmonyEncoding) -> None:
    completion = (
        "<|channel|>analysis<|message|>Need the tool.<|end|>"
        '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}'
        "<|call|>"
    )
    tokens = encoding.encode(completion, allowed_special="all")
    builder = ResponseBuilder(encoding, body([]), EventSink())
    for token in tokens:
        builder.feed_token(token)
    builder.finish(stopped=True)
    expected = [m.to_message() for m in parse_tokens(encoding, tokens, role=Role.ASSISTANT)]
    assert [m.to_dict() for m in builder.messages()] == [m.to_dict() for m in expected]
    assert [m.channel for m in builder.messages()] == ["analysis", "commentary"]


def test_a_message_cut_by_the_budget_is_kept_and_one_broken_off_is_not(encoding: HarmonyEncoding) -> None:
    cut = encoding.encode("<|channel|>analysis<|message|>Half a thou", allowed_special="all")
    builder = ResponseBuilder(encoding, None, EventSink())
    for token in cut:
        builder.feed_token(token)
    builder.finish(stopped=False)
    assert [harmony_text(m) for m in builder.messages()] == ["Half a thou"]
    broken = ResponseBuilder(encoding, None, EventSink())
    for token in cut:
        broken.feed_token(token)
    broken.fail("the engine went away", "engine_failed")
    assert broken.messages() == []


def test_the_resource_echoes_the_store_and_the_previous_response(encoding: HarmonyEncoding) -> None:
    request = body([{"type": "message", "role": "user", "content": "hi"}], previous_response_id="resp_0")
    assert ResponseBuilder(encoding, request, EventSink(), stored=True).snapshot(Status.IN_PROGRESS).store is True
    snap = ResponseBuilder(encoding, request, EventSink()).snapshot(Status.IN_PROGRESS)
    assert snap.store is False and snap.previous_response_id == "resp_0"


def test_the_encoding_uses_token_ids_it_is_given_and_still_applies_the_chain_of_thought_rule(
    encoding: HarmonyEncoding,
) -> None:
    messages = [
        Message.from_role_and_content(Role.USER, "hi"),
        Message.from_role_and_content(Role.ASSISTANT, "thinking").with_channel("analysis"),
        Message.from_role_and_content(Role.ASSISTANT, "hello").with_channel("final"),
    ]
    conversation = Conversation.from_messages(messages)
    plain = encoding.render_conversation_for_completion(conversation, Role.ASSISTANT)
    known = [encoding.render(m) for m in messages]
    assert encoding.render_conversation_for_completion(conversation, Role.ASSISTANT, rendered=known) == plain
    marked = encoding.render_conversation_for_completion(
        conversation, Role.ASSISTANT, rendered=[[1, 2, 3], [4, 5], None]
    )
    # The user message is taken as given; the analysis is dropped (a final answer follows it) whatever its ids.
    assert marked == [1, 2, 3] + encoding.render(messages[2]) + plain[-2:]
    with pytest.raises(ValueError):
        encoding.render_conversation_for_completion(conversation, Role.ASSISTANT, rendered=[None])


def test_a_stored_built_in_tool_call_is_answered_after_a_json_round_trip(encoding: HarmonyEncoding) -> None:
    """A store keeps `KnownCalls.to_json()`; a `harmony:tool_output` in the next request finds the call by it."""
    call: dict[str, Any] = {
        "type": "harmony:browser_call", "id": "hbc_7", "status": "completed", "recipient": "browser.search",
        "arguments": '{"query": "lyon"}', "channel": "analysis", "content_type": None,
    }  # fmt: skip
    first = [{"type": "message", "role": "user", "content": "Look it up."}, call]
    output = [{"type": "harmony:tool_output", "call_id": "hbc_7", "output": "Lyon: 522 000 people"}]
    whole = encoding.render_conversation_for_completion(request_to_conversation(body(first + output)), Role.ASSISTANT)
    history = conversation_parts(body(first)).turn  # what a store keeps: the turn, not the head
    stored = json.loads(json.dumps(KnownCalls.of_items(body(first).input or []).to_json()))
    assert stored == {"hbc_7": ["browser.search", "analysis"]}
    parts = conversation_parts(
        body(output, previous_response_id="resp_1"), history=history, calls=KnownCalls.from_json(stored)
    )
    assert encoding.render_conversation_for_completion(parts.conversation(), Role.ASSISTANT) == whole
    with pytest.raises(RequestError) as exc:
        conversation_parts(body(output, previous_response_id="resp_1"), history=history, calls=KnownCalls())
    assert exc.value.param == "input[0].call_id"
