"""Completion tokens → Open Responses SSE text, against openai-harmony 0.0.8's bare parser, same process.

Two workloads, each fed one token at a time:

- headers: the ~20k-token completion of bench_parse.py (analysis, preambles, function calls, builtin
  calls, tool results, finals), read as a whole transcript;
- text: one long assistant turn of about 20k tokens that is mostly text (reasoning, preambles, the
  answer; no call ends it early), so that nearly every token is one delta event.

Ours runs the whole bridge: the lenient event parser, the item/event state machine and the SSE text
(`SSEStreamer.feed`, one frame per delta); the reference does only `StreamableParser.process` per token.
Bars: our whole bridge costs at most 1x the reference's parser; the typed path (`to_sse(stream_response(...))`,
one event object per delta, as a library user calls it) at most 1.5x on the text workload (issue 20).
Costs are given as our time / the reference's time, each the median of per-round ratios over `--repeat`
interleaved rounds (a reference run and ours taken moments apart see the same load on a shared machine);
the us/token shown are each one's best.

    TIKTOKEN_ENCODINGS_BASE=../shared/vocab .venv/bin/python bench/bench_bridge.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))

import openai_harmony as ref  # noqa: E402
from bench_parse import best, completion  # noqa: E402

from harmony_responses import HarmonyEncoding, HarmonyEncodingName, Message, Role, load_harmony_encoding  # noqa: E402
from harmony_responses.bridge import (  # noqa: E402
    SSEStreamer,
    counting_ids,
    parse_sse,
    stream_response,
    stream_sse,
    to_sse,
)


def long_turn(encoding: HarmonyEncoding, n_tokens: int) -> list[int]:
    """One assistant turn, mostly text: reasoning, a preamble, more reasoning, the answer (after the prompt's
    `<|start|>assistant`)."""
    a = Role.ASSISTANT
    reasoning = "The user asks how to plan a week in Paris on a budget; weigh museums, food and transport. "
    answer = "Here is a plan: walk the Marais on Monday, use the Navigo pass, picnic by the Seine — bon appétit! "
    unit = len(encoding.encode(reasoning * 4 + answer * 4))
    rounds = max(1, n_tokens // unit)
    messages = [
        Message.from_role_and_content(a, reasoning * 2 * rounds).with_channel("analysis"),
        Message.from_role_and_content(a, "Let me lay out the week day by day.").with_channel("commentary"),
        Message.from_role_and_content(a, reasoning * 2 * rounds).with_channel("analysis"),
        Message.from_role_and_content(a, answer * 4 * rounds).with_channel("final"),
    ]
    tokens: list[int] = []
    for m in messages:
        tokens += encoding.render(m)
    tokens = tokens[2:]  # the prompt ends with <|start|>assistant
    tokens[-1] = encoding.encode("<|return|>", allowed_special="all")[0]
    return tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=9, help="interleaved rounds")
    args = ap.parse_args()
    ours_enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    ref_enc = ref.load_harmony_encoding(ref.HarmonyEncodingName.HARMONY_GPT_OSS)
    # each workload: its tokens, the reference parser's role, our streamer's keyword options
    workloads: dict[str, tuple[list[int], ref.Role | None, dict[str, Any]]] = {
        "headers": (completion(ours_enc, args.tokens), None, {"role": None, "stop_at_turn_end": False}),
        "text": (long_turn(ours_enc, args.tokens), ref.Role.ASSISTANT, {}),
    }
    for name, (tokens, ref_role, options) in workloads.items():
        n = len(tokens)

        def ref_process(tokens: list[int] = tokens, role: ref.Role | None = ref_role) -> None:
            p = ref.StreamableParser(ref_enc, role)
            for t in tokens:
                p.process(t)

        def ours_sse(tokens: list[int] = tokens, options: dict[str, Any] = options) -> list[str]:
            # one token a call, as a server gets them from its engine
            streamer = SSEStreamer(ours_enc, None, **options)
            out = [streamer.start()]
            feed = streamer.feed
            for t in tokens:
                out.append(feed(t))
            out.append(streamer.finish())
            return out

        def ours_typed(tokens: list[int] = tokens, options: dict[str, Any] = options) -> list[str]:
            return list(to_sse(stream_response((t for t in tokens), ours_enc, None, **options)))

        def ours_events(tokens: list[int] = tokens, options: dict[str, Any] = options) -> list[str]:
            # every typed event built and framed, as a caller that reads the events between the two does
            events = stream_response((t for t in tokens), ours_enc, None, **options)
            return list(to_sse(event for event in events))

        fixed = {**options, "ids": counting_ids(), "created_at": 0, "clock": lambda: 0.0}
        frames = ours_sse(options=fixed)
        fixed["ids"] = counting_ids()
        assert "".join(frames) == "".join(stream_sse(tokens, ours_enc, None, **fixed))
        events = parse_sse(frames)
        assert events[-1].type == "response.completed", events[-1].type
        deltas = sum(e.type.endswith(".delta") for e in events)
        work: dict[str, Callable[[], object]] = {
            "ref": ref_process,
            "sse": ours_sse,
            "typed": ours_typed,
            "events": ours_events,
        }
        rounds = [{key: best(fn, 1) for key, fn in work.items()} for _ in range(args.repeat)]

        def cost(key: str, rows: list[dict[str, float]] = rounds) -> float:
            return statistics.median(row[key] / row["ref"] for row in rows)

        t_ref, t_ours, t_typed, t_events = (
            min(row[key] for row in rounds) for key in ("ref", "sse", "typed", "events")
        )
        us = 1e6 / n
        print(
            f"{name}: {n} tokens -> {len(events)} events ({deltas} deltas), {sum(map(len, frames)) / 1e6:.1f} MB of SSE"
        )
        print(f"  reference StreamableParser.process alone          {t_ref * us:7.3f} us/token")
        print(f"  ours SSEStreamer.feed (parser + items + SSE)     {t_ours * us:7.3f} us/token")
        print(f"  ours to_sse(stream_response) (typed events)       {t_typed * us:7.3f} us/token")
        print(f"  ours each typed event built, then framed          {t_events * us:7.3f} us/token")
        print(f"  cost of our bridge / reference parser: {cost('sse'):4.2f}x (bar <= 1.00x)")
        typed_bar = " (bar <= 1.50x)" if name == "text" else ""
        print(f"  cost of the typed path / reference parser: {cost('typed'):4.2f}x{typed_bar}")
        print(f"  cost of every typed event built and framed / reference parser: {cost('events'):4.2f}x")


if __name__ == "__main__":
    main()
