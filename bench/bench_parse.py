"""Parsing throughput against openai-harmony 0.0.8 in the same process, as ratios.

A ~20k-token synthetic completion mixes analysis, preambles, function calls, builtin calls, tool
results and finals. Measured: StreamableParser.process per token, parse_messages_from_completion_tokens,
and HarmonyStreamParser.feed_text fed one token's text per call, each against the reference's
per-token parser; then the same completion repeated 10x to show that the cost per token stays flat.

    TIKTOKEN_ENCODINGS_BASE=../shared/vocab .venv/bin/python bench/bench_parse.py
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))

import openai_harmony as ref  # noqa: E402

from harmony_responses import (  # noqa: E402
    HarmonyEncoding,
    HarmonyEncodingName,
    HarmonyStreamParser,
    Message,
    Role,
    StreamableParser,
    load_harmony_encoding,
    parse_tokens,
)


def conversation_round(i: int) -> list[Message]:
    """One agentic round: analysis, a preamble, a function call and its result, a builtin call, a final."""
    a = Role.ASSISTANT
    return [
        Message.from_role_and_content(
            a, f"Step {i}: the user wants the weather in Paris and a summary. " * 6
        ).with_channel("analysis"),
        Message.from_role_and_content(a, "Let me check the forecast first.").with_channel("commentary"),
        Message.from_role_and_content(a, '{"city": "Paris", "unit": "celsius", "days": 3}')
        .with_channel("commentary")
        .with_recipient("functions.get_weather")
        .with_content_type("<|constrain|>json"),
        Message.from_author_and_content(
            __import__("harmony_responses").Author.new(Role.TOOL, "functions.get_weather"),
            '{"forecast": [{"day": 1, "temp": 21, "sky": "sunny"}, {"day": 2, "temp": 19, "sky": "rain"}]}',
        )
        .with_channel("commentary")
        .with_recipient("assistant"),
        Message.from_role_and_content(a, "import math\nprint(math.sqrt(2) * 21 + 19 / 3)  # naïve 🙂")
        .with_channel("analysis")
        .with_recipient("python")
        .with_content_type("code"),
        Message.from_role_and_content(
            a, f"Round {i}: Paris will be sunny, then rainy — pack an umbrella. " * 4
        ).with_channel("final"),
    ]


def completion(encoding: HarmonyEncoding, target: int) -> list[int]:
    tokens: list[int] = []
    i = 0
    while len(tokens) < target:
        for message in conversation_round(i):
            tokens += encoding.render(message)
        i += 1
    return tokens


def best(fn: Callable[[], object], repeat: int) -> float:
    """Best of `repeat` runs, garbage collector off while timing (as `timeit` does)."""
    times = []
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        finally:
            gc.enable()
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    ours_enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    ref_enc = ref.load_harmony_encoding(ref.HarmonyEncodingName.HARMONY_GPT_OSS)
    tokens = completion(ours_enc, args.tokens)
    n = len(tokens)
    pieces = [ours_enc.decode([t]) for t in tokens]

    def ref_process(toks: list[int]) -> None:
        p = ref.StreamableParser(ref_enc, None)
        for t in toks:
            p.process(t)
        p.process_eos()

    def ours_process(toks: list[int]) -> None:
        p = StreamableParser(ours_enc, None)
        for t in toks:
            p.process(t)
        p.process_eos()

    def ours_feed_text(texts: list[str]) -> None:
        p = HarmonyStreamParser(ours_enc, None)
        for text in texts:
            p.feed_text(text)
        p.close()

    def ours_feed_tokens(toks: list[int]) -> None:
        p = HarmonyStreamParser(ours_enc, None)
        for t in toks:
            p.feed_tokens((t,))
        p.close()

    # same messages before timing anything
    expected = [m.to_dict() for m in ref_enc.parse_messages_from_completion_tokens(tokens, None)]
    assert [m.to_dict() for m in ours_enc.parse_messages_from_completion_tokens(tokens, None)] == expected

    r = args.repeat
    # Rounds interleave every measurement, and each ratio is the median of per-round ratios: on a shared machine,
    # a reference run and ours taken moments apart see the same load (the µs/token shown are each one's best).
    work: dict[str, Callable[[], object]] = {
        "ref": lambda: ref_process(tokens),
        "proc": lambda: ours_process(tokens),
        "ref_all": lambda: ref_enc.parse_messages_from_completion_tokens(tokens, None),
        "all": lambda: ours_enc.parse_messages_from_completion_tokens(tokens, None),
        "text": lambda: ours_feed_text(pieces),
        "tok": lambda: ours_feed_tokens(tokens),
        "parse_tokens": lambda: parse_tokens(ours_enc, tokens, None),
    }
    rounds = [{name: best(fn, 1) for name, fn in work.items()} for _ in range(r)]

    def t(name: str) -> float:
        return min(row[name] for row in rounds)

    def ratio(peer: str, name: str) -> float:
        return statistics.median(row[peer] / row[name] for row in rounds)

    us = 1e6 / n
    t_ref, t_proc, t_text = t("ref"), t("proc"), t("text")
    print(f"completion: {n} tokens; ratios are medians of {r} interleaved rounds")
    print(f"reference StreamableParser.process    {t_ref * us:7.3f} us/token")
    print(
        f"ours      StreamableParser.process    {t_proc * us:7.3f} us/token   "
        f"ratio {ratio('ref', 'proc'):5.2f}x (bar 6x)"
    )
    print(f"reference parse_messages_from_completion_tokens {t('ref_all') * us:7.3f} us/token")
    print(
        f"ours      parse_messages_from_completion_tokens {t('all') * us:7.3f} us/token   "
        f"ratio {ratio('ref_all', 'all'):5.2f}x (bar 12x)"
    )
    print(
        f"ours      HarmonyStreamParser.feed_text, one token's text a call {t_text * us:7.3f} us/token   "
        f"ratio {ratio('ref', 'text'):5.2f}x vs reference process (bar 3x)"
    )
    print(
        f"ours      HarmonyStreamParser.feed_tokens, one token a call      {t('tok') * us:7.3f} us/token   "
        f"ratio {ratio('ref', 'tok'):5.2f}x vs reference process"
    )

    print(
        f"ours      parse_tokens (event API, whole list)               {t('parse_tokens') * us:7.3f} us/token   "
        f"ratio {ratio('ref_all', 'parse_tokens'):5.2f}x vs reference parse_messages"
    )

    big = tokens * 10
    big_pieces = pieces * 10
    t_proc10 = best(lambda: ours_process(big), max(1, r // 2))
    t_text10 = best(lambda: ours_feed_text(big_pieces), max(1, r // 2))
    t_ref10 = best(lambda: ref_process(big), max(1, r // 2))
    us10 = 1e6 / len(big)
    print(f"10x completion ({len(big)} tokens), cost per token at 10x / at 1x:")
    print(f"  ours StreamableParser.process  {t_proc10 * us10:7.3f} us/token  ({t_proc10 * us10 / (t_proc * us):4.2f})")
    print(f"  ours feed_text                 {t_text10 * us10:7.3f} us/token  ({t_text10 * us10 / (t_text * us):4.2f})")
    print(f"  reference process              {t_ref10 * us10:7.3f} us/token  ({t_ref10 * us10 / (t_ref * us):4.2f})")

    def feed_text_peak(texts: list[str]) -> int:
        gc.collect()
        tracemalloc.start()
        ours_feed_text(texts)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return peak

    peak1, peak10 = feed_text_peak(pieces), feed_text_peak(big_pieces)
    print("memory: peak traced allocation while streaming (events not kept), at 1x and at 10x:")
    print(f"  ours feed_text  {peak1 / 1024:8.1f} KiB   {peak10 / 1024:8.1f} KiB  ({peak10 / peak1:4.2f})")


if __name__ == "__main__":
    main()
