"""Token-exact rendering against the reference's own goldens and the 300-case corpus."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harmony_responses import (
    Conversation,
    HarmonyEncoding,
    Message,
    RenderConversationConfig,
    Role,
)

from conftest import FIXTURES, read_jsonl, require

CASES_FILE = FIXTURES / "reference" / "cases.json"


def _cases() -> list[dict[str, Any]]:
    return list(json.loads(require(CASES_FILE).read_text(encoding="utf-8")))


def _corpus() -> list[dict[str, Any]]:
    return read_jsonl(FIXTURES / "corpus" / "render.jsonl")


def render_case(encoding: HarmonyEncoding, case: dict[str, Any]) -> list[int]:
    drop = case.get("auto_drop_analysis")
    config = None if drop is None else RenderConversationConfig(auto_drop_analysis=drop)
    function = case["function"]
    if function == "render":
        return encoding.render(Message.from_dict(case["message"]))
    conversation = Conversation.from_json(json.dumps(case["conversation"]))
    if function == "render_conversation_for_completion":
        return encoding.render_conversation_for_completion(conversation, Role(case["next_turn_role"]), config)
    if function == "render_conversation_for_training":
        return encoding.render_conversation_for_training(conversation, config)
    assert function == "render_conversation", function
    return encoding.render_conversation(conversation, config)


def test_fixture_counts() -> None:
    require(CASES_FILE)
    assert len(_cases()) == 28
    assert len(_corpus()) == 300


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c['reference_file']}-{c['function']}")
def test_reference_cases_token_exact(encoding: HarmonyEncoding, case: dict[str, Any]) -> None:
    tokens = render_case(encoding, case)
    assert tokens == case["expected_tokens"]
    assert encoding.decode_utf8(tokens) == case["expected_text"]


def _golden_files() -> list[str]:
    return sorted({c["reference_file"] for c in _cases() if c["reference_file"]})


@pytest.mark.parametrize("name", _golden_files())
def test_reference_golden_text_files(encoding: HarmonyEncoding, name: str) -> None:
    """Each golden rendering (decoded tokens, trailing whitespace stripped) is produced by its case."""
    golden = require(FIXTURES / "reference" / name).read_text(encoding="utf-8").rstrip()
    rendered = [
        encoding.decode_utf8(render_case(encoding, c)).rstrip() for c in _cases() if c["reference_file"] == name
    ]
    if all(part.isdigit() for part in golden.split()):
        ids = [int(part) for part in golden.split()]
        assert any(encoding.encode(text, allowed_special="all") == ids for text in rendered)
    else:
        assert golden in rendered


@pytest.mark.parametrize("case", _corpus(), ids=lambda c: str(c["id"]))
def test_corpus_token_exact(encoding: HarmonyEncoding, case: dict[str, Any]) -> None:
    assert render_case(encoding, case) == case["expected_tokens"]
