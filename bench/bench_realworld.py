"""Accuracy on real gpt-oss completions: tests/realworld/completions.jsonl, at two levels.

- message level: the messages `HarmonyStreamParser` finds in lenient mode, configured as the bridge
  configures it (the request's function names, reading stops at the end of the turn), against the
  messages the case expects (role, author name, channel, recipient, content type, content);
- served level: the Chat Completions projection of the response the bridge builds (`ResponseStreamer`, the
  engine's finish reason passed to `finish`): `reasoning_content`, `content`, `tool_calls` (name and
  arguments, compared as JSON when both sides are JSON) and `finish_reason`.

Each case is fed as text in one piece and, to check that streaming changes nothing, as text in chunks of
three characters; a case that also gives token ids is fed as tokens too. A case counts as right only when
every feeding gives the expected result. A third figure is the served level as `harmony-responses respond
--chat` gives it with no `--finish` (the engine's finish reason unknown: text is taken as stopped), which
can only miss the cases whose engine ran out of budget.

    TIKTOKEN_ENCODINGS_BASE=../shared/vocab .venv/bin/python bench/bench_realworld.py [-v] [--class CLASS]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "realworld" / "completions.jsonl"
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(ROOT.parent / "shared" / "vocab"))

from harmony_responses import HarmonyEncoding, HarmonyEncodingName, load_harmony_encoding  # noqa: E402
from harmony_responses.bridge import ResponseStreamer, counting_ids, to_chat_completion  # noqa: E402
from harmony_responses.stream import HarmonyStreamParser, MessageEnd  # noqa: E402
from harmony_responses.types import (  # noqa: E402
    CreateResponseBody,
    ResponseCompletedStreamingEvent,
    ResponseFailedStreamingEvent,
    ResponseIncompleteStreamingEvent,
)

FIELDS = ("role", "name", "channel", "recipient", "content_type", "content")


def load(path: Path = CORPUS) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def feedings(case: dict[str, Any]) -> list[tuple[str, list[int] | list[str]]]:
    text: str = case["completion"]
    out: list[tuple[str, list[int] | list[str]]] = [("text", [text])]
    if len(text) > 3:
        out.append(("chunks", [text[i : i + 3] for i in range(0, len(text), 3)]))
    if "tokens" in case:
        out.append(("tokens", list(case["tokens"])))
    return out


def parse_messages(encoding: HarmonyEncoding, case: dict[str, Any], pieces: Iterable[Any]) -> list[dict[str, Any]]:
    parser = HarmonyStreamParser(encoding, case["role"], "lenient", case["tools"], stop_at_turn_end=True)
    events = []
    for piece in pieces:
        events += parser.feed_text(piece) if isinstance(piece, str) else parser.feed_tokens([piece])
    events += parser.close()
    out = []
    for event in events:
        if isinstance(event, MessageEnd):
            m = event.message
            out.append({"role": m.role.value, "name": m.name, "channel": m.channel, "recipient": m.recipient,
                        "content_type": m.content_type, "content": m.content})  # fmt: skip
    return out


def request_of(case: dict[str, Any]) -> CreateResponseBody:
    tools = [{"type": "function", **tool} for tool in case.get("tool_defs", [])]
    return CreateResponseBody.model_validate({"model": "gpt-oss", "tools": tools} if tools else {"model": "gpt-oss"})


def serve_chat(
    encoding: HarmonyEncoding, case: dict[str, Any], pieces: Iterable[Any], stopped: bool | None = True
) -> dict[str, Any]:
    streamer = ResponseStreamer(
        encoding, request_of(case), ids=counting_ids(), created_at=0, tools=case["tools"], role=case["role"]
    )
    streamer.start()
    for piece in pieces:
        if isinstance(piece, str):
            streamer.feed_text(piece)
        else:
            streamer.feed(piece)
    events = streamer.finish(case["engine_stop"] if stopped else None)
    last = events[-1]
    if not isinstance(
        last, ResponseCompletedStreamingEvent | ResponseIncompleteStreamingEvent | ResponseFailedStreamingEvent
    ):
        raise AssertionError(f"the stream ends with {last.type}, not with the response's terminal event")
    response = last.response
    chat = to_chat_completion(response)
    choice = chat["choices"][0]
    message = choice["message"]
    calls = [
        {"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in message.get("tool_calls", [])
    ]
    return {
        "reasoning_content": message["reasoning_content"],
        "content": message["content"],
        "tool_calls": calls,
        "finish_reason": choice["finish_reason"],
    }


def _json_or_text(value: str) -> Any:
    try:
        return ("json", json.loads(value))
    except ValueError:
        return ("text", value)


def same_chat(got: dict[str, Any], want: dict[str, Any]) -> bool:
    if [c["name"] for c in got["tool_calls"]] != [c["name"] for c in want["tool_calls"]]:
        return False
    for g, w in zip(got["tool_calls"], want["tool_calls"], strict=True):
        if _json_or_text(g["arguments"]) != _json_or_text(w["arguments"]):
            return False
    return all(got[key] == want[key] for key in ("reasoning_content", "content", "finish_reason"))


def same_messages(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    return [{k: m[k] for k in FIELDS} for m in got] == [{k: m[k] for k in FIELDS} for m in want]


def score(encoding: HarmonyEncoding, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Per case: whether the messages and the Chat projection are right under every feeding; and the first miss."""
    results = []
    for case in cases:
        msg_ok = chat_ok = True
        misses: list[str] = []
        for how, pieces in feedings(case):
            try:
                messages = parse_messages(encoding, case, pieces)
            except Exception as exc:  # a raise is a miss, and worth seeing
                messages = [{"error": repr(exc)}]
            if (messages and "error" in messages[0]) or not same_messages(messages, case["expected_messages"]):
                msg_ok = False
                misses.append(f"messages ({how}): {json.dumps(messages, ensure_ascii=False)[:600]}")
            try:
                chat = serve_chat(encoding, case, pieces)
            except Exception as exc:
                chat = {"error": repr(exc)}
            if "error" in chat or not same_chat(chat, case["expected_chat"]):
                chat_ok = False
                misses.append(f"chat ({how}): {json.dumps(chat, ensure_ascii=False)[:600]}")
        unknown = serve_chat(encoding, case, [case["completion"]], stopped=None)
        results.append(
            {
                "id": case["id"],
                "class": case["class"],
                "messages": msg_ok,
                "chat": chat_ok,
                "misses": misses,
                "chat_unknown_finish": same_chat(unknown, case["expected_chat"]),
            }  # fmt: skip
        )
    n = len(results)
    return {
        "cases": n,
        "messages": sum(r["messages"] for r in results) / n,
        "chat": sum(r["chat"] for r in results) / n,
        "chat_unknown_finish": sum(r["chat_unknown_finish"] for r in results) / n,
        "results": results,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="print every miss")
    ap.add_argument("--class", dest="cls", help="only the cases of this class")
    args = ap.parse_args()
    encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    cases = [c for c in load() if args.cls in (None, c["class"])]
    report = score(encoding, cases)
    by_class: dict[str, Counter[str]] = {}
    for r in report["results"]:
        counter = by_class.setdefault(r["class"], Counter())
        counter["n"] += 1
        counter["messages"] += r["messages"]
        counter["chat"] += r["chat"]
        if args.verbose and r["misses"]:
            print(f"-- {r['id']}")
            for miss in r["misses"]:
                print("   " + miss)
    print(f"{'class':<16} {'cases':>5} {'messages':>9} {'chat':>9}")
    for cls, c in sorted(by_class.items()):
        print(f"{cls:<16} {c['n']:>5} {c['messages']:>9} {c['chat']:>9}")
    print(f"{'all':<16} {report['cases']:>5} {report['messages']:>9.1%} {report['chat']:>9.1%}")
    unknown = report["chat_unknown_finish"]
    print(f"served with the engine's finish reason unknown (respond --chat, no --finish): {unknown:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
