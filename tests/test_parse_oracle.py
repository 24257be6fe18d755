"""Differential test of StreamableParser against the reference itself (openai-harmony 0.0.8) on token
sequences the fixtures do not cover: invalid and split UTF-8, stray control tokens, both modes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harmony_responses import HarmonyEncoding, HarmonyError, Role, StreamableParser

oracle = pytest.importorskip("openai_harmony", reason="openai-harmony is installed by the test extras")

SPLIT_BYTE = 100066  # b"\xe9\x8f": the first two bytes of a three-byte character
CONTINUATION = 94  # b"\xa1"
SPACE = 220
CONTROL = [200002, 200003, 200005, 200006, 200007, 200008, 200012]
HEADER = [173781, 17196, 35644, 12606, 316, 28, 1114]  # assistant, final, analysis, commentary, " to", "=", ...
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def reference() -> Any:
    return oracle.load_harmony_encoding(oracle.HarmonyEncodingName.HARMONY_GPT_OSS)


def _observe(parser: Any) -> tuple[Any, ...]:
    data = parser.state_data
    data = json.loads(data) if isinstance(data, str) else data
    role = parser.current_role
    return (
        getattr(parser.state, "name", str(parser.state)).upper().replace("EXPECTSTART", "EXPECT_START"),
        getattr(role, "value", role),
        parser.current_channel,
        parser.current_recipient,
        parser.current_content_type,
        parser.last_content_delta,
        parser.current_content,
        len(parser.messages),
        data,
    )


def _run(parser: Any, tokens: list[int]) -> tuple[list[tuple[Any, ...]], str | list[Any]]:
    steps = []
    try:
        for token in tokens:
            parser.process(token)
            steps.append(_observe(parser))
        parser.process_eos()
    except Exception as exc:  # the reference raises HarmonyError of its own module
        return steps, f"error: {exc}"
    return steps, [m.to_dict() for m in parser.messages]


@SETTINGS
@given(
    st.lists(st.sampled_from([SPLIT_BYTE, CONTINUATION, SPACE, 9906, *CONTROL, *HEADER]), max_size=30),
    st.sampled_from([None, "assistant"]),
    st.booleans(),
)
def test_per_token_state_matches_the_reference(
    encoding: HarmonyEncoding, reference: Any, tokens: list[int], role: str | None, strict: bool
) -> None:
    ours = StreamableParser(encoding, Role(role) if role else None, strict=strict)
    theirs = oracle.StreamableParser(reference, oracle.Role(role) if role else None, strict=strict)
    assert _run(ours, tokens) == _run(theirs, tokens)


@SETTINGS
@given(st.lists(st.sampled_from([SPLIT_BYTE, CONTINUATION, SPACE, 9906, *CONTROL, *HEADER]), max_size=40))
def test_whole_completion_matches_the_reference(encoding: HarmonyEncoding, reference: Any, tokens: list[int]) -> None:
    def parse(enc: Any, role: Any) -> Any:
        try:
            return [m.to_dict() for m in enc.parse_messages_from_completion_tokens(tokens, role)]
        except Exception as exc:
            return f"error: {exc}"

    ours = parse(encoding, Role.ASSISTANT)
    assert ours == parse(reference, oracle.Role.ASSISTANT)
    if isinstance(ours, str):
        with pytest.raises(HarmonyError):
            encoding.parse_messages_from_completion_tokens(tokens, Role.ASSISTANT)
