"""Concurrent streaming clients against a real `harmony-responses serve` process and the replay engine.

The replay engine plays one recorded completion per stream, one token per chunk at `--tps` tokens/s
after `--first-token-ms`, on a fixed schedule shared by all streams (`--lockstep 1`, the default: like
an inference server's continuous batching, where each decode step gives every running sequence its next
token at once, so a new stream also waits up to one step for its first token). For each
concurrency level, that many clients open `stream: true` Responses requests at once (starts spread
over half a second) and read the SSE stream with a minimal HTTP client (raw sockets, uvloop), noting
when each delta event arrives. Reported per level:

- streams, aggregate tokens/s (completion tokens of all streams / wall time);
- server CPU per streamed token: the server process's user+system CPU time over the run, divided by
  the completion tokens it streamed (everything included: HTTP, prompt rendering, pacing, bridge, SSE);
- time to first event (request sent → first SSE bytes), p50/p99;
- added latency per event: for the k-th delta event, made from completion token i_k, arrival_k −
  (anchor + i_k / tps), where anchor = min_k(arrival_k − i_k / tps) is the stream's best observed
  offset. 0 means the event came exactly on the engine's schedule; a stream that falls behind the
  schedule shows it here. p50/p99 over all events of all streams.

Every response is stored as the server stores it by default (`store: true`, a SQLite file, here in a
temporary folder): its start before `response.created`, its end before its terminal event. `--store
memory` (or a `postgresql://` URL) measures another store.

Bar (issue 10): at 64 streams of 100 tokens/s, p99 added latency per event <= 20 ms and server CPU per
streamed token <= 60 us.

    TIKTOKEN_ENCODINGS_BASE=../shared/vocab .venv/bin/python bench/bench_server.py [--levels 1,16,64,256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))

from harmony_responses import HarmonyEncodingName, load_harmony_encoding  # noqa: E402
from harmony_responses.bridge import ResponseStreamer  # noqa: E402

DELTA = b'.delta","sequence_number"'  # in the data line of every delta event, once
DONE = b"data: [DONE]"


def completion_text(words: int) -> str:
    thought = " ".join(f"step{i}" for i in range(words // 5))
    answer = " ".join(f"word{i % 97}" for i in range(words))
    analysis = f"<|channel|>analysis<|message|>{thought}<|end|>"
    return f"{analysis}<|start|>assistant<|channel|>final<|message|>{answer}<|return|>"


def delta_token_indexes(tokens: list[int]) -> list[int]:
    """For the k-th delta event of the stream, the index of the completion token that produced it."""
    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    streamer = ResponseStreamer(enc, None)
    streamer.start()
    out = []
    for i, token in enumerate(tokens):
        for event in streamer.feed(token):
            if event.type.endswith(".delta"):
                out.append(i)
    return out


@dataclass
class Stream:
    sent: float = 0.0
    first: float | None = None
    arrivals: list[float] = field(default_factory=list)  # one per delta event
    ok: bool = False
    error: str = ""


async def one_stream(port: int, body: bytes, delay: float, result: Stream) -> None:
    await asyncio.sleep(delay)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /v1/responses HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    result.sent = time.perf_counter()
    writer.write(head + body)
    buffer = b""
    headers_done = False
    tail = b""
    keep = max(len(DELTA), len(DONE)) - 1  # a marker cut by a read boundary is found in the carried tail
    try:
        while True:
            data = await reader.read(65536)
            now = time.perf_counter()
            if not data:
                break
            if result.first is None:
                result.first = now
            if not headers_done:
                buffer += data
                if b"\r\n\r\n" not in buffer:
                    continue
                head_bytes, data = buffer.split(b"\r\n\r\n", 1)
                if b" 200 " not in head_bytes.split(b"\r\n", 1)[0]:
                    result.error = head_bytes.decode(errors="replace")[:200]
                    return
                headers_done = True
            window = tail + data
            count = window.count(DELTA)
            if count:
                result.arrivals.extend([now] * count)
            if DONE in window:
                result.ok = True
            tail = window[-keep:]
    finally:
        writer.close()


class Row(TypedDict):
    """One load level's results (a row of the table and of the --json file)."""

    streams: int
    ok: int
    tokens_per_s: float
    cpu_us_per_token: float
    ttfe_p50_ms: float
    ttfe_p99_ms: float
    added_p50_ms: float
    added_p99_ms: float
    errors: list[str]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_level(port: int, pid: int, streams: int, body: bytes) -> list[Stream]:
    results = [Stream() for _ in range(streams)]
    spread = 0.5 if streams > 1 else 0.0
    await asyncio.gather(*(one_stream(port, body, spread * i / streams, r) for i, r in enumerate(results)))
    return results


def start_server(recordings: Path, args: argparse.Namespace) -> tuple[subprocess.Popen[str], int]:
    engine = f"replay:{recordings}?tps={args.tps}&first_token_ms={args.first_token_ms}&chunk=1&lockstep={args.lockstep}"
    store = args.store or f"sqlite:///{recordings.parent / 'responses.sqlite3'}"
    cmd = [sys.executable, "-m", "harmony_responses.cli", "serve", "--port", "0", "--engine", engine,
           "--max-concurrency", "4096", "--log-level", "warning", "--store", store]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        match = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if match:
            return proc, int(match.group(1))
    raise RuntimeError("the server did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--levels", default="1,16,64,256", help="concurrent streams per level")
    ap.add_argument("--tps", type=float, default=100.0, help="tokens per second per stream")
    ap.add_argument("--first-token-ms", type=float, default=50.0)
    ap.add_argument("--lockstep", type=int, default=1, help="1: streams share one decode clock (batching)")
    ap.add_argument("--words", type=int, default=250, help="final-answer words per completion (~1.2 tokens each)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--store", help="the server's store (default: a SQLite file in a temporary folder)")
    ap.add_argument(
        "--nice",
        type=int,
        default=0,
        help="run the server and the clients at this niceness (e.g. -10; needs privileges): on a machine shared "
        "with other work, separates the server's own pace from the time slices others take",
    )
    args = ap.parse_args()
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    text = completion_text(args.words)
    tokens = enc.encode(text, allowed_special="all")
    index = delta_token_indexes(tokens)
    body = json.dumps({"model": "gpt-oss", "input": "Benchmark me.", "stream": True}).encode()
    with tempfile.TemporaryDirectory() as tmp:
        recordings = Path(tmp) / "recordings.jsonl"
        recordings.write_text(json.dumps({"completion": text}) + "\n")
        proc, port = start_server(recordings, args)
        if args.nice:
            os.setpriority(os.PRIO_PROCESS, proc.pid, args.nice)
            os.setpriority(os.PRIO_PROCESS, 0, args.nice)
        try:
            asyncio.run(run_level(port, proc.pid, 4, body))  # warm-up
            rows: list[Row] = []
            print(f"completion: {len(tokens)} tokens ({len(index)} delta events) per stream at {args.tps:g} tokens/s, "
                  f"first token after {args.first_token_ms:g} ms, lockstep {args.lockstep}, nice {args.nice}; "
                  f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")  # fmt: skip
            print(f"{'streams':>7} {'ok':>5} {'tokens/s':>9} {'CPU us/token':>12} {'TTFE p50':>9} {'TTFE p99':>9} "
                  f"{'added p50':>10} {'added p99':>10}")  # fmt: skip
            for level in [int(x) for x in args.levels.split(",")]:
                cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
                results = asyncio.run(run_level(port, proc.pid, level, body))
                wall, cpu = time.perf_counter() - t0, cpu_seconds(proc.pid) - cpu0
                ok = [r for r in results if r.ok and len(r.arrivals) == len(index)]
                streamed = len(tokens) * len(ok)
                ttfe = [(r.first - r.sent) * 1000 for r in ok if r.first is not None]
                added: list[float] = []
                for r in ok:
                    offsets = [a - i / args.tps for a, i in zip(r.arrivals, index, strict=True)]
                    anchor = min(offsets)
                    added += [(o - anchor) * 1000 for o in offsets]
                row: Row = {
                    "streams": level,
                    "ok": len(ok),
                    "tokens_per_s": streamed / wall,
                    "cpu_us_per_token": cpu / max(streamed, 1) * 1e6,
                    "ttfe_p50_ms": percentile(ttfe, 0.5),
                    "ttfe_p99_ms": percentile(ttfe, 0.99),
                    "added_p50_ms": percentile(added, 0.5),
                    "added_p99_ms": percentile(added, 0.99),
                    "errors": sorted({r.error for r in results if r.error})[:3],
                }
                rows.append(row)
                print(f"{level:>7} {len(ok):>5} {row['tokens_per_s']:>9.0f} {row['cpu_us_per_token']:>12.1f} "
                      f"{row['ttfe_p50_ms']:>7.1f}ms {row['ttfe_p99_ms']:>7.1f}ms "
                      f"{row['added_p50_ms']:>8.2f}ms {row['added_p99_ms']:>8.2f}ms", flush=True)  # fmt: skip
                if row["errors"]:
                    print("   errors:", row["errors"])
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(10)
    bar = next((r for r in rows if r["streams"] == 64), None)
    if bar is not None:
        met = bar["added_p99_ms"] <= 20 and bar["cpu_us_per_token"] <= 60 and bar["ok"] == 64
        print(f"bar at 64 streams of {args.tps:g} tokens/s: p99 added latency {bar['added_p99_ms']:.2f} ms (<= 20), "
              f"CPU {bar['cpu_us_per_token']:.1f} us/token (<= 60): {'met' if met else 'NOT met'}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
