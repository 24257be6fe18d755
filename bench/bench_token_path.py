"""What one streamed token costs the server's own code, in this process, with no sockets.

    TIKTOKEN_ENCODINGS_BASE=../shared/vocab .venv/bin/python bench/bench_token_path.py [--words 250] [--rounds 7]

The path `serve` runs for every token of a stream behind an HTTP engine, from the engine's bytes to the
client's: the engine connection's `data_received` (httptools, the SSE lines), the loop turn's hand-over
(`engines.reader._Turn`), the vLLM adapter's read of the chunk's JSON, the run (`ResponseRun.feed`: the
parser's fast path and the delta's SSE frame), and the client write at the turn's end (`exchange._Direct`,
through the protocol's `CHUNK_WRITER` into a transport that keeps nothing). The engine's chunks are the
fake vLLM engine's own (`fake_engine.frames`), one token per chunk, one chunk per loop turn; each round
streams the whole completion through a new response, `--rounds` times, and the best round is printed as
CPU µs per token (`time.process_time`).

It leaves out what the kernel and uvloop do per token (the two socket operations, the poll) and the cost
per request (`bench_request.py`), and it runs hot: in `serve` at 64 streams the same code costs two to three
times as much, its caches shared with every other stream and the kernel's socket work (docs/performance.md).
What it is for is comparing two versions of the per-token code on a quiet core in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))

from fake_engine import completion_text, frames  # noqa: E402

from harmony_responses import load_harmony_encoding  # noqa: E402
from harmony_responses.server.engines import http as engine_http  # noqa: E402
from harmony_responses.server.engines.openai_completions import OpenAICompletionsEngine  # noqa: E402
from harmony_responses.server.engines.reader import EngineResponse, Framing, _Connection  # noqa: E402
from harmony_responses.server.exchange import ResponsesWire, _Direct  # noqa: E402
from harmony_responses.server.respond import Plan, ResponseRun, parse_body, plan_request  # noqa: E402
from harmony_responses.server.serving import chunk_writer  # noqa: E402
from harmony_responses.server.settings import MediaPolicy, ReasoningEvents  # noqa: E402

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


class _Sink:
    """A client transport that counts what it is given."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, data: bytes) -> None:
        self.bytes += len(data)


class _Flow:
    write_paused = False


class _Cycle:
    """What `chunk_writer` reads of uvicorn's request cycle: a chunked response under way."""

    def __init__(self, transport: _Sink) -> None:
        self.transport = transport
        self.flow = _Flow()
        self.disconnected = False
        self.response_complete = False
        self.response_started = True
        self.chunked_encoding = True


class _NoLoop:
    """Stands in for the loop the turn schedules itself on: the bench runs each turn itself."""

    @staticmethod
    def call_soon(callback: Callable[[], None]) -> None:
        return None


async def _adapter_read(plan: Plan) -> Callable[[Any, engine_http.Outputs], None]:
    """The vLLM adapter's chunk reader, as `produce` hands it to `outputs` (no request is sent)."""
    engine = OpenAICompletionsEngine(
        "http://127.0.0.1:9", flavor="vllm", model="gpt-oss", timeout=30, max_connections=1
    )
    found: list[Callable[[Any, engine_http.Outputs], None]] = []

    @contextlib.asynccontextmanager
    async def post(path: str, payload: Any) -> AsyncIterator[None]:
        yield None

    async def outputs(response: Any, read: Callable[[Any, engine_http.Outputs], None]) -> AsyncIterator[Any]:
        found.append(read)
        yield None

    engine.post = post  # type: ignore[assignment,method-assign]
    engine.outputs = outputs  # type: ignore[assignment,method-assign]
    await engine.produce(plan.engine_request).__anext__()
    return found[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", type=int, default=250, help="final-answer words per completion (~1.2 tokens each)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds of 20 responses; the best is printed")
    args = ap.parse_args()
    enc = load_harmony_encoding("HarmonyGptOss")
    ids = enc.encode(completion_text(args.words), allowed_special="all")
    texts = [enc.decode_bytes([i]).decode("utf-8", "replace") for i in ids]
    _, steps, _ = frames("vllm", ids, texts)
    steps = steps[:-1]  # the last carries the stop: the run would end, and the bench measures the stream's middle
    body = parse_body({"model": "gpt-oss", "input": "Benchmark me.", "stream": True, "store": False})
    plan = plan_request(body, enc, media=MediaPolicy.REJECT, budget=4000)
    sink = _Sink()
    write = chunk_writer(_Cycle(sink))  # type: ignore[arg-type]

    async def run() -> float:
        loop = asyncio.get_running_loop()
        read = await _adapter_read(plan)
        task = asyncio.current_task()
        assert task is not None

        async def send(message: Any) -> None:
            raise AssertionError("the chunk writer writes every token here")

        def one_response() -> None:
            wire = ResponsesWire(ReasoningEvents.OPENAI)
            response_run = ResponseRun(plan, enc, wire.sink, model="gpt-oss")
            response_run.start()
            wire.take()
            direct = _Direct(response_run, wire.take, send, task, write)
            conn = _Connection(loop)
            response = EngineResponse(conn, Framing.SSE, 30.0)
            conn.response = response
            response._data(HEAD)
            response.listen(engine_http._listener(response, read, direct, []))
            turn = response._turn
            turn._loop = _NoLoop  # type: ignore[assignment]
            for step in steps:
                conn.data_received(step)
                turn._run()
            response.release()
            assert direct.active and not response_run.ended

        best: list[float] = []
        done = asyncio.Event()

        def measure() -> None:  # from a callback, as the engine connection's reads run in `serve`
            for _ in range(3):
                one_response()
            for _ in range(args.rounds):
                started = time.process_time()
                for _ in range(20):
                    one_response()
                best.append((time.process_time() - started) / 20 / len(steps) * 1e6)
            done.set()

        loop.call_soon(measure)
        await done.wait()
        return min(best)

    per_token = asyncio.run(run())
    print(f"{len(steps)} tokens per response; the per-token path: {per_token:.2f} CPU µs per token (best round)")
    print(f"client bytes written: {sink.bytes}")


if __name__ == "__main__":
    main()
