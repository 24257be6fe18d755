"""What one streamed request costs the server besides its tokens, in this process, with no sockets.

    TIKTOKEN_ENCODINGS_BASE=../shared/vocab .venv/bin/python bench/bench_request.py [--words 1] [--n 300]

The app (`create_app`, responses not stored) is called as uvicorn calls it, with an engine that hands
over the bench's completion (fake_engine.completion_text) at once, one token per output, and a `send`
that keeps nothing. Printed, as CPU time per request (`time.process_time`, so other processes' load does
not count): the whole request through the app; the handler alone (body read and parsed, plan, prompt
rendered, the run made); and the run alone (`response.created` to `response.completed`: the bridge, its
events and their SSE). With `--words 1` (12 tokens) the whole is nearly all fixed cost; the difference
between two `--words` values over their token counts is the marginal cost per token in process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))

from fake_engine import completion_text  # noqa: E402
from starlette.requests import Request  # noqa: E402

from harmony_responses import load_harmony_encoding  # noqa: E402
from harmony_responses.server import app as app_module  # noqa: E402
from harmony_responses.server.engines.base import (  # noqa: E402
    Engine,
    EngineInfo,
    EngineOutput,
    EngineRequest,
    Finished,
    FinishReason,
    Tokens,
)
from harmony_responses.server.exchange import EngineCall, ResponsesWire  # noqa: E402
from harmony_responses.server.respond import ResponseRun, parse_body, plan_request  # noqa: E402
from harmony_responses.server.settings import MediaPolicy, ReasoningEvents, Settings  # noqa: E402
from harmony_responses.store import MemoryStore  # noqa: E402


class Instant(Engine):
    """The completion's ids at once, one per output, then the stop."""

    info = EngineInfo(kind="instant", target="-", output="tokens", json_constraint=False)

    def __init__(self, ids: list[int]) -> None:
        super().__init__()
        self.ids = ids

    async def produce(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        for token in self.ids:
            yield Tokens([token])
        yield Finished(FinishReason.STOP)


def per_call(n: int, step: Callable[[], Any]) -> float:
    """CPU ms per call of `step` (an awaitable factory's result run to its end, or a plain call)."""
    loop = asyncio.new_event_loop()

    def once() -> None:
        result = step()
        if asyncio.iscoroutine(result):
            loop.run_until_complete(result)

    try:
        for _ in range(5):
            once()
        started = time.process_time()
        for _ in range(n):
            once()
        return (time.process_time() - started) / n * 1e3
    finally:
        loop.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--words", type=int, default=1, help="final-answer words per completion (~1.2 tokens each)")
    ap.add_argument("--n", type=int, default=300, help="requests per measure")
    args = ap.parse_args()
    enc = load_harmony_encoding("HarmonyGptOss")
    ids = enc.encode(completion_text(args.words), allowed_special="all")
    app = app_module.create_app(Settings(), engine=Instant(ids), encoding=enc, store=MemoryStore())
    raw = {"model": "gpt-oss", "input": "Benchmark me.", "stream": True, "store": False}
    body = json.dumps(raw).encode()
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/v1/responses",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "query_string": b"",
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 1),
        "client": ("127.0.0.1", 2),
        "root_path": "",
    }

    def receiver() -> Callable[[], Any]:
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # never disconnects
            return {"type": "http.disconnect"}

        return receive

    async def send(message: Any) -> None:
        return None

    async def whole() -> None:
        await app(scope, receiver(), send)

    async def handler() -> None:
        call = await app_module.responses(Request(scope, receiver()), app.state)
        assert isinstance(call, EngineCall)
        call.release()

    body_model = parse_body(dict(raw))
    plan = plan_request(body_model, enc, media=MediaPolicy.REJECT, budget=4000)

    def run_alone() -> None:
        wire = ResponsesWire(ReasoningEvents.OPENAI)
        run = ResponseRun(plan, enc, wire.sink, model="gpt-oss")
        run.start()
        for token in ids:
            run.feed(Tokens([token]))
            wire.take()
        run.finish(Finished(FinishReason.STOP))
        wire.take()

    print(f"{len(ids)} completion tokens per request, CPU ms per request:")
    print(f"  whole request through the app  {per_call(args.n, whole):7.3f}")
    print(f"  the handler alone              {per_call(args.n, handler):7.3f}")
    print(f"  the run alone                  {per_call(args.n, run_alone):7.3f}")


if __name__ == "__main__":
    main()
