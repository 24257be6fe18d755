"""render_conversation_for_completion: harmony_responses vs openai-harmony 0.0.8, same process.

Run: `make bench` (or `.venv/bin/python bench/bench_render.py`). Prints per-call times and the
median of per-round speed ratios (reference time / our time; higher is better for us).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))

import openai_harmony  # noqa: E402

import harmony_responses  # noqa: E402

from conversations import build  # noqa: E402


def per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main(rounds: int = 21, calls: int = 200) -> float:
    ours_enc = harmony_responses.load_harmony_encoding(harmony_responses.HarmonyEncodingName.HARMONY_GPT_OSS)
    ref_enc = openai_harmony.load_harmony_encoding(openai_harmony.HarmonyEncodingName.HARMONY_GPT_OSS)
    ours_convo, ref_convo = build(harmony_responses), build(openai_harmony)
    ours_role, ref_role = harmony_responses.Role.ASSISTANT, openai_harmony.Role.ASSISTANT

    def ours() -> list[int]:
        return ours_enc.render_conversation_for_completion(ours_convo, ours_role)

    def ref() -> list[int]:
        return ref_enc.render_conversation_for_completion(ref_convo, ref_role)

    assert ours() == ref(), "the two renderings differ: the benchmark would compare different work"
    per_call(ours, calls)  # warm-up
    per_call(ref, calls)
    ratios, ours_t, ref_t = [], [], []
    for _ in range(rounds):
        t_ref = per_call(ref, calls)
        t_ours = per_call(ours, calls)
        ratios.append(t_ref / t_ours)
        ours_t.append(t_ours)
        ref_t.append(t_ref)
    ratio = statistics.median(ratios)
    print(f"messages: {len(ours_convo.messages)}, tokens: {len(ours())}")
    print(f"openai-harmony 0.0.8: {statistics.median(ref_t) * 1e6:8.1f} µs/call")
    print(f"harmony_responses:    {statistics.median(ours_t) * 1e6:8.1f} µs/call")
    print(f"median speed ratio (reference / ours) over {rounds} rounds: {ratio:.2f}x (bar 8x)")
    return ratio


if __name__ == "__main__":
    main()
