"""Output as input: every item the bridge emits comes back in the next request and renders to what the model wrote.

The round-trip property (`output_items.play`) builds completions from valid assistant messages (reasoning,
preambles, calls to declared functions on varied channels and content types, built-in and other tool calls, final
answers) with openai-harmony 0.0.8 (the oracle), runs each through the bridge, sends the output items back as the
next request's input (with a tool output after a call, a new user message after a final answer), and checks the
prompt our request conversion and renderer make against the oracle's rendering of the Harmony messages themselves,
chain-of-thought rule included. The expectation never goes through the code under test.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from output_items import Dialogue, dialogue, oracle_head, play, request, tool_message, user
from responses_checker import assert_valid_request, request_errors

from harmony_responses import HarmonyEncoding, Role
from harmony_responses.bridge import (
    KnownCalls,
    RequestError,
    ResponseBuilder,
    counting_ids,
    items_to_messages,
    parse_request,
    request_to_conversation,
)
from harmony_responses.bridge.items import NullSink
from harmony_responses.types import ItemParamAdapter

oracle = pytest.importorskip("openai_harmony", reason="openai-harmony is installed by the test extras")

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def reference() -> Any:
    return oracle.load_harmony_encoding(oracle.HarmonyEncodingName.HARMONY_GPT_OSS)


def _prompt(encoding: HarmonyEncoding, raw: dict[str, Any]) -> list[int]:
    body = parse_request(raw)
    return encoding.render_conversation_for_completion(request_to_conversation(body), Role.ASSISTANT)


@SETTINGS
@given(data=dialogue)
def test_output_items_come_back_as_the_messages_the_model_wrote(
    encoding: HarmonyEncoding, reference: Any, data: Dialogue
) -> None:
    for turn in play(encoding, reference, data, counting_ids()):
        prompt = _prompt(encoding, turn.before)
        assert prompt == turn.expected_before
        response = turn.response
        assert response["status"] == "completed" and not response.get("harmony:repairs"), response
        assert_valid_request(turn.after)  # the checker (the document, with the spec's overrides) takes it too
        again = _prompt(encoding, turn.after)
        assert again == turn.expected_after
        if turn.ended_with_call and not turn.answered_before:
            # no final answer yet, nothing dropped: the next prompt continues prompt + completion as they are
            assert again[: len(prompt) + len(turn.completion)] == prompt + turn.completion


# -- one item kind at a time ---------------------------------------------------------------------------------


def _messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    body = parse_request(request(items))
    conversation = request_to_conversation(body)
    dicts = [json.loads(json.dumps(m.to_dict())) for m in conversation.messages[2:]]  # after system and developer
    return [{k: v for k, v in d.items() if v is not None} for d in dicts]


def _rendered(encoding: HarmonyEncoding, items: list[dict[str, Any]]) -> str:
    return encoding.decode_utf8(_prompt(encoding, request(items)))


USER = {"type": "message", "role": "user", "content": "Weather in Paris?"}
REASONING = {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Hm."}]}
CALL = {
    "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
    "arguments": '{"city":"Paris"}', "status": "completed",
}  # fmt: skip
BROWSER = {
    "type": "harmony:browser_call", "id": "hbc_1", "status": "completed", "recipient": "browser.search",
    "arguments": '{"query":"paris"}', "channel": "analysis", "content_type": "code",
}  # fmt: skip
FINAL = {
    "type": "message", "role": "assistant", "phase": "final_answer", "id": "msg_1", "status": "completed",
    "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
}  # fmt: skip


def test_reasoning_content_is_an_analysis_message(encoding: HarmonyEncoding) -> None:
    (_, message) = _messages([USER, REASONING])
    assert message == {"role": "assistant", "content": [{"type": "text", "text": "Hm."}], "channel": "analysis"}
    several = {
        **REASONING,
        "content": [{"type": "reasoning_text", "text": "a"}, {"type": "reasoning_text", "text": "b"}],
    }
    assert _messages([several])[0]["content"] == [{"type": "text", "text": "ab"}]
    empty = {**REASONING, "content": [{"type": "reasoning_text", "text": ""}]}  # the model wrote an empty message
    assert _messages([empty]) == [
        {"role": "assistant", "content": [{"type": "text", "text": ""}], "channel": "analysis"}
    ]


def test_reasoning_content_wins_over_its_summary(encoding: HarmonyEncoding) -> None:
    both = {**REASONING, "summary": [{"type": "summary_text", "text": "A summary."}]}
    text = _rendered(encoding, [USER, both])
    assert "<|channel|>analysis<|message|>Hm.<|end|>" in text and "A summary." not in text
    summary_only = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "A summary."}]}
    assert "<|channel|>analysis<|message|>A summary.<|end|>" in _rendered(encoding, [USER, summary_only])
    null_content = {**summary_only, "content": None}
    assert "<|channel|>analysis<|message|>A summary.<|end|>" in _rendered(encoding, [USER, null_content])
    nothing = {"type": "reasoning", "summary": [], "content": []}
    assert _messages([USER, nothing]) == _messages([USER])


def test_reasoning_is_kept_next_to_a_call_and_dropped_after_a_final_answer(encoding: HarmonyEncoding) -> None:
    thought = {**REASONING, "content": [{"type": "reasoning_text", "text": "Need the tool."}]}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    calling = _rendered(encoding, [USER, thought, CALL, output])
    assert "<|channel|>analysis<|message|>Need the tool.<|end|>" in calling
    final = {
        "type": "message", "role": "assistant", "phase": "final_answer", "id": "msg_1", "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
    }  # fmt: skip
    later = {"type": "message", "role": "user", "content": "Thanks"}
    answered = _rendered(encoding, [USER, thought, CALL, output, final, later])
    assert "Need the tool." not in answered
    assert "<|channel|>final<|message|>Sunny.<|end|><|start|>user<|message|>Thanks<|end|>" in answered
    # the same turn with the builtin tool: analysis calls before the first final answer go too, as the reference does
    tool_output = {"type": "harmony:tool_output", "call_id": "hbc_1", "output": "results"}
    assert "browser.search" in _rendered(encoding, [USER, thought, BROWSER, tool_output])
    assert "browser.search" not in _rendered(encoding, [USER, thought, BROWSER, tool_output, final, later])


def test_messages_take_their_phase_channel(encoding: HarmonyEncoding) -> None:
    def said(phase: str | None) -> dict[str, Any]:
        item = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}
        return item if phase is None else {**item, "phase": phase}

    assert [m["channel"] for m in _messages([said("commentary"), said("final_answer"), said(None)])] == [
        "commentary",
        "final",
        "final",
    ]


def test_function_calls_keep_the_header_the_model_wrote(encoding: HarmonyEncoding) -> None:
    assert "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>" in (
        _rendered(encoding, [CALL])
    )
    on_analysis = {**CALL, "harmony:channel": "analysis", "harmony:content_type": None}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    text = _rendered(encoding, [on_analysis, output])
    assert '<|start|>assistant to=functions.get_weather<|channel|>analysis<|message|>{"city":"Paris"}<|call|>' in text
    assert "<|start|>functions.get_weather to=assistant<|channel|>analysis<|message|>sunny<|end|>" in text
    no_channel = {**CALL, "harmony:channel": None, "harmony:content_type": "json"}
    assert "<|start|>assistant to=functions.get_weather json<|message|>" in _rendered(encoding, [no_channel])
    validated = {**CALL, "harmony:validation": {"valid": False, "errors": []}}  # a strict check's report: read, kept
    assert _messages([validated]) == _messages([CALL])


# -- messages keep the header the model wrote ----------------------------------------------------------------


def _written(encoding: HarmonyEncoding, raw: dict[str, Any], text: str) -> tuple[list[dict[str, Any]], list[Any]]:
    """The output items of a completion given as text (after the prompt's `<|start|>assistant`), as JSON, and the
    Harmony messages the (lenient) parser read in it."""
    builder = ResponseBuilder(encoding, parse_request(raw), NullSink(), ids=counting_ids())
    builder.feed_text(text)
    builder.finish()
    assert builder.final is not None and builder.final.status == "completed"
    return builder.final.model_dump(mode="json")["output"], builder.messages()


def _as_oracle(messages: list[Any]) -> list[Any]:
    return [oracle.Message.from_dict(json.loads(json.dumps(m.to_dict()))) for m in messages]


def _oracle_prompt(reference: Any, messages: list[Any]) -> list[int]:
    conversation = oracle.Conversation.from_messages([*oracle_head(), *messages])
    return list(reference.render_conversation_for_completion(conversation, oracle.Role.ASSISTANT))


def test_an_answer_written_without_a_channel_comes_back_without_one(encoding: HarmonyEncoding, reference: Any) -> None:
    """The lenient parser reads text after `<|end|>` with no header as the answer: a message with no channel. Sent
    back, it renders with no channel, as the model wrote it, not on `final`."""
    first = request([USER])
    output, messages = _written(encoding, first, "<|channel|>analysis<|message|>think<|end|>The answer")
    assert [(m.channel, m.content[0].text) for m in messages] == [("analysis", "think"), (None, "The answer")]
    answer = output[-1]
    assert answer["phase"] == "final_answer" and answer["harmony:channel"] is None
    assert "harmony:content_type" not in answer
    later = {"type": "message", "role": "user", "content": "Thanks"}
    after = request([USER, *output, later])
    assert_valid_request(after)
    expected = _oracle_prompt(reference, [user(USER["content"]), *_as_oracle(messages), user("Thanks")])
    assert _prompt(encoding, after) == expected
    assert "<|start|>assistant<|message|>The answer<|end|>" in _rendered(encoding, [USER, *output, later])


JSON_TYPE = "<|constrain|>json"


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ('<|channel|>final <|constrain|>json<|message|>{"a":1}<|return|>', {"harmony:content_type": JSON_TYPE}),
        ("<|channel|>final json<|message|>[]<|return|>", {"harmony:content_type": "json"}),
        ("<|channel|>commentary code<|message|>Looking.<|end|><|start|>assistant<|channel|>final<|message|>x<|return|>",
         {"harmony:content_type": "code"}),
        ("<|message|>x<|return|>", {"harmony:channel": None}),
        ("<|constrain|>json<|message|>{}<|return|>", {"harmony:channel": None, "harmony:content_type": JSON_TYPE}),
        ("<|channel|>final<|message|>x<|return|>", {}),
    ],
)  # fmt: skip
def test_a_message_keeps_its_channel_and_content_type(
    encoding: HarmonyEncoding, reference: Any, text: str, fields: dict[str, Any]
) -> None:
    """A message says which channel the model wrote it on when its phase would say another (null: none), and which
    content type it had; sent back, it renders to the message the model wrote."""
    output, messages = _written(encoding, request([USER]), text)
    first = output[0]
    assert first["type"] == "message"
    assert {k: v for k, v in first.items() if k.startswith("harmony:")} == fields
    later = {"type": "message", "role": "user", "content": "More"}
    after = request([USER, *output, later])
    assert_valid_request(after)
    expected = _oracle_prompt(reference, [user(USER["content"]), *_as_oracle(messages), user("More")])
    assert _prompt(encoding, after) == expected


def test_a_message_on_an_unknown_channel_is_reasoning(encoding: HarmonyEncoding) -> None:
    """Hidden text is never shown (issue 17): a channel the format does not know is read as reasoning, and comes back
    as reasoning."""
    output, _ = _written(encoding, request([USER]), "<|channel|>notes<|message|>x<|return|>")
    assert [item["type"] for item in output] == ["reasoning"]
    assert "<|start|>assistant<|channel|>analysis<|message|>x<|end|>" in _rendered(encoding, [USER, *output])


def test_reasoning_keeps_its_content_type(encoding: HarmonyEncoding, reference: Any) -> None:
    text = "<|channel|>analysis json<|message|>{}<|end|><|start|>assistant to=functions.lookup<|channel|>commentary"
    output, messages = _written(encoding, request([USER]), text + ' <|constrain|>json<|message|>{"q":1}<|call|>')
    assert output[0]["type"] == "reasoning" and output[0]["harmony:content_type"] == "json"
    assert "harmony:channel" not in output[0]  # a reasoning item is on the reasoning channel by what it is
    answer = {"type": "function_call_output", "call_id": output[1]["call_id"], "output": "found"}
    after = request([USER, *output, answer])
    assert_valid_request(after)
    tool = tool_message("functions.lookup", "found", "commentary")
    assert _prompt(encoding, after) == _oracle_prompt(reference, [user(USER["content"]), *_as_oracle(messages), tool])
    assert "<|channel|>analysis json<|message|>{}<|end|>" in _rendered(encoding, [USER, *output, answer])


def test_message_header_fields_are_read(encoding: HarmonyEncoding) -> None:
    said = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}
    assert _messages([{**said, "phase": "final_answer", "harmony:channel": None}]) == [
        {"role": "assistant", "content": [{"type": "text", "text": "x"}]}
    ]
    typed = {**said, "phase": "commentary", "harmony:content_type": "<|constrain|>json"}
    assert _messages([typed])[0] == {
        "role": "assistant", "content": [{"type": "text", "text": "x"}], "channel": "commentary",
        "content_type": "<|constrain|>json",
    }  # fmt: skip
    assert _messages([{**said, "harmony:channel": "analysis", "harmony:content_type": None}])[0]["channel"] == (
        "analysis"
    )
    summary = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "S."}], "harmony:content_type": "json"}
    assert "<|channel|>analysis json<|message|>S.<|end|>" in _rendered(encoding, [USER, summary])


CALL_KINDS = ["harmony:browser_call", "harmony:python_call", "harmony:container_call", "harmony:tool_call"]


@pytest.mark.parametrize("kind", CALL_KINDS)
def test_extension_calls_and_their_outputs(encoding: HarmonyEncoding, kind: str) -> None:
    call = {**BROWSER, "type": kind}
    output = {"type": "harmony:tool_output", "call_id": "hbc_1", "output": [{"type": "input_text", "text": "found"}]}
    text = _rendered(encoding, [USER, call, output])
    assert (
        '<|start|>assistant to=browser.search<|channel|>analysis code<|message|>{"query":"paris"}<|call|>'
        "<|start|>browser.search to=assistant<|channel|>analysis<|message|>found<|end|><|start|>assistant"
    ) in text
    bare = {"type": kind, "recipient": "python", "arguments": "print(1)"}  # no id, channel or content type: none
    assert _messages([bare]) == [
        {"role": "assistant", "content": [{"type": "text", "text": "print(1)"}], "recipient": "python"}
    ]


def test_a_tool_output_answers_the_latest_call_with_its_id(encoding: HarmonyEncoding) -> None:
    again = {**BROWSER, "recipient": "browser.open", "channel": "commentary"}
    output = {"type": "harmony:tool_output", "call_id": "hbc_1", "output": "page"}
    messages = _messages([BROWSER, {"type": "harmony:tool_output", "call_id": "hbc_1", "output": "x"}, again, output])
    assert messages[-1] == {
        "role": "tool",
        "name": "browser.open",
        "content": [{"type": "text", "text": "page"}],
        "channel": "commentary",
        "recipient": "assistant",
    }


def test_items_to_messages_is_reusable_across_batches() -> None:
    """A store replays the stored items, then reads the new input with the same calls known."""
    stored = [ItemParamAdapter.validate_python(item) for item in (USER, REASONING, BROWSER, CALL)]
    calls = KnownCalls()
    replayed = items_to_messages(stored, root="stored", calls=calls)
    assert [m.channel for m in replayed.messages] == [None, "analysis", "analysis", "commentary"]
    assert set(calls.tools) == {"hbc_1"} and set(calls.functions) == {"call_1"}
    new = [
        ItemParamAdapter.validate_python(item)
        for item in (
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {"type": "harmony:tool_output", "call_id": "hbc_1", "output": "found"},
            {"type": "message", "role": "developer", "content": "Be kind."},
        )
    ]
    read = items_to_messages(new, calls=calls)
    assert [m.author.name for m in read.messages] == ["functions.get_weather", "browser.search"]
    assert read.instructions == ["Be kind."]
    with pytest.raises(RequestError) as caught:
        items_to_messages(new)  # without the stored calls, the outputs answer nothing
    assert caught.value.param == "input[0].call_id"


# -- malformed items: a typed 400 at the field ---------------------------------------------------------------

BAD = [
    ({**REASONING, "content": 5}, "invalid_request", "input[0].content", "expected an array, found 5"),
    ({**REASONING, "content": [{"type": "summary_text"}]}, "invalid_request", "input[0].content[0].type", ""),
    ({**REASONING, "content": [{"type": "reasoning_text"}]}, "missing_required_parameter", "input[0].content[0].text",
     ""),
    ({**CALL, "harmony:channel": 5}, "invalid_request", "input[0][\"harmony:channel\"]", "expected a string, found 5"),
    ({**CALL, "harmony:content_type": []}, "invalid_request", "input[0][\"harmony:content_type\"]", ""),
    ({**FINAL, "harmony:channel": 5}, "invalid_request", "input[0][\"harmony:channel\"]", "expected a string, found 5"),
    ({**FINAL, "harmony:content_type": {}}, "invalid_request", "input[0][\"harmony:content_type\"]", ""),
    ({**REASONING, "harmony:content_type": 1}, "invalid_request", "input[0][\"harmony:content_type\"]", ""),
    ({**BROWSER, "recipient": None}, "invalid_request", "input[0].recipient", "expected a string"),
    ({k: v for k, v in BROWSER.items() if k != "recipient"}, "missing_required_parameter", "input[0].recipient", ""),
    ({k: v for k, v in BROWSER.items() if k != "arguments"}, "missing_required_parameter", "input[0].arguments", ""),
    ({**BROWSER, "arguments": {"query": "x"}}, "invalid_request", "input[0].arguments", "expected a string"),
    ({**BROWSER, "channel": 3}, "invalid_request", "input[0].channel", "expected a string, found 3"),
    ({**BROWSER, "content_type": True}, "invalid_request", "input[0].content_type", ""),
    ({**BROWSER, "status": "done"}, "invalid_request", "input[0].status", ""),
    ({**BROWSER, "id": 7}, "invalid_request", "input[0].id", ""),
    ({"type": "harmony:tool_output", "output": "x"}, "missing_required_parameter", "input[0].call_id", ""),
    ({"type": "harmony:tool_output", "call_id": "", "output": "x"}, "invalid_request", "input[0].call_id", ""),
    ({"type": "harmony:tool_output", "call_id": "hbc_1"}, "missing_required_parameter", "input[0].output", ""),
    ({"type": "harmony:tool_output", "call_id": "hbc_1", "output": 5}, "invalid_request", "input[0].output", ""),
    (
        {"type": "harmony:tool_output", "call_id": "hbc_1", "output": [{"type": "input_image", "image_url": "u"}]},
        "invalid_request", "input[0].output[0].type", "",
    ),
    ({"type": "harmony:tool_output", "call_id": "hbc_9", "output": ""}, "unknown_call_id", "input[0].call_id", "hbc_9"),
    ({"type": "harmony:weather_call", "recipient": "x", "arguments": ""}, "unsupported_item", "input[0].type", ""),
]  # fmt: skip


@pytest.mark.parametrize(("item", "code", "param", "words"), BAD)
def test_malformed_items_are_typed_400s_at_their_field(item: dict[str, Any], code: str, param: str, words: str) -> None:
    with pytest.raises(RequestError) as caught:
        request_to_conversation(parse_request({"input": [item]}))
    error = caught.value
    assert (error.code, error.param) == (code, param), error.to_body()
    assert words in error.message
    assert error.to_body()["error"]["type"] == "invalid_request_error"


def test_an_unknown_tool_call_names_the_call_items() -> None:
    answer = {"type": "harmony:tool_output", "call_id": "call_1", "output": "x"}
    with pytest.raises(RequestError) as caught:
        request_to_conversation(parse_request({"input": [CALL, {**BROWSER, "id": None}, answer]}))
    message = caught.value.message
    assert caught.value.param == "input[2].call_id"
    for kind in CALL_KINDS:
        assert kind in message  # a function_call's call_id is no call item's id
    assert '"call_1"' in message


def test_the_request_checker_takes_output_as_input_and_refuses_bad_shapes() -> None:
    good = request([USER, REASONING, BROWSER, {"type": "harmony:tool_output", "call_id": "hbc_1", "output": "x"},
                     {**CALL, "harmony:channel": None}])  # fmt: skip
    assert_valid_request(good)
    assert request_errors(request([{**REASONING, "content": 5}]))
    assert request_errors(request([{**BROWSER, "recipient": 5}]))
    assert request_errors(request([{"type": "harmony:tool_output", "call_id": "hbc_1"}]))
    assert request_errors(request([{**CALL, "harmony:channel": 5}]))
    assert request_errors(request([{"type": "acme:thing"}]))
