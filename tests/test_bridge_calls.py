"""Calls served right: several calls in one turn, invented results cut, arguments (`{}`, strict schemas, budget
cuts), built-in tools as extension items, and what a glitch the parser repairs looks like to a client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from responses_checker import assert_valid_extension_item, assert_valid_response, check_stream
from typed_values import final_response

from harmony_responses import HarmonyEncoding
from harmony_responses.bridge import (
    ResponseStreamer,
    build_response,
    chat_completion_chunks,
    counting_ids,
    parse_request,
    stream_response,
    stream_sse,
    to_chat_completion,
    to_sse,
)
from harmony_responses.bridge import arguments as validation_module
from harmony_responses.types import CreateResponseBody, ResponseResource, StreamingEvent

A = "<|start|>assistant"
WEATHER = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"%s"}<|call|>'


def request(*tools: dict[str, Any]) -> CreateResponseBody:
    return parse_request({"model": "gpt-oss", "input": "hi", "tools": [{"type": "function", **t} for t in tools]})


def serve(
    encoding: HarmonyEncoding, text: str, body: CreateResponseBody | None = None, **options: Any
) -> tuple[list[StreamingEvent], ResponseResource]:
    """The events of a completion given as text in chunks of five characters, and the final response."""
    chunks = [text[i : i + 5] for i in range(0, len(text), 5)]
    events = list(stream_response(chunks, encoding, body, ids=counting_ids(), created_at=1, **options))
    check_stream([e.model_dump(mode="json") for e in events])
    return events, final_response(events)


def output(response: ResponseResource) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = response.model_dump(mode="json")["output"]
    return data


def repairs(response: ResponseResource) -> list[str]:
    return [r["rule"] for r in response.model_dump(mode="json").get("harmony:repairs", [])]


# -- several calls, invented results ---------------------------------------------------------------


def test_several_calls_in_one_turn_are_items_in_order(encoding: HarmonyEncoding) -> None:
    text = "<|channel|>analysis<|message|>Two cities.<|end|>" + A + WEATHER % "Paris" + A + WEATHER % "Rome"
    text += A + "<|channel|>final<|message|>Checking both.<|return|>" + A + "<|channel|>final<|message|>late<|end|>"
    _, response = serve(encoding, text, request({"name": "get_weather"}))
    items = output(response)
    assert [i["type"] for i in items] == ["reasoning", "function_call", "function_call", "message"]
    assert [json.loads(i["arguments"])["city"] for i in items if i["type"] == "function_call"] == ["Paris", "Rome"]
    assert len({i["call_id"] for i in items if i["type"] == "function_call"}) == 2
    assert "after_turn_end" in repairs(response)  # what follows <|return|> is not the answer
    chat = to_chat_completion(response)["choices"][0]
    assert [c["function"]["name"] for c in chat["message"]["tool_calls"]] == ["get_weather", "get_weather"]
    assert chat["finish_reason"] == "tool_calls" and chat["message"]["content"] == "Checking both."


def test_a_result_the_model_invented_is_cut_and_flagged(encoding: HarmonyEncoding) -> None:
    invented = "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny<|end|>"
    text = WEATHER % "Oslo" + invented + A + "<|channel|>final<|message|>It is sunny.<|return|>"
    _, response = serve(encoding, text, request({"name": "get_weather"}))
    assert [i["type"] for i in output(response)] == ["function_call"]
    (cut,) = [r for r in response.model_dump(mode="json")["harmony:repairs"] if r["rule"] == "invented_tool_result"]
    assert cut["text"] == invented + A + "<|channel|>final<|message|>It is sunny.<|return|>"  # nothing lost


def test_text_after_a_call_is_set_aside_and_text_after_end_is_the_answer(encoding: HarmonyEncoding) -> None:
    _, response = serve(encoding, WEATHER % "Lima" + "It is sunny in Lima.", request({"name": "get_weather"}))
    assert [i["type"] for i in output(response)] == ["function_call"]
    assert "text_after_call" in repairs(response)
    _, answer = serve(encoding, "<|channel|>analysis<|message|>Easy.<|end|>\n\n2 + 2 = 4.")
    items = output(answer)
    assert [i["type"] for i in items] == ["reasoning", "message"]
    assert items[1]["content"][0]["text"] == "2 + 2 = 4." and items[1]["phase"] == "final_answer"


def test_a_control_token_spelled_inside_a_json_string_does_not_end_the_call(encoding: HarmonyEncoding) -> None:
    args = '{"content":"ends with <|end|> or <|call|>, starts with <|start|>"}'
    text = f"<|channel|>commentary to=functions.write json<|message|>{args}<|call|>"
    _, response = serve(encoding, text, request({"name": "write"}))
    (call,) = output(response)
    assert call["arguments"] == args
    assert repairs(response).count("json_string_control") == 2


# -- arguments -------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["", "\n"])
def test_empty_arguments_become_an_empty_object(encoding: HarmonyEncoding, body: str) -> None:
    text = f"<|channel|>commentary to=functions.get_location <|constrain|>json<|message|>{body}<|call|>"
    events, response = serve(encoding, text, request({"name": "get_location"}))
    (call,) = output(response)
    assert json.loads(call["arguments"]) == {} and call["status"] == "completed"
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert deltas == call["arguments"]
    assert "empty_arguments" in repairs(response)
    chunks = list(chat_completion_chunks(events))
    streamed = "".join(
        c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
        for c in chunks
        if "choices" in c and "tool_calls" in c["choices"][0]["delta"]
    )
    assert json.loads(streamed) == {}
    _, bare = serve(
        encoding, "<|channel|>commentary to=functions.get_location<|call|>", request({"name": "get_location"})
    )
    assert output(bare)[0]["arguments"] == "{}"


def test_arguments_cut_by_the_budget_leave_the_item_and_the_response_incomplete(encoding: HarmonyEncoding) -> None:
    text = '<|channel|>commentary to=functions.write json<|message|>{"path":"a.py","content":"def f'
    streamer = ResponseStreamer(encoding, request({"name": "write"}), ids=counting_ids(), created_at=1)
    events = streamer.start() + streamer.feed_text(text) + streamer.finish(stopped=False)
    check_stream([e.model_dump(mode="json") for e in events])
    response = final_response(events)
    (call,) = output(response)
    assert response.status == "incomplete" and call["status"] == "incomplete"
    assert call["arguments"] == '{"path":"a.py","content":"def f'  # as cut, not completed or emptied
    assert to_chat_completion(response)["choices"][0]["finish_reason"] == "length"
    empty = ResponseStreamer(encoding, request({"name": "write"}), ids=counting_ids(), created_at=1)
    cut = empty.start() + empty.feed_text("<|channel|>commentary to=functions.write json<|message|>")
    cut += empty.finish(stopped=False)
    assert output(final_response(cut))[0]["arguments"] == ""


STRICT = {
    "name": "get_weather",
    "strict": True,
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def test_a_strict_tools_valid_arguments_pass_unannotated(encoding: HarmonyEncoding) -> None:
    _, response = serve(encoding, WEATHER % "Quito", request(STRICT))
    (call,) = output(response)
    assert "harmony:validation" not in call and "arguments_invalid" not in repairs(response)


def test_a_strict_tools_invalid_arguments_are_reported_on_the_item_not_changed(encoding: HarmonyEncoding) -> None:
    text = '<|channel|>commentary to=functions.get_weather json<|message|>{"town":"Quito","unit":"k"}<|call|>'
    seen: list[Any] = []
    _, response = serve(encoding, text, request(STRICT), on_repair=seen.append)
    assert response.status == "completed"
    (call,) = output(response)
    assert call["arguments"] == '{"town":"Quito","unit":"k"}'
    report = call["harmony:validation"]
    assert report["valid"] is False
    assert {e["path"] for e in report["errors"]} == {"", "/unit"}  # required city, extra town; unit not in the enum
    assert any("city" in e["message"] for e in report["errors"])
    assert "arguments_invalid" in repairs(response) and "arguments_invalid" in [r.rule for r in seen]
    assert_valid_response(response.model_dump(mode="json"))
    not_json = serve(encoding, WEATHER.replace('{"city":"%s"}', "city=Quito"), request(STRICT))[1]
    assert output(not_json)[0]["harmony:validation"]["valid"] is False
    loose = serve(encoding, text, request({**STRICT, "strict": False}))[1]
    assert "harmony:validation" not in output(loose)[0]  # only strict tools are checked


@pytest.mark.parametrize(
    "schema", [{"type": 5}, {"$ref": "#/$defs/nowhere"}, {"properties": {"city": {"type": "nope"}}}]
)
def test_a_strict_tool_with_a_broken_schema_is_reported_not_checked(
    encoding: HarmonyEncoding, schema: dict[str, Any]
) -> None:
    """The request's schema is at fault, not the model: the call is served, marked not checked, never a crash."""
    _, response = serve(encoding, WEATHER % "Quito", request({**STRICT, "parameters": schema}))
    assert response.status == "completed"
    (call,) = output(response)
    report = call["harmony:validation"]
    assert report["valid"] is None and report["errors"][0]["message"].startswith("the tool's schema is invalid: ")


def test_without_jsonschema_a_strict_call_says_it_was_not_checked(
    encoding: HarmonyEncoding, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(validation_module, "_jsonschema", lambda: None)
    _, response = serve(encoding, WEATHER % "Quito", request(STRICT))
    report = output(response)[0]["harmony:validation"]
    assert report["valid"] is None and "jsonschema" in report["errors"][0]["message"]


# -- built-in tools --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recipient", "kind"),
    [
        ("browser.search", "harmony:browser_call"),
        ("browser.open", "harmony:browser_call"),
        ("python", "harmony:python_call"),
        ("container.exec", "harmony:container_call"),
        ("repo_browser.open_file", "harmony:tool_call"),
    ],
)
def test_builtin_calls_are_vendor_prefixed_items(encoding: HarmonyEncoding, recipient: str, kind: str) -> None:
    text = f'<|channel|>analysis to={recipient} code<|message|>{{"query":"x"}}<|call|>'
    events, response = serve(encoding, text)
    (item,) = output(response)
    assert_valid_extension_item(item)
    assert item["type"] == kind and item["status"] == "completed"
    assert (item["recipient"], item["arguments"], item["channel"], item["content_type"]) == (
        recipient,
        '{"query":"x"}',
        "analysis",
        "code",
    )
    added = [e for e in events if e.type == "response.output_item.added"][0]
    assert added.item is not None and added.item.model_dump()["status"] == "in_progress"
    assert to_chat_completion(response)["choices"][0]["message"].get("tool_calls") is None
    # completed_at reads the clock, and a second may tick between the two runs: both read a fixed one
    sse = "".join(stream_sse(list(text), encoding, ids=counting_ids(), created_at=1, clock=lambda: 1.0))
    typed = stream_response(list(text), encoding, ids=counting_ids(), created_at=1, clock=lambda: 1.0)
    assert sse == "".join(to_sse(list(typed)))


def test_the_checker_rejects_an_extension_item_without_a_vendor_prefix() -> None:
    good = {"type": "harmony:python_call", "id": "hpc_1", "status": "completed", "recipient": "python",
            "arguments": "1", "channel": None, "content_type": None}  # fmt: skip
    assert_valid_extension_item(good)
    for broken in ({**good, "type": "python_call"}, {**good, "status": "done"}, {**good, "id": None}):
        with pytest.raises(AssertionError):
            assert_valid_extension_item(broken)


# -- what a client sees of a repaired glitch --------------------------------------------------------


def test_stripped_text_streams_its_items_as_it_comes(encoding: HarmonyEncoding) -> None:
    text = 'analysisNeed weather.assistantcommentary to=functions.get_weather json{"city":"Oslo"}'
    streamer = ResponseStreamer(encoding, request({"name": "get_weather"}), ids=counting_ids(), created_at=1)
    events: list[StreamingEvent] = streamer.start()
    reasoning_seen_before_end = False
    for i in range(0, len(text), 4):
        events += streamer.feed_text(text[i : i + 4])
        reasoning_seen_before_end |= any(e.type == "response.reasoning.delta" for e in events)
    assert reasoning_seen_before_end  # not held until the end of the stream
    events += streamer.finish(stopped=True)
    check_stream([e.model_dump(mode="json") for e in events])
    items = output(final_response(events))
    assert [i["type"] for i in items] == ["reasoning", "function_call"]
    assert items[1]["name"] == "get_weather" and items[1]["arguments"] == '{"city":"Oslo"}'


def test_a_byte_order_mark_is_no_tool_call(encoding: HarmonyEncoding) -> None:
    """Issue 9, item 15: a leading BOM made the answer a call to recipient "\ufeff"."""
    text = "\ufeff<|channel|>analysis<|message|>Greeting.<|end|>" + A + "<|channel|>final<|message|>Hello!<|return|>"
    for completion in ([text], encoding.encode(text, allowed_special="all")):
        response = build_response(completion, encoding, ids=counting_ids(), created_at=1)
        assert [i["type"] for i in output(response)] == ["reasoning", "message"]
        (bom,) = [r for r in response.model_dump(mode="json")["harmony:repairs"] if r["rule"] == "byte_order_mark"]
        assert bom["text"] == "\ufeff"


def test_a_call_written_with_another_header_says_so_for_the_next_request(encoding: HarmonyEncoding) -> None:
    _, usual = serve(encoding, WEATHER % "Oslo", request({"name": "get_weather"}))
    assert not {"harmony:channel", "harmony:content_type"} & set(output(usual)[0])
    text = '<|channel|>analysis to=functions.get_weather code<|message|>{"city":"Oslo"}<|call|>'
    _, other = serve(encoding, text, request({"name": "get_weather"}))
    (call,) = output(other)
    assert (call["harmony:channel"], call["harmony:content_type"]) == ("analysis", "code")
    assert_valid_response(other.model_dump(mode="json"))
    _, bare = serve(encoding, '<|channel|>commentary to=functions.get_weather<|message|>{"city":"Oslo"}<|call|>')
    assert output(bare)[0]["harmony:content_type"] is None and "harmony:channel" not in output(bare)[0]


def test_an_empty_answer_is_no_content_in_chat_form(encoding: HarmonyEncoding) -> None:
    _, response = serve(
        encoding, "<|channel|>analysis<|message|>Nothing to say.<|end|>" + A + "<|channel|>final<|message|><|return|>"
    )
    message = to_chat_completion(response)["choices"][0]["message"]
    assert message["content"] is None and message["reasoning_content"] == "Nothing to say."


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("<|channel|>analysis<|message|>Thinking it over", "incomplete"),  # reasoning ends at <|end|>, no stop token
        ("analysisThinking it over", "incomplete"),  # the same with the control tokens stripped
        ("<|channel|>final<|message|>The answer", "completed"),  # a stop token the engine left out
        ("<|channel|>commentary<|message|>Let me check.", "completed"),  # a preamble may end the turn
        ("<|channel|>final<|message|>", "incomplete"),  # cut right after the header
        ("<|channel|>commentary to=functions.f json<|message|>", "incomplete"),
        ("Plain text with no control token", "completed"),
        ("", "completed"),
        ('<|channel|>commentary to=functions.f json<|message|>{"a": 1}', "completed"),
        ("<|channel|>commentary to=functions.f code<|message|>ls -la", "completed"),
        ('<|channel|>commentary to=functions.f json<|message|>{"a": "cut he', "incomplete"),  # inside the JSON
        ("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>comm", "incomplete"),  # inside a header
    ],
)
def test_text_with_an_unknown_finish_is_cut_only_where_no_stop_token_could_end_it(
    encoding: HarmonyEncoding, text: str, status: str
) -> None:
    response = build_response([text], encoding, ids=counting_ids(), created_at=1)
    assert response.status == status
    tokens = encoding.encode(text, allowed_special="all")
    by_ids = build_response(tokens, encoding, ids=counting_ids(), created_at=1)
    ends_inside = text and not text.endswith("<|end|>")
    assert by_ids.status == ("incomplete" if ends_inside else "completed")  # ids keep their stop token
