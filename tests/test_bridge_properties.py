"""Properties of the Harmony → Open Responses bridge over generated completions.

Any sequence of assistant messages, cut anywhere, streams into events that validate against the spec
and obey the ordering rules; items carry exactly the messages' texts; SSE round-trips.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from responses_checker import check_stream
from typed_values import harmony_text

from harmony_responses import HarmonyEncoding, Message, Role
from harmony_responses.bridge import build_response, counting_ids, parse_sse, stream_response, to_sse

from strategies import identifier, text

_KINDS = ("analysis", "final", "preamble", "call", "builtin")


@st.composite
def assistant_turn(draw: st.DrawFn) -> list[tuple[str, Message]]:
    kinds = draw(st.lists(st.sampled_from(_KINDS[:3]), max_size=4))
    if draw(st.booleans()):
        kinds.append(draw(st.sampled_from(_KINDS[3:])))  # a call ends the turn
    out = []
    for kind in kinds:
        body = draw(text)
        msg = Message.from_role_and_content(Role.ASSISTANT, body)
        if kind == "analysis":
            msg = msg.with_channel("analysis")
        elif kind == "final":
            msg = msg.with_channel("final")
        elif kind == "preamble":
            msg = msg.with_channel("commentary")
        elif kind == "call":
            name = draw(identifier) + draw(st.sampled_from(["", ".v2", "-x"]))
            msg = (
                msg.with_channel("commentary")
                .with_recipient(f"functions.{name}")
                .with_content_type("<|constrain|>json")
            )
        else:
            msg = msg.with_channel("analysis").with_recipient("browser.search")
        out.append((kind, msg))
    return out


def completion_tokens(encoding: HarmonyEncoding, turn: list[tuple[str, Message]]) -> list[int]:
    tokens: list[int] = []
    for _, msg in turn:
        tokens += encoding.render(msg)
    return tokens


def events_for(encoding: HarmonyEncoding, tokens: list[int]) -> list[Any]:
    return list(stream_response(tokens, encoding, ids=counting_ids(), created_at=0, role=None))


@settings(max_examples=40, deadline=None)
@given(turn=assistant_turn())
def test_any_turn_streams_valid_ordered_events_carrying_every_message(
    encoding: HarmonyEncoding, turn: list[tuple[str, Message]]
) -> None:
    tokens = completion_tokens(encoding, turn)
    events = events_for(encoding, tokens)
    check_stream([e.model_dump(mode="json") for e in events])
    assert parse_sse("".join(to_sse(events))) == events
    response = events[-1].response
    assert response.status == "completed"
    expected = {"analysis": "reasoning", "final": "message", "preamble": "message", "call": "function_call",
                "builtin": "harmony:browser_call"}  # fmt: skip
    assert [o.type for o in response.output] == [expected[kind] for kind, _ in turn]
    for (kind, msg), item in zip(turn, response.output, strict=True):
        dumped = item.model_dump()
        body = harmony_text(msg)
        if kind == "call":
            arguments = body if body.strip() else body + "{}"  # empty arguments become {}
            assert msg.recipient is not None
            assert dumped["arguments"] == arguments and dumped["name"] == msg.recipient.removeprefix("functions.")
        elif kind == "builtin":
            assert dumped["arguments"] == body
        else:
            assert dumped["content"][0]["text"] == body


@settings(max_examples=40, deadline=None)
@given(turn=assistant_turn(), cut=st.floats(0, 1))
def test_a_turn_cut_anywhere_still_streams_valid_events(
    encoding: HarmonyEncoding, turn: list[tuple[str, Message]], cut: float
) -> None:
    tokens = completion_tokens(encoding, turn)
    k = int(len(tokens) * cut)
    events = events_for(encoding, tokens[:k])
    check_stream([e.model_dump(mode="json") for e in events])
    assert events[-1].type in ("response.completed", "response.incomplete")
    final = build_response(tokens[:k], encoding, ids=counting_ids(), created_at=0, role=None)
    assert final.status == events[-1].response.status
