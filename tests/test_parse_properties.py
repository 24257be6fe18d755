"""Properties of the parsers: round trips, chunking invariance, lenient totality, delta concatenation."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harmony_responses import (
    Author,
    ContentDelta,
    HarmonyEncoding,
    HarmonyParseError,
    HarmonyStreamParser,
    Message,
    MessageEnd,
    Recovered,
    Role,
    TextContent,
    parse_text,
    parse_tokens,
)
from harmony_responses.stream import Event

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SPELLINGS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|call|>", "<|return|>", "<|constrain|>"]

body_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
safe_text = body_text.filter(lambda t: "<|" not in t)


@st.composite
def messages(draw: Any) -> Message:
    role = draw(st.sampled_from([Role.ASSISTANT, Role.ASSISTANT, Role.USER, Role.SYSTEM, Role.DEVELOPER, Role.TOOL]))
    name = draw(st.sampled_from(["functions.get_weather", "browser.search", "python"])) if role is Role.TOOL else None
    msg = Message(author=Author(role=role, name=name), content=[TextContent(text=draw(body_text))])
    if role in (Role.ASSISTANT, Role.TOOL) or draw(st.booleans()):
        msg.channel = draw(st.sampled_from(["analysis", "commentary", "final"]))
    if role is Role.TOOL:
        msg.recipient = "assistant"
    elif role is Role.ASSISTANT and draw(st.booleans()):
        msg.recipient = draw(st.sampled_from(["functions.get_weather", "python", "browser.open"]))
    if msg.recipient is not None and draw(st.booleans()):
        msg.content_type = draw(st.sampled_from(["json", "code", "<|constrain|>json"]))
    return msg


def _deltas_ok(events: list[Event]) -> list[Any]:
    parts: dict[int, list[str]] = {}
    ended = []
    for event in events:
        if isinstance(event, ContentDelta):
            parts.setdefault(event.index, []).append(event.text)
        elif isinstance(event, MessageEnd):
            assert "".join(parts.get(event.index, [])) == event.message.content
            ended.append(event.message)
    return ended


@SETTINGS
@given(st.lists(messages(), min_size=1, max_size=4))
def test_render_then_parse_returns_the_messages(encoding: HarmonyEncoding, msgs: list[Message]) -> None:
    tokens = [t for m in msgs for t in encoding.render(m)]
    parsed = parse_tokens(encoding, tokens, None)
    assert [p.to_message() for p in parsed] == msgs
    assert encoding.parse_messages_from_completion_tokens(tokens, None) == msgs


@SETTINGS
@given(st.lists(messages(), min_size=1, max_size=3), st.lists(st.integers(0, 10_000), max_size=12))
def test_any_chunking_gives_the_same_messages(encoding: HarmonyEncoding, msgs: list[Message], cuts: list[int]) -> None:
    text = encoding.decode([t for m in msgs for t in encoding.render(m)])
    whole = HarmonyStreamParser(encoding, None, "lenient")
    expected = _deltas_ok(whole.feed_text(text) + whole.close())
    points = sorted({c % (len(text) + 1) for c in cuts})
    parser = HarmonyStreamParser(encoding, None, "lenient")
    events: list[Event] = []
    last = 0
    for point in [*points, len(text)]:
        events += parser.feed_text(text[last:point])
        last = point
    assert _deltas_ok(events + parser.close()) == expected
    if all("<|" not in (c.text if isinstance(c, TextContent) else "") for m in msgs for c in m.content):
        assert [p.to_message() for p in expected] == msgs


@SETTINGS
@given(
    st.lists(
        st.one_of(st.integers(0, 199_997), st.sampled_from([199998, 199999, *range(200000, 200019), 201088])),
        max_size=40,
    ),
    st.sampled_from([None, "assistant", "user"]),
)
def test_lenient_never_raises_on_token_lists(encoding: HarmonyEncoding, tokens: list[int], role: str | None) -> None:
    parser = HarmonyStreamParser(encoding, role, "lenient")
    _deltas_ok(parser.feed_tokens(tokens) + parser.close())


@SETTINGS
@given(
    st.lists(st.one_of(body_text, st.sampled_from(SPELLINGS + ["assistant", " to=functions.f", "analysis", " json"]))),
    st.sampled_from([None, "assistant"]),
    st.lists(st.integers(0, 1000), max_size=6),
)
def test_lenient_never_raises_on_text(
    encoding: HarmonyEncoding, pieces: list[str], role: str | None, cuts: list[int]
) -> None:
    text = "".join(pieces)
    parser = HarmonyStreamParser(encoding, role, "lenient", tools=["f"])
    events: list[Event] = []
    last = 0
    for point in [*sorted({c % (len(text) + 1) for c in cuts}), len(text)]:
        events += parser.feed_text(text[last:point])
        last = point
    _deltas_ok(events + parser.close())


@SETTINGS
@given(
    st.lists(st.one_of(body_text, st.sampled_from(SPELLINGS + ["assistant", " to=functions.f", "final", " json"]))),
    st.sampled_from([None, "assistant"]),
)
def test_strict_raises_only_typed_errors(encoding: HarmonyEncoding, pieces: list[str], role: str | None) -> None:
    text = "".join(pieces)
    try:
        by_text = parse_text(encoding, text, role)
    except HarmonyParseError as exc:
        assert exc.position >= 0 and exc.unit == "character"
        return
    lenient = HarmonyStreamParser(encoding, role, "lenient")
    events = lenient.feed_text(text) + lenient.close()
    if not any(isinstance(e, Recovered) for e in events):  # nothing to repair: lenient reads it as strict does
        assert [e.message for e in events if isinstance(e, MessageEnd)] == by_text
