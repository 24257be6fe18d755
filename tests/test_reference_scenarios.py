"""Scenarios of the reference's own Python test-suite beyond the rendering goldens, in our words."""

from __future__ import annotations

import pytest

from harmony_responses import Author, Conversation, HarmonyEncoding, HarmonyError, Message, Role, StreamableParser

from conftest import FIXTURES

A = Role.ASSISTANT
M = Message.from_role_and_content
CALL_JSON = '{"location": "Tokyo"}'
LATLON = '{"latitude":48.8566,"longitude":2.3522}'
TO_WEATHER = "<|start|>assistant to=functions.get_weather"
REFUSAL = "I'm sorry, but I can't help with that."


def _ids(name: str) -> list[int]:
    return [int(x) for x in (FIXTURES / "reference" / name).read_text().split()]


def _stream(encoding: HarmonyEncoding, tokens: list[int], role: Role | None = None) -> tuple[StreamableParser, str]:
    parser = StreamableParser(encoding, role)
    deltas = []
    for token in tokens:
        parser.process(token)
        if parser.last_content_delta is not None:
            deltas.append(parser.last_content_delta)
    return parser, "".join(deltas)


def test_reasoning_and_tool_call_fixtures(encoding: HarmonyEncoding) -> None:
    parsed = encoding.parse_messages_from_completion_tokens(_ids("test_simple_reasoning_response.txt"), role=A)
    assert parsed == [
        M(A, 'User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.').with_channel("analysis"),
        M(A, "2 + 2 = 4.").with_channel("final"),
    ]
    parsed = encoding.parse_messages_from_completion_tokens(_ids("test_simple_tool_call.txt"), role=A)
    expected = M(A, CALL_JSON).with_channel("analysis").with_recipient("lookup_weather").with_content_type("code")
    assert parsed[1] == expected


@pytest.mark.parametrize(
    ("text", "body"),
    [
        (
            f"{TO_WEATHER}<|channel|>commentary <|constrain|>json<|message|>{CALL_JSON}<|call|>",
            CALL_JSON,
        ),
        (
            f"{TO_WEATHER}<|channel|>commentary<|constrain|>json<|message|>{CALL_JSON}<|call|>",
            CALL_JSON,
        ),
        (
            f"<|start|>assistant<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>{LATLON}"
            "<|call|>",
            LATLON,
        ),
    ],
)
def test_constrained_tool_calls(encoding: HarmonyEncoding, text: str, body: str) -> None:
    tokens = encoding.encode(text, allowed_special="all")
    expected = [
        M(A, body)
        .with_channel("commentary")
        .with_recipient("functions.get_weather")
        .with_content_type("<|constrain|>json")
    ]
    assert encoding.parse_messages_from_completion_tokens(tokens, role=None) == expected
    assert _stream(encoding, tokens)[0].messages == expected
    if " <|constrain|>" in text:  # the canonical spelling renders back to the same tokens
        assert encoding.render_conversation(Conversation.from_messages(expected)) == tokens


def test_constrained_final_without_recipient(encoding: HarmonyEncoding) -> None:
    text = '<|start|>assistant<|channel|>final <|constrain|>json<|message|>{"result":true}<|return|>'
    parser, _ = _stream(encoding, encoding.encode(text, allowed_special="all"))
    # openai-harmony 0.0.8 reads the lone constrained word as the recipient (a known reference defect, see
    # harmony-notes.md); the event API (parse_text/parse_tokens) reads it as the content type.
    assert parser.messages == [M(A, '{"result":true}').with_channel("final").with_recipient("<|constrain|>json")]


MISSING_MESSAGE_TOKEN = [
    (
        "I must refuse<|end|><|start|>assistant<|channel|>analysis<|message|>We must refuse<|end|>"
        f"<|start|>assistant<|channel|>final<|message|>{REFUSAL}<|return|>",
        [M(A, "I must refuse"), M(A, "We must refuse").with_channel("analysis"), M(A, REFUSAL).with_channel("final")],
    ),
    (
        "<|channel|>analysis I must refuse<|end|><|start|>assistant<|channel|>analysis<|message|>We must refuse<|end|>"
        f"<|start|>assistant<|channel|>final<|message|>{REFUSAL}<|return|>",
        [
            M(A, "I must refuse").with_channel("analysis"),
            M(A, "We must refuse").with_channel("analysis"),
            M(A, REFUSAL).with_channel("final"),
        ],
    ),
    (
        "... Let's use the tool.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json"
        f"<|message|>{CALL_JSON}<|call|>",
        [
            M(A, "... Let's use the tool."),
            M(A, CALL_JSON)
            .with_channel("commentary")
            .with_recipient("functions.get_weather")
            .with_content_type("json"),
        ],
    ),
]


@pytest.mark.parametrize(("text", "expected"), MISSING_MESSAGE_TOKEN)
def test_missing_message_token(encoding: HarmonyEncoding, text: str, expected: list[Message]) -> None:
    tokens = encoding.encode(text, allowed_special="all")
    lenient = StreamableParser(encoding, A, strict=False)
    for token in tokens:
        lenient.process(token)
    assert lenient.messages == expected
    strict = StreamableParser(encoding, A, strict=True)
    with pytest.raises(HarmonyError, match="unexpected tokens remaining in message header"):
        for token in tokens:
            strict.process(token)


def test_invalid_utf8_in_bodies(encoding: HarmonyEncoding) -> None:
    prefix = encoding.encode("<|start|>assistant<|message|>", allowed_special="all")
    end = [200007]
    parser, _ = _stream(encoding, prefix + [9552, 9552] + encoding.encode("worked") + end)
    assert parser.messages == [M(A, " \ufffd \ufffdworked")]
    parser, _ = _stream(encoding, prefix + [9552] + encoding.encode("XY") + end)
    assert parser.messages == [M(A, " \ufffdXY")]
    parser, _ = _stream(encoding, prefix + [9552] + encoding.encode(" interesting") + end)
    assert parser.messages == [M(A, " \ufffd interesting")]
    parser, deltas = _stream(encoding, prefix + [9552] + encoding.encode(" interesting") + encoding.encode(" story"))
    assert parser.current_content == deltas == " \ufffd interesting story"
    parser.process(encoding.encode("Y")[0])
    assert parser.last_content_delta == "Y"
    assert parser.current_content == " \ufffd interesting storyY"


def test_tricky_utf8_deltas(encoding: HarmonyEncoding) -> None:
    text = (
        "Hello Müller, Γειά σου, Привет, שלום, مرحبا, नमस्ते, こんにちは, 안녕하세요, 你好. "
        "Normalized (naïve) vs. decomposed (naïve) characters. Some emojis: 😊👋🏾👨👩👧👦🇺🇸."
    )
    prefix = encoding.encode("<|start|>assistant<|message|>", allowed_special="all")
    parser, deltas = _stream(encoding, prefix + encoding.encode(text) + [200007])
    assert parser.messages == [M(A, text)]
    assert deltas == text


def test_tool_response_and_streamable_fixtures(encoding: HarmonyEncoding) -> None:
    msg = (
        Message.from_author_and_content(Author.new(Role.TOOL, "browser.search"), '{"result": "https://openai.com/"}')
        .with_channel("commentary")
        .with_recipient("assistant")
    )
    tokens = encoding.render(msg)[:-1]
    assert len(encoding.parse_messages_from_completion_tokens(tokens, None)) == 1
    assert (
        encoding.decode_utf8(tokens) == (FIXTURES / "reference" / "test_tool_response_parsing.txt").read_text().rstrip()
    )
    text = (FIXTURES / "reference" / "test_streamable_parser.txt").read_text().rstrip()
    parser, _ = _stream(encoding, encoding.encode(text, allowed_special="all"), A)
    assert len(parser.messages) == 3
