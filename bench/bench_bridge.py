"""Completion tokens → Open Responses SSE text, against openai-harmony 0.0.8's bare parser, same process.

The ~20k-token completion of bench_parse.py (analysis, preambles, function calls, builtin calls, tool
results, finals) is fed one token at a time through `stream_response` and `to_sse`, producing the full
SSE text; the reference does only `StreamableParser.process` per token. Bar: our whole bridge costs at
most 1x the reference's parser (ratio = reference time / our time >= 1).

    TIKTOKEN_ENCODINGS_BASE=../shared/vocab .venv/bin/python bench/bench_bridge.py
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))

import openai_harmony as ref  # noqa: E402
from bench_parse import best, completion  # noqa: E402

from harmony_responses import HarmonyEncodingName, load_harmony_encoding  # noqa: E402
from harmony_responses.bridge import parse_sse, stream_response, to_sse  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    ours_enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    ref_enc = ref.load_harmony_encoding(ref.HarmonyEncodingName.HARMONY_GPT_OSS)
    tokens = completion(ours_enc, args.tokens)
    n = len(tokens)

    def ref_process() -> None:
        p = ref.StreamableParser(ref_enc, None)
        for t in tokens:
            p.process(t)

    def ours_sse() -> list[str]:
        # a generator of single tokens: the bridge sees one token at a time, as from a sampler
        one_by_one = (t for t in tokens)
        events = stream_response(one_by_one, ours_enc, None, role=None, stop_at_turn_end=False)
        return list(to_sse(events))

    frames = ours_sse()
    events = parse_sse(frames)
    assert events[-1].type == "response.completed", events[-1].type
    assert len(events) == len(frames) - 1

    t_ref = best(ref_process, args.repeat)
    t_ours = best(ours_sse, args.repeat)
    us = 1e6 / n
    print(f"completion: {n} tokens -> {len(events)} events, {sum(map(len, frames)) / 1e6:.1f} MB of SSE")
    print(f"reference StreamableParser.process alone      {t_ref * us:7.3f} us/token")
    print(f"ours stream_response + to_sse, token by token {t_ours * us:7.3f} us/token")
    print(f"ratio {t_ref / t_ours:5.2f}x (reference parser time / our whole bridge; bar >= 1x)")


if __name__ == "__main__":
    main()
