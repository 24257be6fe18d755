"""Harmony completion → Open Responses: items, events in order, SSE, Chat Completions, all checked against the spec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from responses_checker import assert_valid_response, check_stream
from typed_values import final_response, first_output_text

from harmony_responses import HarmonyEncoding
from harmony_responses.bridge import (
    build_response,
    chat_completion_chunks,
    counting_ids,
    parse_request,
    parse_sse,
    stream_response,
    to_chat_completion,
    to_sse,
    tokens_from_text,
)
from harmony_responses.types import StreamingEvent

CASES = Path(__file__).resolve().parent / "bridge"
NAMES = ["tools", "function_call_round_trip", "structured_output"]


def case(name: str) -> tuple[Any, str]:
    request = parse_request(json.loads((CASES / name / "request.json").read_text(encoding="utf-8")))
    return request, (CASES / name / "completion.txt").read_text(encoding="utf-8")


def tokens(encoding: HarmonyEncoding, text: str) -> list[int]:
    return encoding.encode(text, allowed_special="all")


def events_of(encoding: HarmonyEncoding, completion: Any, request: Any = None) -> list[StreamingEvent]:
    return list(
        stream_response(completion, encoding, request, ids=counting_ids(), created_at=1764000000, input_tokens=100)
    )


def dumped(events: list[StreamingEvent]) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json") for e in events]


@pytest.mark.parametrize("name", NAMES)
def test_bundled_completions_stream_in_order_and_validate(encoding: HarmonyEncoding, name: str) -> None:
    request, text = case(name)
    events = events_of(encoding, tokens(encoding, text), request)
    check_stream(dumped(events))
    assert events[-1].type == "response.completed"
    final = build_response(tokens(encoding, text), encoding, request, ids=counting_ids(), created_at=1764000000)
    assert_valid_response(final.model_dump(mode="json"))
    assert final.status == "completed" and final.completed_at is not None
    assert final.output == final_response(events).output


def test_tool_call_completion_maps_every_message(encoding: HarmonyEncoding) -> None:
    request, text = case("tools")
    response = build_response(tokens(encoding, text), encoding, request, ids=counting_ids(), input_tokens=100)
    out = response.model_dump(mode="json")["output"]
    assert [o["type"] for o in out] == ["reasoning", "message", "function_call"]
    assert out[0]["id"].startswith("rs_") and out[0]["summary"] == []
    assert out[0]["content"][0]["type"] == "reasoning_text"
    assert out[1]["phase"] == "commentary" and out[1]["id"].startswith("msg_")
    call = out[2]
    assert (call["name"], call["arguments"], call["status"]) == ("get_weather", '{"city":"Paris","unit":"celsius"}',
                                                                 "completed")  # fmt: skip
    assert call["id"].startswith("fc_") and call["call_id"].startswith("call_")
    usage = out and response.usage
    assert usage is not None and usage.input_tokens == 100
    assert usage.output_tokens == len(tokens(encoding, text))
    assert 0 < usage.output_tokens_details.reasoning_tokens < usage.output_tokens
    assert response.tools[0].name == "get_weather" and response.tool_choice == "auto"


def test_function_call_arguments_stream_as_deltas(encoding: HarmonyEncoding) -> None:
    request, text = case("tools")
    events = events_of(encoding, tokens(encoding, text), request)
    deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    assert len(deltas) > 1
    assert "".join(e.delta for e in deltas) == '{"city":"Paris","unit":"celsius"}'


def test_structured_output_final_is_a_message_not_a_tool_call(encoding: HarmonyEncoding) -> None:
    request, text = case("structured_output")
    response = build_response(tokens(encoding, text), encoding, request, ids=counting_ids())
    message = response.model_dump(mode="json")["output"][1]
    assert message["type"] == "message" and message["phase"] == "final_answer"
    assert json.loads(message["content"][0]["text"])["items"][1] == {"name": "eggs", "quantity": "12"}
    assert response.text.format.type == "json_schema"


def test_names_keep_every_dot_and_builtin_calls_are_vendor_items(encoding: HarmonyEncoding) -> None:
    text = (
        "<|channel|>commentary to=functions.my-tool.v2 <|constrain|>json<|message|>{}<|call|>"
        "<|start|>functions.my-tool.v2 to=assistant<|channel|>commentary<|message|>invented<|end|>"
    )
    response = build_response(tokens(encoding, text), encoding, ids=counting_ids())
    (call,) = response.model_dump(mode="json")["output"]  # tokens after <|call|> are not output
    assert call["name"] == "my-tool.v2"
    browse = '<|channel|>analysis to=browser.search<|message|>{"query":"x"}<|call|>'
    events = events_of(encoding, tokens(encoding, browse))
    check_stream(dumped(events))
    item = final_response(events).output[0]
    assert item.type == "harmony:browser_call"
    assert item.model_dump()["recipient"] == "browser.search"


def test_a_budget_cut_mid_item_ends_incomplete(encoding: HarmonyEncoding) -> None:
    request, text = case("function_call_round_trip")
    cut = tokens(encoding, text)[:-6]
    events = events_of(encoding, cut, request)
    check_stream(dumped(events))
    final = final_response(events)
    assert events[-1].type == "response.incomplete" and final.status == "incomplete"
    assert final.output[-1].model_dump()["status"] == "incomplete"  # whichever kind of item was cut
    assert to_chat_completion(final)["choices"][0]["finish_reason"] == "length"


def test_strict_mode_fails_where_lenient_mode_repairs_and_says_so(encoding: HarmonyEncoding) -> None:
    text = (
        "<|channel|>final<|message|>Hi<|end|>junk before start<|start|>assistant<|channel|>final<|message|>!<|return|>"
    )
    strict = list(stream_response(tokens(encoding, text), encoding, ids=counting_ids(), created_at=1, strict=True))
    check_stream(dumped(strict))
    assert [e.type for e in strict[-2:]] == ["error", "response.failed"]
    failed = final_response(strict)
    assert failed.error is not None and failed.error.code == "model_output_invalid"
    assert "text outside a message" in failed.error.message and "at token 5" in failed.error.message
    seen: list[Any] = []
    lenient = list(stream_response(tokens(encoding, text), encoding, ids=counting_ids(), on_repair=seen.append))
    check_stream(dumped(lenient))
    final = final_response(lenient)
    assert lenient[-1].type == "response.completed"
    assert [first_output_text(o) for o in final.output] == ["Hi", "!"]
    (repair,) = final.model_dump(mode="json")["harmony:repairs"]
    assert repair["rule"] == "junk_between_messages" and repair["text"] == "junk before start"
    assert [r.rule for r in seen] == ["junk_between_messages"]
    # no repair, no field
    clean = build_response(tokens(encoding, "<|channel|>final<|message|>Hi<|return|>"), encoding)
    assert "harmony:repairs" not in clean.model_dump(mode="json")


def test_text_chunks_give_the_same_events_as_tokens(encoding: HarmonyEncoding) -> None:
    request, text = case("tools")
    chunks = [text[i : i + 3] for i in range(0, len(text), 3)]  # splits control tokens mid-spelling
    assert list(tokens_from_text(chunks, encoding)) != []
    by_text = build_response(chunks, encoding, request, ids=counting_ids(), created_at=1)
    by_tokens = build_response(tokens(encoding, text), encoding, request, ids=counting_ids(), created_at=1)
    strip = {"usage", "completed_at"}
    assert by_text.model_dump(exclude=strip) == by_tokens.model_dump(exclude=strip)


@pytest.mark.parametrize("names", ["spec", "openai"])
def test_sse_round_trips(encoding: HarmonyEncoding, names: Any) -> None:
    request, text = case("tools")
    events = events_of(encoding, tokens(encoding, text), request)
    wire = "".join(to_sse(events, reasoning_names=names))
    assert wire.endswith("data: [DONE]\n\n") and "\r" not in wire
    frames = wire.split("\n\n")[:-2]
    assert len(frames) == len(events)
    for frame, event in zip(frames, events, strict=True):
        name, data = frame.split("\n")
        body = json.loads(data.removeprefix("data: "))
        assert name == f"event: {body['type']}"
        if names == "spec":
            assert body == event.model_dump(mode="json")
    reasoning = "response.reasoning_text.delta" if names == "openai" else "response.reasoning.delta"
    assert f"event: {reasoning}\n" in wire
    assert parse_sse(wire) == events
    assert parse_sse(wire.splitlines(keepends=True)) == events


def test_chat_completion_forms(encoding: HarmonyEncoding) -> None:
    request, text = case("tools")
    events = events_of(encoding, tokens(encoding, text), request)
    chat = to_chat_completion(final_response(events))
    choice = chat["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me check the current weather in Paris."
    assert choice["message"]["reasoning_content"].startswith("The user wants")
    (call,) = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris","unit":"celsius"}'}
    chunks = list(chat_completion_chunks(events))
    args = "".join(
        c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
        for c in chunks
        if "tool_calls" in c["choices"][0]["delta"]
    )
    assert args == call["function"]["arguments"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    content = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert content == choice["message"]["content"]
    final, text2 = case("function_call_round_trip")
    answer = to_chat_completion(build_response(tokens(encoding, text2), encoding, final))
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert "umbrella" in answer["choices"][0]["message"]["content"]


def test_parse_sse_reads_crlf_and_names_bad_lines(encoding: HarmonyEncoding) -> None:
    from harmony_responses.bridge import SSEError

    events = events_of(encoding, tokens(encoding, "<|channel|>final<|message|>Hi<|return|>"))
    wire = "".join(to_sse(events))
    assert parse_sse(wire.replace("\n", "\r\n")) == events
    with pytest.raises(SSEError, match="line 2: data: not valid JSON"):
        parse_sse("event: error\ndata: {nope\n\n")
    with pytest.raises(SSEError, match="line 1: not an SSE field"):
        parse_sse("hello\n\n")
    with pytest.raises(SSEError, match="differs from the body's type"):
        parse_sse(wire.replace("event: response.created", "event: response.completed", 1))


def test_a_failed_stream_ends_its_chat_chunks_with_an_error_object(encoding: HarmonyEncoding) -> None:
    completion = tokens(encoding, "<|channel|>final<|message|>Hi<|end|>junk")
    events = list(stream_response(completion, encoding, ids=counting_ids(), created_at=1, strict=True))
    chunks = list(chat_completion_chunks(events))
    assert chunks[-1]["error"]["code"] == "model_output_invalid"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
