"""`detect_leak` on adversarial text: 1 MB in under a second, and 10x the text in about 10x the time.

Each pattern maximises one kind of work the old implementation repeated per match (every code span
rescanned for every control token; every header fragment's whole line rescanned for a second signal).
Best of three runs per size; exits 1 when 1 MB takes a second or more, or 10 MB more than 15x as long.

    .venv/bin/python bench/bench_leak.py
"""

from __future__ import annotations

import sys
import time

from harmony_responses import detect_leak

PATTERNS = {
    "code span + control token": "`a` <|end|> ",
    "header fragments, one line": "to=functions.a ",
    "fragments with a signal": "to=functions.a json{} ",
    "mixed, many lines": "`a` to=functions.f <|end|> assistantfinal x\n",
}
MB = 1_000_000


def best_of(text: str, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        detect_leak(text)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    ok = True
    print(f"{'pattern':28} {'1 MB':>8} {'10 MB':>8} {'ratio':>6}")
    for name, unit in PATTERNS.items():
        one = best_of(unit * (MB // len(unit)))
        ten = best_of(unit * (10 * MB // len(unit)))
        ratio = ten / one
        ok = ok and one < 1.0 and ratio < 15
        print(f"{name:28} {one:7.3f}s {ten:7.3f}s {ratio:5.1f}x")
    print("ok" if ok else "FAILED: 1 MB must take under 1 s and 10 MB under 15x that")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
