"""A bounded chaos run: a couple of hundred mixed requests while the engine fails some mid-stream and clients leave.

A real server process in front of a fake vLLM process that fails a share of plain requests mid-stream
(an error chunk, or a cut connection). The mix: Responses and Chat Completions, streamed and not,
tool calls, bad requests, and clients that disconnect mid-stream or give up on a whole response.
Afterwards: no 500, no stream left without its end, no engine request still running, and the
server's memory back near its baseline. `HARMONY_RESPONSES_CHAOS_REQUESTS` sets the size (CI's long
variant runs thousands); every request has a deadline, so a hung stream fails the test.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from serverkit import FakeEngine, Server, process_rss_bytes, sse_events

REQUESTS = int(os.environ.get("HARMONY_RESPONSES_CHAOS_REQUESTS", "200"))
CONCURRENCY = 32
DEADLINE = 30.0  # seconds for any one request; a stream that hangs fails here
TERMINAL = {"response.completed", "response.incomplete", "response.failed"}


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[Server, FakeEngine]]:
    fake = FakeEngine("vllm", "--fail-rate", "0.25", "--seed", "7")
    server = Server("--engine", f"vllm:{fake.url}", "--engine-timeout", "10", "--max-concurrency", "256")
    try:
        yield server, fake
    finally:
        server.stop()
        fake.stop()


KINDS = [
    "stream",
    "stream",
    "stream",
    "whole",
    "whole",
    "chat_stream",
    "chat_whole",
    "tool",
    "disconnect",
    "abandon",
    "bad",
]


async def one(client: httpx.AsyncClient, url: str, kind: str, rng: random.Random) -> tuple[str, int | None, str]:
    """(kind, status, outcome) for one request of `kind`; outcome names what was seen."""
    text = f"request {rng.random():.6f}"
    if kind == "bad":
        r = await client.post(url + "/v1/responses", json={"input": [{"type": "message", "role": "wizard"}]})
        return kind, r.status_code, "refused"
    if kind in ("stream", "tool", "disconnect"):
        body: dict[str, Any] = {"input": text, "stream": True}
        if kind == "tool":
            body["input"] = "SCENARIO=tool " + text
            body["tools"] = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
        if kind == "disconnect":
            body["input"] = "SCENARIO=slow " + text
        async with client.stream("POST", url + "/v1/responses", json=body) as r:
            if kind == "disconnect":
                seen = 0
                async for _line in r.aiter_lines():
                    seen += 1
                    if seen > rng.randint(2, 40):
                        break
                return kind, r.status_code, "left"
            raw = (await r.aread()).decode()
        if r.status_code != 200:
            return kind, r.status_code, "error"
        assert raw.endswith("data: [DONE]\n\n"), raw[-300:]
        events = sse_events(raw)
        last = events[-1]["type"]
        assert last in TERMINAL, last
        if last == "response.failed":
            assert events[-2]["type"] == "error"
        return kind, r.status_code, last
    if kind == "chat_stream":
        body = {
            "messages": [{"role": "user", "content": text}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        r = await client.post(url + "/v1/chat/completions", json=body)
        assert r.text.endswith("data: [DONE]\n\n"), r.text[-300:]
        ended = '"finish_reason": "stop"' in r.text or '"error":' in r.text
        assert ended, r.text[-300:]
        return kind, r.status_code, "error" if '"error":' in r.text else "stop"
    if kind == "abandon":
        try:
            await client.post(
                url + "/v1/responses", json={"input": "SCENARIO=slow " + text}, timeout=0.05 + rng.random() / 5
            )
        except httpx.TimeoutException:
            return kind, None, "left"
        return kind, 200, "finished first"
    if kind == "chat_whole":
        r = await client.post(url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": text}]})
        return kind, r.status_code, r.json()["choices"][0]["finish_reason"] if r.status_code == 200 else "error"
    r = await client.post(url + "/v1/responses", json={"input": text})
    return kind, r.status_code, r.json()["status"] if r.status_code == 200 else r.json()["error"]["code"]


async def storm(url: str, n: int, seed: int) -> list[tuple[str, int | None, str]]:
    rng = random.Random(seed)
    gate = asyncio.Semaphore(CONCURRENCY)
    limits = httpx.Limits(max_connections=CONCURRENCY * 2)
    async with httpx.AsyncClient(timeout=DEADLINE, limits=limits) as client:

        async def guarded(kind: str, r: random.Random) -> tuple[str, int | None, str]:
            async with gate:
                return await asyncio.wait_for(one(client, url, kind, r), DEADLINE)

        jobs = [guarded(rng.choice(KINDS), random.Random(rng.random())) for _ in range(n)]
        return await asyncio.gather(*jobs)


def settle(server: Server, fake: FakeEngine) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        health = httpx.get(server.url + "/health").json()
        stats = fake.stats()
        if (not health["in_flight"] and not stats["active"]) or time.monotonic() > deadline:
            return {"health": health, "fake": stats}
        time.sleep(0.05)


def test_chaos(stack: tuple[Server, FakeEngine]) -> None:
    server, fake = stack
    asyncio.run(storm(server.url, 40, seed=1))  # warm-up: caches, pools, the allocator's arenas
    settle(server, fake)
    baseline = process_rss_bytes(server.pid)
    started = time.monotonic()
    results = asyncio.run(storm(server.url, REQUESTS, seed=2))
    elapsed = time.monotonic() - started
    state = settle(server, fake)
    after = process_rss_bytes(server.pid)
    outcomes = Counter((kind, status, outcome) for kind, status, outcome in results)
    summary = f"{REQUESTS} requests in {elapsed:.1f}s: {sorted(outcomes.items(), key=str)}"
    assert not [r for r in results if r[1] == 500], summary
    assert {s for _k, s, _o in results} <= {200, 400, 502, None}, summary
    assert all(s == 400 for k, s, _o in results if k == "bad"), summary
    failed_mid = sum(n for (k, _s, o), n in outcomes.items() if o in ("response.failed", "error", "engine_failed"))
    assert failed_mid > 0, f"the engine failed nothing mid-stream: {summary}"
    assert any(o == "left" for _k, _s, o in results), summary
    assert state["health"]["in_flight"] == 0 and state["health"]["engine"]["active_requests"] == 0, state
    assert state["fake"]["active"] == 0, state
    assert after <= baseline * 1.15 + 8 * 2**20, f"RSS grew from {baseline >> 20} MiB to {after >> 20} MiB; {summary}"
