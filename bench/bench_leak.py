"""`detect_leak` on adversarial text: 1 MB in under a second, and 10x the text in about 10x the time.

Each pattern maximises one kind of work the old implementation repeated per match (every code span
rescanned for every control token; every header fragment's whole line rescanned for a second signal),
or one the TypeScript implementation could repeat (a fragment whose line holds many signals inside it, a
line of one long fragment, unclosed backticks and fences). Best of three runs per size; exits 1 when 1 MB
takes a second or more, or 10 MB more than 15x as long. When the TypeScript package is built (`make
ts-build`), its `detectLeak` runs the same texts (runtime/typescript/bench/leak.ts), held to the same bar,
and must find as many leaks.

    .venv/bin/python bench/bench_leak.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from harmony_responses import detect_leak

NODE_LEAK = Path(__file__).resolve().parents[1] / "runtime/typescript/build/bench/leak.js"

PATTERNS = {
    "code span + control token": "`a` <|end|> ",
    "header fragments, one line": "to=functions.a ",
    "fragments with a signal": "to=functions.a json{} ",
    "mixed, many lines": "`a` to=functions.f <|end|> assistantfinal x\n",
    "signals inside fragments": "to=functions.<|<|<|<| ",
    "one long fragment": "to=functions.a<|",
    "unclosed backticks": "`aaaaaaaaaaaaaaaaaaaa\n",
    "fences": "``` to=functions.a\n",
}
MB = 1_000_000


def best_of(text: str, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        detect_leak(text)
        times.append(time.perf_counter() - start)
    return min(times)


def typescript() -> dict[str, dict[str, list[float]]] | None:
    """The TypeScript `detectLeak` on the same texts, or None when the package is not built."""
    if not NODE_LEAK.is_file():
        return None
    job = json.dumps({"patterns": PATTERNS, "sizes": [MB, 10 * MB], "runs": 5})
    done = subprocess.run(["node", str(NODE_LEAK)], input=job, capture_output=True, text=True, check=True)
    result: dict[str, dict[str, list[float]]] = json.loads(done.stdout)
    return result


def main() -> int:
    ok = True
    ts = typescript()
    print(f"{'pattern':28} {'1 MB':>8} {'10 MB':>8} {'ratio':>6}" + ("   TS 1 MB  TS 10 MB  ratio" if ts else ""))
    for name, unit in PATTERNS.items():
        one_text, ten_text = unit * (MB // len(unit)), unit * (10 * MB // len(unit))
        one = best_of(one_text)
        ten = best_of(ten_text)
        ratio = ten / one
        ok = ok and one < 1.0 and ratio < 15
        line = f"{name:28} {one:7.3f}s {ten:7.3f}s {ratio:5.1f}x"
        if ts is not None:
            (ts_one, ts_ten), leaks = ts[name]["seconds"], ts[name]["leaks"]
            ok = ok and ts_one < 1.0 and ts_ten / ts_one < 15
            ok = ok and leaks == [len(detect_leak(one_text)), len(detect_leak(ten_text))]
            line += f"  {ts_one:7.3f}s {ts_ten:8.3f}s {ts_ten / ts_one:5.1f}x"
        print(line)
    if ts is None:
        print(f"(TypeScript not measured: {NODE_LEAK} is missing; run `make ts-build`)")
    print("ok" if ok else "FAILED: 1 MB must take under 1 s and 10 MB under 15x that (and both languages agree)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
