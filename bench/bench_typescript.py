"""The TypeScript package on the existing bench workloads, next to the Python package and openai-harmony 0.0.8.

Render: bench_render's conversation (render_conversation_for_completion, per call). Parse: bench_parse's
~20k-token completion through StreamableParser one token at a time, and parse_messages_from_completion_tokens.
Event parser and bridge, on both workloads of bench_bridge.py (the header-rich transcript and the long,
mostly-text turn): HarmonyStreamParser (lenient) fed one token a call (`feed_tokens`) and one token's text a
call (`feed_text`), and SSEStreamer.feed one token a call (parser, items and SSE text), each per token next
to the Python package's figure and the reference's bare StreamableParser. Bar: TypeScript's streaming parse
at least as fast per token as the Python event parser on the same completion.
Node runs runtime/typescript/bench/bench.ts (compiled by `make ts-build`); both languages' outputs (tokens,
messages, event counts, the SSE text's hash) are checked equal before any figure is printed.

    make ts-build && .venv/bin/python bench/bench_typescript.py
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(ROOT.parent / "shared" / "vocab"))

import openai_harmony  # noqa: E402
from bench_bridge import long_turn  # noqa: E402
from bench_parse import best, completion  # noqa: E402

import harmony_responses  # noqa: E402
from harmony_responses.bridge import SSEStreamer, counting_ids  # noqa: E402

from conversations import build  # noqa: E402

NODE_BENCH = ROOT / "runtime" / "typescript" / "build" / "bench" / "bench.js"
ROUNDS, CALLS = 21, 200


class TokenParser(Protocol):
    """What the stream benchmark calls on either project's StreamableParser."""

    def process(self, token: int, /) -> object: ...

    def process_eos(self) -> object: ...


Encoding = TypeVar("Encoding")


def per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main() -> None:
    if not NODE_BENCH.is_file():
        raise SystemExit(f"{NODE_BENCH} is missing: run `make ts-build`")
    ours = harmony_responses.load_harmony_encoding(harmony_responses.HarmonyEncodingName.HARMONY_GPT_OSS)
    ref = openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)
    convo, ref_convo = build(harmony_responses), build(openai_harmony)
    role, ref_role = harmony_responses.Role.ASSISTANT, openai_harmony.Role.ASSISTANT
    tokens = completion(ours, 20_000)
    bridge: list[dict[str, Any]] = [  # JSON for the TypeScript side
        {"name": "headers", "tokens": tokens, "role": None, "stop_at_turn_end": False},
        {"name": "text", "tokens": long_turn(ours, 20_000), "role": role.value, "stop_at_turn_end": True},
    ]
    for w in bridge:
        w["chunks"] = [ours.decode([t]) for t in w["tokens"]]

    with tempfile.TemporaryDirectory() as tmp:
        workload = Path(tmp) / "workload.json"
        workload.write_text(
            json.dumps(
                {
                    "conversation": convo.to_json(),
                    "next_role": role.value,
                    "tokens": tokens,
                    "rounds": ROUNDS,
                    "calls": CALLS,
                    "bridge": bridge,
                }
            ),
            encoding="utf-8",
        )
        done = subprocess.run(["node", str(NODE_BENCH), str(workload)], capture_output=True, text=True, check=True)
    ts = json.loads(done.stdout)
    rendered = ours.render_conversation_for_completion(convo, role)
    assert ts["rendered"] == rendered == ref.render_conversation_for_completion(ref_convo, ref_role)
    assert ts["messages"] == [m.to_dict() for m in ours.parse_messages_from_completion_tokens(tokens, None)]

    render_py = median(
        [per_call(lambda: ours.render_conversation_for_completion(convo, role), CALLS) for _ in range(7)]
    )
    render_ref = median(
        [per_call(lambda: ref.render_conversation_for_completion(ref_convo, ref_role), CALLS) for _ in range(7)]
    )

    def stream(parser_cls: Callable[[Encoding, None], TokenParser], enc: Encoding) -> Callable[[], object]:
        def run() -> object:
            parser = parser_cls(enc, None)
            for token in tokens:
                parser.process(token)
            parser.process_eos()
            return parser

        return run

    n = len(tokens)
    stream_py = min(per_call(stream(harmony_responses.StreamableParser, ours), 1) for _ in range(3)) / n
    stream_ref = min(per_call(stream(openai_harmony.StreamableParser, ref), 1) for _ in range(3)) / n
    batch_py = min(per_call(lambda: ours.parse_messages_from_completion_tokens(tokens, None), 1) for _ in range(3)) / n
    batch_ref = min(per_call(lambda: ref.parse_messages_from_completion_tokens(tokens, None), 1) for _ in range(3)) / n

    print(f"render_conversation_for_completion ({len(convo.messages)} messages, {len(rendered)} tokens), µs/call:")
    print(f"  openai-harmony 0.0.8 {render_ref * 1e6:9.1f}")
    print(f"  harmony_responses    {render_py * 1e6:9.1f}")
    print(f"  TypeScript           {ts['render_s'] * 1e6:9.1f}   ({render_ref / ts['render_s']:.2f}x the reference)")
    print(f"StreamableParser.process, one token at a time ({n} tokens), µs/token:")
    print(f"  openai-harmony 0.0.8 {stream_ref * 1e6:9.3f}")
    print(f"  harmony_responses    {stream_py * 1e6:9.3f}")
    sp = ts["stream_s_per_token"]
    print(f"  TypeScript           {sp * 1e6:9.3f}   ({stream_ref / sp:.2f}x the reference)")
    print("parse_messages_from_completion_tokens, µs/token:")
    print(f"  openai-harmony 0.0.8 {batch_ref * 1e6:9.3f}")
    print(f"  harmony_responses    {batch_py * 1e6:9.3f}")
    bp = ts["batch_s_per_token"]
    print(f"  TypeScript           {bp * 1e6:9.3f}   ({batch_ref / bp:.2f}x the reference)")
    for w, t in zip(bridge, ts["bridge"], strict=True):
        bench_bridge_workload(ours, ref, w, t)


def bench_bridge_workload(ours: Any, ref: Any, w: dict[str, Any], t: dict[str, Any]) -> None:
    """The event parser and the SSE bridge on one workload, both languages and the reference's bare parser."""
    tokens, chunks = w["tokens"], w["chunks"]
    role = harmony_responses.Role(w["role"]) if w["role"] else None
    ref_role = openai_harmony.Role(w["role"]) if w["role"] else None

    def events(by_text: bool) -> int:
        parser = harmony_responses.HarmonyStreamParser(ours, role, "lenient")
        n = 0
        if by_text:
            for chunk in chunks:
                n += len(parser.feed_text(chunk))
        else:
            for token in tokens:
                n += len(parser.feed_tokens((token,)))
        return n + len(parser.close())

    def sse(fixed: bool) -> list[str]:
        extra: dict[str, Any] = {"ids": counting_ids(), "created_at": 0, "clock": lambda: 0.0} if fixed else {}
        streamer = SSEStreamer(ours, None, role=role, stop_at_turn_end=w["stop_at_turn_end"], **extra)
        out = [streamer.start()]
        feed = streamer.feed
        for token in tokens:
            out.append(feed(token))
        out.append(streamer.finish())
        return out

    def reference() -> None:
        parser = openai_harmony.StreamableParser(ref, ref_role)
        for token in tokens:
            parser.process(token)

    assert (t["events_by_tokens"], t["events_by_text"]) == (events(False), events(True)), w["name"]
    assert t["sse_sha256"] == hashlib.sha256("".join(sse(True)).encode()).hexdigest(), w["name"]
    n = len(tokens)
    t_ref = best(reference, 5) / n
    py = {"feed_tokens": best(lambda: events(False), 5) / n, "feed_text": best(lambda: events(True), 5) / n}
    py["sse"] = best(lambda: sse(False), 5) / n
    print(f"{w['name']} workload ({n} tokens), one token (or its text) a call, µs/token:")
    print(f"  openai-harmony 0.0.8 StreamableParser.process {t_ref * 1e6:9.3f}")
    for key, label in (
        ("feed_tokens", "event parser feed_tokens"),
        ("feed_text", "event parser feed_text"),
        ("sse", "bridge SSEStreamer.feed"),
    ):
        ts_s = t[f"{key}_s_per_token"]
        ratio = py[key] / ts_s
        print(
            f"  {label:28} Python {py[key] * 1e6:8.3f}   TypeScript {ts_s * 1e6:8.3f}   ({ratio:.2f}x Python's speed)"
        )


if __name__ == "__main__":
    main()
