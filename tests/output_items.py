"""Valid assistant turns for the output-as-input round trip, drawn by hypothesis and built with the oracle.

Each turn is a few messages the model writes (reasoning, preambles, at times with a content type) and what ends it (a
call to a declared function on a varied channel and content type, a call to a built-in or other tool, or the final
answer, at times with a content type or with no channel at all), as openai-harmony
0.0.8's own `Message`s; `completion` renders them with the oracle into the tokens a model would have sent, and
`play` runs a dialogue of such turns through the bridge, sending each response's output items back as the next
request's input (a tool's answer after a call, a new user message after a final answer). The expected prompt of
each request is the oracle's rendering of the Harmony messages themselves, never our code's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import openai_harmony as oracle
from hypothesis import strategies as st

from harmony_responses import HarmonyEncoding
from harmony_responses.bridge import build_response, parse_request
from harmony_responses.bridge.items import IdFactory

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS: list[dict[str, Any]] = [  # request JSON
    {"type": "function", "name": "get_weather", "description": "Weather now.", "parameters": WEATHER},
    {"type": "function", "name": "lookup", "description": "Look something up.", "parameters": {"type": "object"}},
]
INSTRUCTIONS = "Answer briefly."
RETURN, END = 200002, 200007  # <|return|> ends a final answer in a completion; <|end|> once it is in a prompt


def request(items: list[Any]) -> dict[str, Any]:
    return {"model": "gpt-oss", "instructions": INSTRUCTIONS, "tools": TOOLS, "input": items}


def oracle_head() -> list[Any]:
    """The system and developer messages of `_request`, built with the oracle's own types."""
    tools = [oracle.ToolDescription.new(t["name"], t["description"], parameters=t["parameters"]) for t in TOOLS]
    developer = oracle.DeveloperContent.new().with_instructions(INSTRUCTIONS).with_function_tools(tools)
    return [
        oracle.Message.from_role_and_content(oracle.Role.SYSTEM, oracle.SystemContent.new()),
        oracle.Message.from_role_and_content(oracle.Role.DEVELOPER, developer),
    ]


def assistant(text: str, channel: str | None, recipient: str | None = None, content_type: str | None = None) -> Any:
    message = oracle.Message.from_role_and_content(oracle.Role.ASSISTANT, text)
    if channel is not None:
        message = message.with_channel(channel)
    if recipient is not None:
        message = message.with_recipient(recipient)
    if content_type is not None:
        message = message.with_content_type(content_type)
    return message


def tool_message(author: str, text: str, channel: str | None) -> Any:
    message = oracle.Message.from_author_and_content(oracle.Author.new(oracle.Role.TOOL, author), text)
    message = message.with_recipient("assistant")
    return message.with_channel(channel) if channel is not None else message


def user(text: str) -> Any:
    return oracle.Message.from_role_and_content(oracle.Role.USER, text)


# -- drawing valid assistant turns ---------------------------------------------------------------------------

text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20)
json_args = st.dictionaries(st.sampled_from(["city", "q", "n"]), st.one_of(text, st.integers(-5, 5)), max_size=2).map(
    lambda d: json.dumps(d, ensure_ascii=False)
)
CALL_CHANNELS = st.sampled_from(["commentary", "analysis", None])
FUNCTION_CONTENT_TYPES = st.sampled_from(["<|constrain|>json", "json", None])
BUILTIN_RECIPIENTS = st.sampled_from(["browser.search", "browser.open", "python", "container.exec", "dalle.text2im"])
TOOL_CONTENT_TYPES = st.sampled_from(["code", "json", "<|constrain|>json", None])
MESSAGE_CONTENT_TYPES = st.sampled_from([None, None, "json", "<|constrain|>json", "code"])  # mostly none, as usual
ANSWER_CHANNELS = st.sampled_from(["final", "final", None])  # None: the answer written with no header


@dataclass(frozen=True)
class Step:
    """One message the model writes, and for a call the output its tool gives back."""

    message: Any  # the oracle's Message
    output: str | None = None  # for a call: the tool's answer


@st.composite
def preface(draw: st.DrawFn) -> Step:
    """Reasoning or a preamble: a message that does not end the turn, at times with a content type."""
    channel = draw(st.sampled_from(["analysis", "commentary"]))
    return Step(assistant(draw(text), channel, content_type=draw(MESSAGE_CONTENT_TYPES)))


@st.composite
def ending(draw: st.DrawFn) -> Step:
    """What ends a turn: a call to a declared function, a call to another tool, or the final answer."""
    kind = draw(st.sampled_from(["function", "tool", "final"]))
    if kind == "function":
        name: str = draw(st.sampled_from([str(t["name"]) for t in TOOLS]))
        message = assistant(draw(json_args), draw(CALL_CHANNELS), "functions." + name, draw(FUNCTION_CONTENT_TYPES))
        return Step(message, draw(text))
    if kind == "tool":
        message = assistant(
            draw(text), draw(st.sampled_from(["analysis", "commentary", None])), draw(BUILTIN_RECIPIENTS),
            draw(TOOL_CONTENT_TYPES),
        )  # fmt: skip
        return Step(message, draw(text))
    return Step(assistant(draw(text), draw(ANSWER_CHANNELS), content_type=draw(MESSAGE_CONTENT_TYPES)))


turn = st.tuples(st.lists(preface(), max_size=3), ending()).map(lambda t: [*t[0], t[1]])
dialogue = st.tuples(text, st.lists(st.tuples(turn, text), min_size=1, max_size=3))


def completion(reference: Any, steps: list[Step]) -> list[int]:
    """The completion tokens the model wrote for `steps`, after the prompt's `<|start|>assistant` (by the oracle)."""
    tokens: list[int] = []
    for step in steps:
        tokens += reference.render(step.message)
    head = list(reference.render_conversation_for_completion(oracle.Conversation.from_messages([]),
                                                              oracle.Role.ASSISTANT))  # fmt: skip
    assert tokens[: len(head)] == head  # the prompt already holds the first message's `<|start|>assistant`
    tokens = tokens[len(head) :]
    if steps[-1].message.recipient is None:  # a final answer: the model stops with <|return|>
        assert tokens[-1] == END
        tokens[-1] = RETURN
    return tokens


def answer(step: Step, item: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The input item answering a call item, and the Harmony message it must render to (by the oracle's types)."""
    call = step.message
    assert step.output is not None
    if item["type"] == "function_call":
        out = {"type": "function_call_output", "call_id": item["call_id"], "output": step.output}
    else:
        out = {"type": "harmony:tool_output", "call_id": item["id"], "output": step.output}
    return out, tool_message(call.recipient, step.output, call.channel)


def load_reference() -> Any:
    """The oracle's encoding."""
    return oracle.load_harmony_encoding(oracle.HarmonyEncodingName.HARMONY_GPT_OSS)


@dataclass(frozen=True)
class Round:
    """One turn of a dialogue: the request, the model's completion, the response, and the next request."""

    before: dict[str, Any]  # the request the completion answers
    completion: list[int]
    response: dict[str, Any]  # the bridge's response, as JSON
    after: dict[str, Any]  # the next request: the output items, then the tool's answer or a new user message
    expected_before: list[int]  # the oracle's prompt for `before`
    expected_after: list[int]  # the oracle's prompt for `after` (chain-of-thought rule applied)
    answered_before: bool  # a final answer came before this turn (the reference's rule then drops analysis)
    ended_with_call: bool


Dialogue = tuple[str, list[tuple[list[Step], str]]]


def _oracle_prompt(reference: Any, messages: list[Any]) -> list[int]:
    conversation = oracle.Conversation.from_messages(messages)
    return list(reference.render_conversation_for_completion(conversation, oracle.Role.ASSISTANT))


def play(encoding: HarmonyEncoding, reference: Any, data: Dialogue, ids: IdFactory) -> Iterator[Round]:
    """Each turn of `data` through the bridge, its output items sent back as the next request's input."""
    first, turns = data
    items: list[Any] = [{"type": "message", "role": "user", "content": first}]
    messages = [*oracle_head(), user(first)]
    answered = False
    for steps, follow_up in turns:
        before = request(items)
        expected_before = _oracle_prompt(reference, messages)
        tokens = completion(reference, steps)
        response = build_response(tokens, encoding, parse_request(before), ids=ids).model_dump(mode="json")
        items = [*items, *response["output"]]
        messages = [*messages, *(step.message for step in steps)]
        last = steps[-1]
        if last.output is not None:  # the turn ended with a call: its tool answers
            item, message = answer(last, response["output"][-1])
        else:
            item, message = {"type": "message", "role": "user", "content": follow_up}, user(follow_up)
        items.append(item)
        messages.append(message)
        after = request(items)
        yield Round(before, tokens, response, after, expected_before, _oracle_prompt(reference, messages), answered,
                    last.output is not None)  # fmt: skip
        answered = answered or last.output is None
