"""The TypeScript package on the existing bench workloads, next to the Python package and openai-harmony 0.0.8.

Render: bench_render's conversation (render_conversation_for_completion, per call). Parse: bench_parse's
~20k-token completion through StreamableParser one token at a time, and parse_messages_from_completion_tokens.
Node runs runtime/typescript/bench/bench.ts (compiled by `make ts-build`); both languages' outputs are
checked equal before any figure is printed.

    make ts-build && .venv/bin/python bench/bench_typescript.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(ROOT.parent / "shared" / "vocab"))

import openai_harmony  # noqa: E402
from bench_parse import completion  # noqa: E402

import harmony_responses  # noqa: E402

from conversations import build  # noqa: E402

NODE_BENCH = ROOT / "generated" / "typescript" / "dist" / "runtime" / "typescript" / "bench" / "bench.js"
ROUNDS, CALLS = 21, 200


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

    def stream(parser_cls: Callable[..., object], enc: object) -> Callable[[], object]:
        def run() -> object:
            parser = parser_cls(enc, None)
            for token in tokens:
                parser.process(token)  # type: ignore[attr-defined]
            parser.process_eos()  # type: ignore[attr-defined]
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


if __name__ == "__main__":
    main()
