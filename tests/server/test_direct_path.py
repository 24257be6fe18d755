"""The streamed per-token path run in the engine connection's callback (`exchange._Direct`, `eager`).

`eager.start` is checked alone (a coroutine that completes, one that suspends and is finished by its
task, cancellation reaching it, the current task it sees). Then whole `EngineCall`s run in this process
against the fake engine process of every wire format, with the direct path on and off (`eager.AVAILABLE`),
and with an ASGI `send` that never suspends (uvicorn's, mostly), always suspends, or suspends now and then,
and with the server's `CHUNK_WRITER` extension, which now and then cannot write (the transport paused): the
bytes the client gets must be the same every way, the direct path must be the one that fed the tokens
when it is on, and failures mid-stream (an error chunk, a cut connection, no finish, a stall) must end the
stream the same way.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harmony_responses import load_harmony_encoding
from harmony_responses.server import eager, exchange
from harmony_responses.server.engines.base import Engine
from harmony_responses.server.engines.llamacpp import LlamaCppEngine
from harmony_responses.server.engines.ollama import OllamaEngine
from harmony_responses.server.engines.openai_completions import OpenAICompletionsEngine
from harmony_responses.server.engines.sglang import SGLangEngine
from harmony_responses.server.exchange import CHUNK_WRITER, EngineCall, ResponsesWire
from harmony_responses.server.metrics import Metrics
from harmony_responses.server.respond import ResponseRun, parse_body, plan_request
from harmony_responses.server.settings import MediaPolicy, ReasoningEvents

from serverkit import FakeEngine

ENC = load_harmony_encoding("HarmonyGptOss")

ADAPTERS: dict[str, tuple[str, Any]] = {
    "vllm": (
        "vllm",
        lambda url, t: OpenAICompletionsEngine(url, flavor="vllm", model="m", timeout=t, max_connections=8),
    ),
    "sglang": ("sglang", lambda url, t: SGLangEngine(url, timeout=t, max_connections=8)),
    "llamacpp": ("llamacpp", lambda url, t: LlamaCppEngine(url, ENC, timeout=t, max_connections=8)),
    "ollama": ("ollama", lambda url, t: OllamaEngine(url, ENC, model="gpt-oss:20b", timeout=t, max_connections=8)),
}


# eager.start alone


def test_a_coroutine_that_never_suspends_completes_in_the_call() -> None:
    seen: list[Any] = []

    async def work() -> None:
        seen.append(asyncio.current_task())

    async def main() -> None:
        task = asyncio.ensure_future(asyncio.sleep(0.05))
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        loop.call_soon(lambda: done.set_result(eager.start(work(), task)))  # from a callback: no task running
        assert await done is None
        assert seen == [task]  # it ran as the given task
        await task

    asyncio.run(main())


def test_a_coroutine_that_suspends_is_finished_by_its_task_with_its_value() -> None:
    async def work(gate: asyncio.Future[int]) -> int:
        got = await gate
        await asyncio.sleep(0)
        return got + 1

    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate: asyncio.Future[int] = loop.create_future()
        holder: list[eager.Rest | None] = []

        async def owner() -> int:
            while not holder:
                await asyncio.sleep(0)
            rest = holder[0]
            assert rest is not None
            return int(await rest)

        task = asyncio.ensure_future(owner())
        loop.call_soon(lambda: holder.append(eager.start(work(gate), task)))
        await asyncio.sleep(0.01)
        gate.set_result(41)
        assert await task == 42

    asyncio.run(main())


def test_cancelling_the_task_reaches_the_suspended_coroutine() -> None:
    events: list[str] = []

    async def work(gate: asyncio.Future[None]) -> None:
        try:
            await gate
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        finally:
            events.append("finally")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate: asyncio.Future[None] = loop.create_future()
        holder: list[eager.Rest | None] = []

        async def owner() -> None:
            while not holder:
                await asyncio.sleep(0)
            rest = holder[0]
            assert rest is not None
            await rest

        task = asyncio.ensure_future(owner())
        loop.call_soon(lambda: holder.append(eager.start(work(gate), task)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert gate.cancelled()

    asyncio.run(main())
    assert events == ["cancelled", "finally"]


def test_an_error_in_the_first_step_is_raised_by_start_and_the_task_is_left_as_it_was() -> None:
    async def work() -> None:
        raise OSError("gone")

    async def main() -> None:
        task = asyncio.ensure_future(asyncio.sleep(0.02))
        loop = asyncio.get_running_loop()
        done: asyncio.Future[str] = loop.create_future()

        def call() -> None:
            try:
                eager.start(work(), task)
            except OSError as exc:
                done.set_result(f"{exc} {asyncio.current_task(loop)}")

        loop.call_soon(call)
        assert await done == "gone None"  # no task is left current after the call
        await task

    asyncio.run(main())


def test_called_inside_another_task_nothing_runs_until_its_task_awaits_the_rest() -> None:
    ran: list[Any] = []

    async def work() -> str:
        ran.append(asyncio.current_task())
        return "done"

    async def main() -> None:
        holder: list[eager.Rest | None] = []

        async def owner() -> str:
            while not holder:
                await asyncio.sleep(0)
            rest = holder[0]
            assert rest is not None and ran == []
            return str(await rest)

        task = asyncio.ensure_future(owner())
        holder.append(eager.start(work(), task))  # from inside main's task
        assert await task == "done"
        assert ran == [task]

    asyncio.run(main())


# whole calls against the fake engines


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeEngine]:
    proc = FakeEngine("all")
    try:
        yield proc
    finally:
        proc.stop()


class Sends:
    """An ASGI send recording the body bytes; `suspend_every` n-th call waits a loop turn first (0: never)."""

    def __init__(self, suspend_every: int) -> None:
        self.suspend_every = suspend_every
        self.calls = 0
        self.body = bytearray()
        self.started = False

    async def __call__(self, message: Any) -> None:
        self.calls += 1
        if self.suspend_every and self.calls % self.suspend_every == 0:
            await asyncio.sleep(0.001)
        if message["type"] == "http.response.start":
            self.started = True
        else:
            self.body += message.get("body", b"")


class Writer:
    """A `CHUNK_WRITER` into the same body as `sends`; every `refuse_every`-th call it cannot write (False)."""

    def __init__(self, sends: Sends, refuse_every: int) -> None:
        self.sends = sends
        self.refuse_every = refuse_every
        self.calls = 0
        self.wrote = 0

    def __call__(self, body: bytes) -> bool:
        self.calls += 1
        if self.refuse_every and self.calls % self.refuse_every == 0:
            return False
        self.sends.body += body
        self.wrote += 1
        return True


def _normalized(body: bytes) -> str:
    text = body.decode()
    text = re.sub(r'"(resp|msg|rs|fc|call)_[0-9a-f]+"', r'"\1_ID"', text)
    return re.sub(r'"(\w+_at)":\s*[0-9.]+', r'"\1":0', text)


def _call(engine: Engine, text: str, sends: Sends, writer: Writer | None = None) -> tuple[bytes, int]:
    """Run one streamed EngineCall (with `writer` as the scope's `CHUNK_WRITER`); its body and how many outputs
    the direct path fed."""
    fed = [0]
    original = exchange._Direct.__call__

    def counting(self: Any, outputs: Any) -> bool:
        fed[0] += len(outputs)
        return original(self, outputs)

    async def main() -> None:
        plan = plan_request(
            parse_body({"model": "gpt-oss", "input": text, "stream": True}), ENC, media=MediaPolicy.REJECT, budget=400
        )
        wire = ResponsesWire(ReasoningEvents.OPENAI)
        run = ResponseRun(plan, ENC, wire.sink, model="gpt-oss")
        call = EngineCall(
            engine=engine,
            run=run,
            wire=wire,
            stream=True,
            metrics=Metrics(),
            endpoint="/v1/responses",
            received_at=0.0,
            release=lambda: None,
        )
        never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

        async def receive() -> Any:
            return await never

        try:
            scope: dict[str, Any] = {"type": "http"}
            if writer is not None:
                scope["extensions"] = {CHUNK_WRITER: writer}
            await call(scope, receive, sends)
        finally:
            await engine.aclose()

    exchange._Direct.__call__ = counting  # type: ignore[method-assign]
    try:
        asyncio.run(main())
    finally:
        exchange._Direct.__call__ = original  # type: ignore[method-assign]
    return bytes(sends.body), fed[0]


def _ways(monkeypatch: pytest.MonkeyPatch, name: str, fake: FakeEngine, text: str) -> dict[str, str]:
    """The body for `text` every way: the task path, the direct path with a send that never, always, or every
    third time suspends; the direct path must have fed the tokens when on."""
    prefix, factory = ADAPTERS[name]
    results = {}
    # (label, direct path on, every n-th send suspends, every n-th write the writer refuses: None, no writer)
    ways: list[tuple[str, bool, int, int | None]] = [
        ("task", False, 0, None),
        ("direct", True, 0, None),
        ("always", True, 1, None),
        ("sometimes", True, 3, None),
        ("writer", True, 0, 0),
        ("writer_refusing", True, 2, 3),
    ]
    for label, direct, every, refuse in ways:
        monkeypatch.setattr(eager, "AVAILABLE", direct)
        sends = Sends(every)
        writer = None if refuse is None else Writer(sends, refuse)
        body, fed = _call(factory(f"{fake.url}/{prefix}", 10.0), text, sends, writer)
        results[label] = _normalized(body)
        assert (fed > 0) is direct, f"{name} {label}: the direct path fed {fed} outputs"
        assert results[label].endswith("data: [DONE]\n\n"), label
        if writer is not None and "SCENARIO" not in text:
            assert writer.wrote > 0, f"{name} {label}: the writer was never used"
    return results


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_the_direct_path_writes_the_same_bytes_as_the_task(
    fake: FakeEngine, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = _ways(monkeypatch, name, fake, "Tell me about café ☕ and 日本")
    assert "response.completed" in results["task"]
    for label in ("direct", "always", "sometimes", "writer", "writer_refusing"):
        assert results[label] == results["task"], label


def _kinds(text: str) -> list[str]:
    return [line[len("event: ") :] for line in text.splitlines() if line.startswith("event: ")]


@pytest.mark.parametrize("name", sorted(ADAPTERS))
@pytest.mark.parametrize("scenario", ["error_mid", "cut_mid", "no_finish"])
def test_a_failure_mid_stream_ends_the_direct_path_as_the_task(
    fake: FakeEngine, name: str, scenario: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # where the fake fails is drawn at random per request: the events up to it differ, the end does not
    results = _ways(monkeypatch, name, fake, f"SCENARIO={scenario} hello there")
    for label, text in results.items():
        kinds = _kinds(text)
        assert kinds[:2] == ["response.created", "response.in_progress"], label
        assert kinds[-2:] == ["error", "response.failed"], (label, kinds[-4:])
        assert len(kinds) == len(set(re.findall(r'"sequence_number":(\d+)', text))), label


def test_a_stall_still_times_out_on_the_direct_path(fake: FakeEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eager, "AVAILABLE", True)
    prefix, factory = ADAPTERS["vllm"]
    started = time.monotonic()
    body, fed = _call(factory(f"{fake.url}/{prefix}", 0.3), "SCENARIO=stall_mid hello", Sends(0))
    text = body.decode()
    assert fed > 0
    assert "response.failed" in text and text.endswith("data: [DONE]\n\n")
    assert "timeout" in text.lower()
    assert time.monotonic() - started < 5
