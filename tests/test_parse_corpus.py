"""Differential tests: the reference-compatible parser against openai-harmony 0.0.8's recorded behaviour.

`corpus/parse.jsonl` pins the messages (or the exact error text) of whole completions;
`corpus/stream.jsonl` pins the observable state of `StreamableParser` after every token.
"""

from __future__ import annotations

from typing import Any

import pytest

from harmony_responses import HarmonyEncoding, HarmonyError, Role, StreamableParser

from conftest import FIXTURES, read_jsonl

PARSE_CASES = read_jsonl(FIXTURES / "corpus" / "parse.jsonl")
STREAM_CASES = read_jsonl(FIXTURES / "corpus" / "stream.jsonl")


def _role(value: str | None) -> Role | None:
    return Role(value) if value is not None else None


def _parse(encoding: HarmonyEncoding, case: dict[str, Any]) -> list[dict[str, Any]] | str:
    try:
        messages = encoding.parse_messages_from_completion_tokens(
            case["tokens"], _role(case["role"]), strict=case["strict"]
        )
    except HarmonyError as exc:
        return f"error: {exc}"
    return [m.to_dict() for m in messages]


def test_parse_corpus_is_complete() -> None:
    assert len(PARSE_CASES) == 500
    assert sum("expected_error" in c for c in PARSE_CASES) > 0
    assert sum(not c["strict"] for c in PARSE_CASES) > 0


@pytest.mark.parametrize("case", PARSE_CASES, ids=[c["id"] for c in PARSE_CASES])
def test_parse_corpus(encoding: HarmonyEncoding, case: dict[str, Any]) -> None:
    got = _parse(encoding, case)
    if "expected_error" in case:
        assert got == f"error: {case['expected_error']}"
    else:
        assert got == case["expected_messages"]


def _observe(parser: StreamableParser) -> dict[str, Any]:
    role = parser.current_role
    return {
        "state": parser.state.name,
        "current_role": role.value if role is not None else None,
        "current_channel": parser.current_channel,
        "current_recipient": parser.current_recipient,
        "current_content_type": parser.current_content_type,
        "last_content_delta": parser.last_content_delta,
        "current_content": parser.current_content,
        "messages_so_far": len(parser.messages),
    }


@pytest.mark.parametrize("case", STREAM_CASES, ids=[c["id"] for c in STREAM_CASES])
def test_stream_corpus(encoding: HarmonyEncoding, case: dict[str, Any]) -> None:
    parser = StreamableParser(encoding, _role(case["role"]), strict=case["strict"])
    steps = case["steps"]
    for index, token in enumerate(case["tokens"]):
        try:
            parser.process(token)
        except HarmonyError as exc:
            assert case.get("error_at_step") == index, f"unexpected error at step {index}: {exc}"
            assert str(exc) == case["error"]
            assert len(steps) == index
            return
        assert _observe(parser) == steps[index], f"step {index} (token {token})"
        assert parser.tokens == case["tokens"][: index + 1]
    assert "error" not in case, "the reference raised, the parser did not"
    assert len(steps) == len(case["tokens"])
    try:
        parser.process_eos()
    except HarmonyError as exc:
        assert str(exc) == case.get("eos_error")
        return
    assert "eos_error" not in case, "the reference raised at end of stream, the parser did not"
    assert [m.to_dict() for m in parser.messages] == case["final_messages"]


def test_state_data_shapes(encoding: HarmonyEncoding) -> None:
    parser = StreamableParser(encoding, None)
    assert parser.state_data == {"state": "ExpectStart"}
    tokens = encoding.encode("<|start|>assistant<|channel|>final<|message|>Hi", allowed_special="all")
    for token in tokens[:3]:
        parser.process(token)
    assert parser.state_data == {"state": "Header", "header_tokens": tokens[1:3]}
    for token in tokens[3:]:
        parser.process(token)
    data = parser.state_data
    assert data["state"] == "Content"
    assert data["header"]["channel"] == "final"
    assert data["content_tokens"] == encoding.encode("Hi")
