"""The peers' cases (tests/peers/cases.jsonl) run through this project: agreement per class of issue 17.

Each case is an input one of the peers that serve gpt-oss (vLLM, SGLang, Ollama, llama.cpp) tests in its own
suite (`source` names the file and test), with what that peer asserts about it (`expect`); the inputs and the
expected outputs are facts taken from those suites, the code reading them is this project's. The keys of `expect`:

- `content`, `reasoning_content`, `tool_calls` (name and arguments), `finish_reason`: the Chat Completions
  projection of the response (`to_chat_completion`), the engine's finish reason given (`engine_stop`);
- `visible_texts`, `reasoning_texts`, `call_arguments`: the texts of the response's `message` items, of its
  `reasoning` items and the arguments of its `function_call` items, in order;
- `function_call_status`, `status`: the statuses of the `function_call` items and of the response;
- `headers`: the messages lenient parsing finds (role, channel, recipient, content type), configured as the
  bridge configures it.

Only the keys a peer asserts are compared. Each case is fed whole, in chunks of three characters and as token
ids; it agrees when every feeding gives what the peer expects. Where this project decided against a peer, the case
says so (`decided`; spec/harmony/parsing.json's `peer_decisions` gives the reason, generated/docs/parsing.md
shows it); such a case is counted apart.

    TIKTOKEN_ENCODINGS_BASE=../shared/vocab .venv/bin/python tests/peers/peer_cases.py [-v]
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases.jsonl"
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(HERE.parents[2] / "shared" / "vocab"))

from harmony_responses import HarmonyEncoding, HarmonyEncodingName, load_harmony_encoding  # noqa: E402
from harmony_responses.bridge import ResponseStreamer, counting_ids, to_chat_completion  # noqa: E402
from harmony_responses.stream import HarmonyStreamParser, MessageEnd  # noqa: E402
from harmony_responses.types import (  # noqa: E402
    CreateResponseBody,
    ResponseCompletedStreamingEvent,
    ResponseFailedStreamingEvent,
    ResponseIncompleteStreamingEvent,
)

CHAT_KEYS = ("content", "reasoning_content", "tool_calls", "finish_reason")


def load(path: Path = CASES) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def feedings(case: dict[str, Any], encoding: HarmonyEncoding) -> list[list[Any]]:
    text: str = case["completion"]
    tokens = encoding.encode(text, allowed_special="all")
    return [[text], [text[i : i + 3] for i in range(0, len(text), 3)] or [""], tokens]


def observe(encoding: HarmonyEncoding, case: dict[str, Any], pieces: Iterable[Any]) -> dict[str, Any]:
    """What this project makes of one feeding, under every key a case may assert."""
    pieces = list(pieces)
    parser = HarmonyStreamParser(encoding, case["role"], "lenient", case["tools"], stop_at_turn_end=True)
    events = []
    for piece in pieces:
        events += parser.feed_text(piece) if isinstance(piece, str) else parser.feed_tokens([piece])
    events += parser.close()
    headers = [
        {
            "role": e.message.role.value,
            "channel": e.message.channel,
            "recipient": e.message.recipient,
            "content_type": e.message.content_type,
        }  # fmt: skip
        for e in events
        if isinstance(e, MessageEnd)
    ]
    streamer = ResponseStreamer(
        encoding, CreateResponseBody.model_validate({"model": "gpt-oss"}), ids=counting_ids(), created_at=0,
        tools=case["tools"], role=case["role"],
    )  # fmt: skip
    streamer.start()
    for piece in pieces:
        if isinstance(piece, str):
            streamer.feed_text(piece)
        else:
            streamer.feed(piece)
    final = streamer.finish(case["engine_stop"])[-1]
    assert isinstance(
        final, ResponseCompletedStreamingEvent | ResponseIncompleteStreamingEvent | ResponseFailedStreamingEvent
    )
    response = final.response.model_dump(mode="json")
    chat = to_chat_completion(final.response)
    message = chat["choices"][0]["message"]
    items = response["output"]

    def texts(kind: str) -> list[str]:
        return ["".join(p.get("text", "") for p in item.get("content") or []) for item in items if item["type"] == kind]

    return {
        "content": message["content"],
        "reasoning_content": message["reasoning_content"],
        "tool_calls": [
            {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
            for c in message.get("tool_calls", [])
        ],
        "finish_reason": chat["choices"][0]["finish_reason"],
        "visible_texts": texts("message"),
        "reasoning_texts": texts("reasoning"),
        "call_arguments": [item["arguments"] for item in items if item["type"] == "function_call"],
        "function_call_status": [item["status"] for item in items if item["type"] == "function_call"],
        "status": response["status"],
        "headers": headers,
    }


def _matches(expected: Any, got: Any, key: str) -> bool:
    if key == "headers":  # each expected message's fields; fields a peer does not assert are not compared
        return len(expected) == len(got) and all(
            all(g.get(k) == v for k, v in e.items()) for e, g in zip(expected, got, strict=True)
        )
    return bool(expected == got)


def check(encoding: HarmonyEncoding, case: dict[str, Any]) -> list[str]:
    """The differences from what the peer expects, one line each (none: the case agrees)."""
    misses = []
    for pieces in feedings(case, encoding):
        got = observe(encoding, case, pieces)
        feed = "text" if len(pieces) == 1 else "chunks" if isinstance(pieces[0], str) else "tokens"
        for key, expected in case["expect"].items():
            if not _matches(expected, got[key], key):
                misses.append(f"{feed}: {key} {json.dumps(got[key])} (the peer: {json.dumps(expected)})")
    return misses


def score(encoding: HarmonyEncoding, cases: list[dict[str, Any]]) -> dict[str, Any]:
    results = []
    for case in cases:
        misses = check(encoding, case)
        results.append({"id": case["id"], "class": case["class"], "peer": case["peer"], "agrees": not misses,
                        "decided": bool(case.get("decided")), "misses": misses})  # fmt: skip
    return {"results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-v", action="store_true", help="print each case that does not agree")
    args = parser.parse_args()
    encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    results = score(encoding, load())["results"]
    total, agree, decided = Counter[str](), Counter[str](), Counter[str]()
    for r in results:
        total[r["class"]] += 1
        agree[r["class"]] += r["agrees"]
        decided[r["class"]] += r["decided"] and not r["agrees"]
        if args.v and not r["agrees"]:
            print(f"-- {r['id']} ({r['peer']}{', decided against' if r['decided'] else ''})")
            for miss in r["misses"][:3]:
                print("   " + miss)
    print(f"{'class':28} {'cases':>5} {'agree':>6} {'decided against':>16}")
    for cls in sorted(total):
        print(f"{cls:28} {total[cls]:5} {agree[cls]:6} {decided[cls]:16}")
    print(f"{'all':28} {sum(total.values()):5} {sum(agree.values()):6} {sum(decided.values()):16}")


if __name__ == "__main__":
    main()
