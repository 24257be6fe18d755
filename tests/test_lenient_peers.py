"""Issue 17: lenient parsing at every peer's level.

- The peers' cases (tests/peers/cases.jsonl, see tests/peers/peer_cases.py): every case of issue 17's classes
  agrees with the peer that tests it, unless the case records a decision against that peer, which
  generated/docs/parsing.md states.
- Hidden text (an unknown channel's, a message the model addresses to itself) reaches no `message` item and no
  Chat `content` in any corpus: the peers' cases, the real-world completions, the lenient rules' cases.
- A call the token budget cut: Chat gives no `tool_calls` and `finish_reason` `length` (the call in
  `harmony:partial_tool_calls`), streamed or not; the Responses `function_call` item is `incomplete`, as the
  response is, and the repair is reported.
- Chat `content` joins the visible parts with a new line, streamed and not alike.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hidden_text import assert_hidden_text_not_shown, hidden_bodies
from test_stream import LENIENT_CASES

from harmony_responses import HarmonyEncoding
from harmony_responses._tables import spec
from harmony_responses.bridge import (
    ResponseStreamer,
    chat_completion_chunks,
    counting_ids,
    stream_response,
    to_chat_completion,
)
from harmony_responses.stream import RECOVERY_RULES
from harmony_responses.types import CreateResponseBody

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "peers"))
sys.path.insert(0, str(ROOT / "bench"))
from bench_realworld import load as load_realworld  # noqa: E402
from peer_cases import check, load  # noqa: E402

PEER_CASES = load()
ISSUE_CLASSES = {"header_without_message", "control_spelling", "content_type_after_channel", "spliced_content_type",
                 "hidden_channel", "budget_cut_call", "joined_parts", "channel_after_content_type"}  # fmt: skip
PARSING_DOC = (ROOT / "generated" / "docs" / "parsing.md").read_text(encoding="utf-8")
BODY = CreateResponseBody.model_validate({"model": "gpt-oss"})


def test_the_peer_corpus_covers_every_class_and_names_its_sources() -> None:
    assert ISSUE_CLASSES <= {c["class"] for c in PEER_CASES}
    assert len({c["id"] for c in PEER_CASES}) == len(PEER_CASES)
    for peer in ("vllm", "sglang", "ollama", "llama.cpp"):
        assert any(c["peer"] == peer for c in PEER_CASES), peer
    assert all(c["source"] and c["expect"] for c in PEER_CASES)


@pytest.mark.parametrize("case", PEER_CASES, ids=[c["id"] for c in PEER_CASES])
def test_each_peer_case_agrees_or_is_a_documented_decision(encoding: HarmonyEncoding, case: dict[str, Any]) -> None:
    misses = check(encoding, case)
    if not case.get("decided"):
        assert not misses, misses
    else:  # a decision against the peer: it holds, and the parsing docs give it
        assert misses, f"{case['id']} agrees with the peer now: drop its decision"
        assert case["id"] in PARSING_DOC, f"generated/docs/parsing.md does not give the decision on {case['id']}"


def _serve(encoding: HarmonyEncoding, text: str, role: str | None, tools: list[str], stopped: bool | None) -> Any:
    streamer = ResponseStreamer(encoding, BODY, ids=counting_ids(), created_at=0, tools=tools, role=role)
    events = [*streamer.start(), *streamer.feed_text(text), *streamer.finish(stopped)]
    return events


def _cases() -> list[tuple[str, str, str | None, list[str], bool | None]]:
    out: list[tuple[str, str, str | None, list[str], bool | None]] = []
    out += [(c["id"], c["completion"], c["role"], c["tools"], c["engine_stop"]) for c in PEER_CASES]
    out += [(c["id"], c["completion"], c["role"], c["tools"], c["engine_stop"]) for c in load_realworld()]
    out += [(f"lenient-{i}-{c[0]}", c[3], c[1], c[2], True) for i, c in enumerate(LENIENT_CASES)]
    return out


CORPORA = _cases()


@pytest.mark.parametrize("case", CORPORA, ids=[c[0] for c in CORPORA])
def test_hidden_text_is_never_shown(encoding: HarmonyEncoding, case: tuple[Any, ...]) -> None:
    _, text, role, tools, stopped = case
    events = _serve(encoding, text, role, tools, stopped)
    response = events[-1].response
    assert_hidden_text_not_shown(text, response.model_dump(mode="json"), to_chat_completion(response))
    chunks = list(chat_completion_chunks(events))
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    for body in hidden_bodies(text):
        assert body not in streamed.split("\n"), (body, streamed)


def test_the_corpora_hold_hidden_text() -> None:  # the test above is no empty promise
    assert sum(bool(hidden_bodies(c[1])) for c in CORPORA) >= 8


CUT = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Tok'


def test_a_call_cut_by_the_budget_is_no_call_to_run(encoding: HarmonyEncoding) -> None:
    events = _serve(encoding, CUT, "assistant", ["get_weather"], False)
    response = events[-1].response
    dumped = response.model_dump(mode="json")
    assert dumped["status"] == "incomplete"
    (call,) = [i for i in dumped["output"] if i["type"] == "function_call"]
    assert call["status"] == "incomplete" and call["arguments"] == '{"location":"Tok'
    assert "call_cut_by_budget" in [r["rule"] for r in dumped["harmony:repairs"]]
    assert "call_cut_by_budget" in RECOVERY_RULES
    chat = to_chat_completion(response)
    choice = chat["choices"][0]
    assert choice["finish_reason"] == "length" and "tool_calls" not in choice["message"]
    partial = choice["message"][spec.CHAT_PARTIAL_CALLS_FIELD]
    assert partial == [{"id": call["call_id"], "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"location":"Tok'}}]  # fmt: skip
    chunks = list(chat_completion_chunks(events))
    assert not any("tool_calls" in c["choices"][0]["delta"] for c in chunks if c.get("choices"))
    assert [c["choices"][0]["delta"][spec.CHAT_PARTIAL_CALLS_FIELD] for c in chunks
            if spec.CHAT_PARTIAL_CALLS_FIELD in c["choices"][0]["delta"]] == [partial]  # fmt: skip
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_a_complete_call_streams_as_before_once_it_is_done(encoding: HarmonyEncoding) -> None:
    text = CUT + 'yo"}<|call|>'
    events = _serve(encoding, text, "assistant", ["get_weather"], True)
    chunks = [c["choices"][0] for c in chat_completion_chunks(events) if c.get("choices")]
    calls = [c["delta"]["tool_calls"][0] for c in chunks if "tool_calls" in c["delta"]]
    assert calls[0]["function"] == {"name": "get_weather", "arguments": ""} and calls[0]["index"] == 0
    assert "".join(c["function"]["arguments"] for c in calls[1:]) == '{"location":"Tokyo"}'
    assert chunks[-1]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("pieces", [1, 4])
def test_preamble_and_answer_are_joined_with_a_new_line(encoding: HarmonyEncoding, pieces: int) -> None:
    text = ("<|channel|>commentary<|message|>Let me look that up.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>The answer is 42.<|return|>")  # fmt: skip
    chunks = [text[i : i + pieces] for i in range(0, len(text), pieces)]
    events: list[Any] = list(
        stream_response(chunks, encoding, BODY, ids=counting_ids(), created_at=0, clock=lambda: 0.0)
    )
    expected = "Let me look that up." + spec.CHAT_VISIBLE_SEPARATOR + "The answer is 42."
    assert to_chat_completion(events[-1].response)["choices"][0]["message"]["content"] == expected
    streamed = [c["choices"][0]["delta"].get("content") for c in chat_completion_chunks(events) if c.get("choices")]
    assert "".join(s or "" for s in streamed) == expected
