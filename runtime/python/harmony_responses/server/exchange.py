"""One engine call answered over HTTP: `EngineCall` is the ASGI response that runs it.

The HTTP status is chosen after the engine's first output: an engine that fails before it gets 502
(504 on a timeout, 400 when the engine rejected the request), with the spec's error body. After that
the answer is 200; streamed, every engine output's events are written (and flushed) at once, and an
engine failure mid-stream ends the stream with an `error` event and `response.failed`, then `[DONE]`.
A client that disconnects cancels the call at once: a watcher waits on the ASGI `http.disconnect`
message and cancels the task that iterates the engine, which closes the engine's connection.

Streamed from an HTTP engine, the tokens after the first do not go through that task: the engine
connection's callback feeds each batch to the run and writes its events (`_Direct`, with the ASGI
`send` started eagerly, `eager`), and the task comes back only for what is not a plain batch: the end
(stored before its terminal event), an engine failure, a send that suspended (flow control), a bug.

A stored response (`Recorder`) is begun before the status is chosen (a continuation whose previous
response went meanwhile is still a 400), and finished before the bytes holding its terminal event are
sent; a store that cannot finish it cuts the stream there (a whole response: 503), so no client is told
of an end the store does not hold.

While the server drains (`drain.Drain`), a call still running at the deadline is interrupted: its engine
request is cancelled and the response ends with the `shutting_down` error (see `_interrupted`). A whole
response that failed once stored carries its `response_id` beside the error, so the client can fetch
or delete it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from ..bridge import DONE_FRAME, ChatChunks, EventSink, RequestError, SSESink
from ..bridge.items import Sink
from ..types import ResponseOutputTextDoneStreamingEvent
from . import eager
from .drain import Drain
from .engines.base import Engine, EngineError, EngineRejected, EngineTimeout, Finished, Text, Tokens
from .engines.http import DIRECT
from .errors import ErrorKind, ServerError, error_payload, http_status
from .metrics import Metrics
from .respond import Plan, ResponseRun, chat_completion, chat_logprobs
from .settings import ReasoningEvents
from .stored import NotRecorded, Recorder
from .structured import engine_outputs

log = logging.getLogger("harmony_responses.server")

_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_JSON_TYPE = (b"content-type", b"application/json")

# The ASGI scope extension (set by `serving.GuardedProtocol`) that writes a part of a streamed body at once:
# `write(body) -> bool`, False when it could not (the caller then sends the part through ASGI `send`).
CHUNK_WRITER = "harmony_responses.chunk_writer"


def error_kind(exc: EngineError) -> ErrorKind:
    if isinstance(exc, EngineTimeout):
        return ErrorKind.ENGINE_TIMEOUT
    if isinstance(exc, EngineRejected):
        return ErrorKind.ENGINE_REJECTED
    return ErrorKind.ENGINE_FAILED


async def send_json(send: Send, status: int, body: Any, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
    head = [_JSON_TYPE, (b"content-length", str(len(data)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data, "more_body": False})


class Wire(ABC):
    """How a run's events go on the wire: the sink the run writes to, and its bytes (streamed, or whole)."""

    @property
    @abstractmethod
    def sink(self) -> Sink: ...

    @abstractmethod
    def take(self) -> bytes:
        """What the sink holds, as bytes to send (and the sink emptied)."""

    @abstractmethod
    def tail(self) -> bytes: ...

    @abstractmethod
    def whole(self, run: ResponseRun) -> bytes: ...


class ResponsesWire(Wire):
    """Open Responses: SSE text straight from the bridge (deltas never become typed events), or the
    `ResponseResource`."""

    def __init__(self, names: ReasoningEvents) -> None:
        self._sink = SSESink("openai" if names is ReasoningEvents.OPENAI else "spec")

    @property
    def sink(self) -> Sink:
        return self._sink

    def take(self) -> bytes:
        return self._sink.take().encode()

    def tail(self) -> bytes:
        return _DONE_FRAME

    def whole(self, run: ResponseRun) -> bytes:
        response = run.response()
        assert response is not None
        return response.model_dump_json().encode()


class ChatWire(Wire):
    """Chat Completions: `chat.completion.chunk` data lines, or the `chat.completion`."""

    def __init__(self, include_usage: bool) -> None:
        self._sink = EventSink()
        self.chunks = ChatChunks(include_usage)
        self._head: dict[str, Any] = {}  # a chunk's fields besides `choices`, once one was made

    @property
    def sink(self) -> Sink:
        return self._sink

    @staticmethod
    def _lines(chunks: Sequence[dict[str, Any]]) -> bytes:
        return "".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks).encode()

    def take(self) -> bytes:
        events = self._sink.take()
        if not any(isinstance(e, ResponseOutputTextDoneStreamingEvent) and e.logprobs for e in events):
            chunks = self.chunks.feed(events)
            if chunks and not self._head:
                self._head = {k: v for k, v in chunks[0].items() if k != "choices"}
            return self._lines(chunks)
        chunks = []
        start = 0
        for i, event in enumerate(events):  # an answer's log probabilities: one chunk after its text
            if isinstance(event, ResponseOutputTextDoneStreamingEvent) and event.logprobs:
                chunks += self.chunks.feed(events[start : i + 1])
                start = i + 1
                if chunks and not self._head:
                    self._head = {k: v for k, v in chunks[0].items() if k != "choices"}
                choice = {"index": 0, "delta": {}, "logprobs": chat_logprobs(event.logprobs), "finish_reason": None}
                chunks.append({**self._head, "choices": [choice]})
        chunks += self.chunks.feed(events[start:])
        return self._lines(chunks)

    def tail(self) -> bytes:
        return self._lines(self.chunks.close()) + _DONE_FRAME

    def whole(self, run: ResponseRun) -> bytes:
        response = run.response()
        assert response is not None
        return json.dumps(chat_completion(response), ensure_ascii=False).encode()


_DONE_FRAME = DONE_FRAME.encode()


async def complete(engine: Engine, run: ResponseRun, metrics: Metrics) -> None:
    """Run the engine for `run` to its end with no client attached (compaction): `ServerError` when the engine
    fails before its first output (502, 504, or 400 when it refused); a later failure fails the run."""
    outputs = engine_outputs(engine, run)
    try:
        try:
            first = await outputs.__anext__()
        except EngineError as exc:
            metrics.engine_errors.labels(error_kind(exc).name.lower()).inc()
            raise ServerError(error_kind(exc), exc.message) from None
        except StopAsyncIteration:
            raise ServerError(ErrorKind.ENGINE_FAILED, "the engine ended the stream without any output") from None
        metrics.input_tokens.inc(run.plan.input_tokens)
        run.start()
        run.finish(first) if isinstance(first, Finished) else run.feed(first)
        try:
            async for output in outputs:
                if run.ended:
                    break
                run.finish(output) if isinstance(output, Finished) else run.feed(output)
        except EngineError as exc:
            metrics.engine_errors.labels(error_kind(exc).name.lower()).inc()
            run.fail(error_kind(exc), exc.message)
        if not run.ended:
            run.fail(ErrorKind.ENGINE_FAILED, "the engine ended the stream without finishing")
    finally:
        metrics.output_tokens.inc(run.output_tokens)
        await outputs.aclose()


def _body_message(body: bytes) -> Message:
    """A part of the streamed body, more to come."""
    return {"type": "http.response.body", "body": body, "more_body": True}


class _Direct:
    """A stream's per-token path, run in the engine connection's callback (`engines.http.DIRECT`): each batch
    is fed to the run, and its events are sent to the client at the end of the loop turn (`flush`, once every
    stream's batch of the turn was fed), written by the server's `CHUNK_WRITER` when it has one and can, else
    with the ASGI `send` started eagerly (`eager.start`), so a token costs no wake-up of the stream's task. It
    stops (`active` False, the task resumed) when the run ends (the task stores the end before its terminal
    event is sent), when the send suspends (the client's transport paused writing: the task finishes it, and
    the engine's payloads wait meanwhile in the reader, which stops reading the socket past its bound), and
    when feeding or sending raised (the task raises it). `settle` is the task's side: raise, or finish the
    send, then go on.
    """

    __slots__ = ("active", "_error", "_held", "_over", "_rest", "_run", "_send", "_take", "_task", "_write")

    def __init__(
        self,
        run: ResponseRun,
        take: Callable[[], bytes],
        send: Send,
        task: asyncio.Task[Any],
        write: Callable[[bytes], bool] | None = None,
    ) -> None:
        self.active = True
        self._write = write
        self._over = False
        self._run = run
        self._take = take
        self._send = send
        self._task = task
        self._error: Exception | None = None
        self._rest: eager.Rest | None = None
        self._held = b""  # what this turn's batch made, for `flush`

    def __call__(self, outputs: list[Tokens | Text]) -> bool:
        if not self.active:
            return False
        run = self._run
        try:
            for output in outputs:
                run.feed(output)
                if run.ended:
                    self.active = False
                    return False
            self._held += self._take()
        except Exception as exc:  # raised in the task, where the stream's handling of it is
            self._error = exc
            self.active = False
            return False
        return True

    def flush(self) -> bool:
        """At the end of the loop turn: send what the turn's batch made."""
        body = self._held
        if not body or self._over:
            return self.active
        self._held = b""
        write = self._write
        try:
            if write is not None and write(body):
                return self.active
            rest = eager.start(self._send(_body_message(body)), self._task)
        except Exception as exc:  # raised in the task, as above
            self._error = exc
            self.active = False
            return False
        if rest is not None:
            self._rest = rest
            self.active = False
            return False
        return self.active

    async def settle(self) -> None:
        """In the task, once stopped: raise what failed, or finish the send that suspended (or send what the
        last batch made, when the turn's end never came); then go on."""
        error, rest, held = self._error, self._rest, self._held
        self._error = self._rest = None
        self._held = b""
        if error is not None:
            raise error
        if rest is not None:
            await rest
        if held:
            await self._send(_body_message(held))
        self.active = not self._over and not self._run.ended

    def stop(self) -> None:
        """No more in the callback, for good (the call is being interrupted)."""
        self._over = True
        self.active = False

    def close(self) -> None:
        """The task is done with the stream: stop, and drop a send that was never finished."""
        self.stop()
        if self._rest is not None:
            self._rest.close()
            self._rest = None


class ClientGone(Exception):
    """The client disconnected (seen by the watcher, or by a failed send)."""


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return


class EngineCall:
    """The ASGI response for one engine-backed request (see the module docstring)."""

    def __init__(
        self,
        *,
        engine: Engine,
        run: ResponseRun,
        wire: Wire,
        stream: bool,
        metrics: Metrics,
        endpoint: str,
        received_at: float,
        release: Callable[[], None],
        recorder: Recorder | None = None,
        drain: Drain | None = None,
    ) -> None:
        self.engine = engine
        self.run = run
        self.wire = wire
        self.stream = stream
        self.metrics = metrics
        self.endpoint = endpoint
        self.received_at = received_at
        self.release = release
        self.recorder = recorder
        self.drain = drain
        self.status: int | None = None
        self._work: asyncio.Future[None] | None = None
        self._interrupted = False
        self._recording: asyncio.Future[None] | None = None  # the store write of the run's end
        self._closed = False  # the body's last bytes were sent
        self._direct: _Direct | None = None
        self._chunk_writer: Callable[[bytes], bool] | None = None

    def interrupt(self) -> None:
        """End the call now (the server's shutdown deadline): cancel the engine; `__call__` ends the response."""
        if not self._interrupted:
            self._interrupted = True
            if self._direct is not None:
                self._direct.stop()  # nothing more in the engine's callback: the task ends the response
            if self._work is not None:
                self._work.cancel()

    @property
    def plan(self) -> Plan:
        return self.run.plan

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.metrics.in_flight.inc()
        self._chunk_writer = scope.get("extensions", {}).get(CHUNK_WRITER)
        drain = self.drain
        work = self._work = asyncio.ensure_future(self._serve(send))
        watch = asyncio.ensure_future(_wait_disconnect(receive))
        if drain is not None:
            drain.calls.add(self)
            if drain.expired:
                self.interrupt()
        try:
            await asyncio.wait((work, watch), return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()  # the client left: stop the engine now
                self.metrics.disconnects.inc()
            with contextlib.suppress(asyncio.CancelledError, ClientGone):
                await work
            if self._interrupted and not watch.done():
                await self._interrupted_end(send)
        finally:
            if drain is not None:
                drain.calls.discard(self)
            for task in (work, watch):
                if not task.done():
                    task.cancel()
            await asyncio.gather(work, watch, return_exceptions=True)
            self.metrics.in_flight.dec()
            self.release()
            if self.recorder is not None and not self.run.ended:
                await self.recorder.abandoned(self.run)
            if self.status is not None:
                self.metrics.requests.labels(self.endpoint, str(self.status)).inc()

    async def _error(self, send: Send, kind: ErrorKind, message: str, response_id: str | None = None) -> None:
        self.status = http_status(kind)
        body: dict[str, Any] = {"error": error_payload(kind, message)}
        if response_id is not None:
            body["response_id"] = response_id  # stored failed: the client can fetch or delete it
        headers = [(b"retry-after", b"1")] if kind is ErrorKind.SHUTTING_DOWN else []
        self._closed = True
        await send_json(send, self.status, body, headers)

    def _stored_id(self) -> str | None:
        """The response's id when the store holds it (begun), else None."""
        recorder = self.recorder
        return self.run.builder.response_id if recorder is not None and recorder.begun else None

    async def _interrupted_end(self, send: Send) -> None:
        """The shutdown deadline cut the call: end the response as failed, with its terminal events or a 503."""
        run = self.run
        if self._recording is not None:
            with contextlib.suppress(NotRecorded):
                await self._recording  # an end already being stored: let it land first
        if self._closed:
            return
        message = f"the server shut down before the response finished (--shutdown-timeout {self.drain_timeout:g} s)"
        if self.status is None:  # nothing sent yet: the whole response's error, or the stream's 503
            if run.started and not run.ended:
                run.fail(ErrorKind.SHUTTING_DOWN, message)
                with contextlib.suppress(NotRecorded):
                    await self._recorded(run)
            await self._error(send, ErrorKind.SHUTTING_DOWN, message, self._stored_id())
            return
        if not self.stream:
            return  # a whole response is being sent: it ends by itself
        if not run.ended:
            run.fail(ErrorKind.SHUTTING_DOWN, message)
            try:
                await self._recorded(run)
            except NotRecorded:
                return  # never claim an end the store does not hold (the stream is cut, as on a store failure)
        self._closed = True
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": self.wire.take() + self.wire.tail(), "more_body": False})

    @property
    def drain_timeout(self) -> float:
        return self.drain.timeout if self.drain is not None else 0.0

    async def _refused(self, send: Send, exc: RequestError | ServerError) -> None:
        """An error found once the engine had started (the store refused to begin the response)."""
        self.status = exc.status
        if isinstance(exc, RequestError):
            await send_json(send, exc.status, exc.to_body())
        else:
            await send_json(send, exc.status, exc.body(), [(k.encode(), v.encode()) for k, v in exc.headers.items()])

    async def _recorded(self, run: ResponseRun) -> None:
        """The run ended: store its end before its terminal event is sent (a shutdown that interrupts the
        call meanwhile waits for the write: it is shielded)."""
        if self.recorder is not None:
            self._recording = asyncio.ensure_future(self.recorder.ended(run))
            await asyncio.shield(self._recording)

    async def _serve(self, send: Send) -> None:
        run = self.run
        outputs = engine_outputs(self.engine, run)
        try:
            try:
                first = await outputs.__anext__()
            except EngineError as exc:
                self.metrics.engine_errors.labels(error_kind(exc).name.lower()).inc()
                log.warning("engine failed before streaming: %s", exc.message)
                await self._error(send, error_kind(exc), exc.message)
                return
            except StopAsyncIteration:
                await self._error(send, ErrorKind.ENGINE_FAILED, "the engine ended the stream without any output")
                return
            self.metrics.ttft.observe(time.monotonic() - self.received_at)
            self.metrics.input_tokens.inc(self.plan.input_tokens)
            run.start()
            if self.recorder is not None:
                try:
                    await self.recorder.started(run)
                except (RequestError, ServerError) as exc:
                    await self._refused(send, exc)
                    return
            if self.stream:
                await self._stream(send, run, first, outputs)
            else:
                await self._whole(send, run, first, outputs)
        finally:
            self.metrics.output_tokens.inc(run.output_tokens)
            await outputs.aclose()

    def _feed(self, run: ResponseRun, output: Any) -> None:
        run.finish(output) if isinstance(output, Finished) else run.feed(output)

    async def _write(self, send: Send | None) -> None:
        """Send what the run wrote to the wire since the last write (nothing is kept when not streaming)."""
        body = self.wire.take()
        if send is not None and body:
            await send(_body_message(body))

    def _direct_path(self) -> bool:
        """Whether the engine's outputs are its own stream (`structured.completion_outputs` hands out
        `engine.generate` itself): the two steps of a structured output and the hosted tool loop look at
        the run between outputs, so they keep to the task."""
        plan = self.plan
        return plan.hosted is None and (plan.answer is None or not self.engine.info.json_constraint)

    async def _drain(self, run: ResponseRun, outputs: Any, send: Send | None) -> None:
        """Feed the rest of the engine's outputs, each one's events written at once when `send` is given.

        An engine failure ends the run with `error` and `response.failed`. This loop runs once per token
        of every stream, so it calls the run and the wire directly; streamed, an HTTP engine hands each
        batch to `_Direct` in its connection's callback instead (see there), and this loop sees only what
        `_Direct` leaves to it.
        """
        feed, finish, take = run.feed, run.finish, self.wire.take
        direct: _Direct | None = None
        token = None
        if send is not None and eager.AVAILABLE and self._direct_path():
            task = asyncio.current_task()
            if task is not None:
                direct = self._direct = _Direct(run, take, send, task, self._chunk_writer)
                token = DIRECT.set(direct)
        try:
            async for output in outputs:
                if type(output) is Finished:
                    finish(output)
                else:
                    feed(output)
                if direct is not None and not direct.active:
                    await direct.settle()
                if run.ended:
                    await self._recorded(run)
                    await self._write(send)
                    return
                if send is not None:
                    body = take()
                    if body:
                        await send(_body_message(body))
        except EngineError as exc:
            if direct is not None:
                await direct.settle()
            kind = error_kind(exc)
            self.metrics.engine_errors.labels(kind.name.lower()).inc()
            log.warning("engine failed mid-stream: %s", exc.message)
            run.fail(kind, exc.message)
            await self._recorded(run)
            await self._write(send)
            return
        finally:
            if direct is not None:
                direct.close()
            if token is not None:
                DIRECT.reset(token)
        if not run.ended:
            run.fail(ErrorKind.ENGINE_FAILED, "the engine ended the stream without finishing")
            await self._recorded(run)
            await self._write(send)

    async def _stream(self, send: Send, run: ResponseRun, first: Any, outputs: Any) -> None:
        self.status = 200
        self.metrics.active_streams.inc()
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            try:
                self._feed(run, first)
                if run.ended:
                    await self._recorded(run)
                await self._write(send)
                if not run.ended:
                    await self._drain(run, outputs, send)
            except (OSError, asyncio.CancelledError, NotRecorded):
                raise
            except Exception:  # a bug here: the stream still ends, with `error` and `response.failed`
                log.exception("internal error while streaming")
                if not run.ended:
                    run.fail(ErrorKind.INTERNAL, "internal server error while streaming")
                    await self._recorded(run)
                await self._write(send)
            self._closed = True
            await send({"type": "http.response.body", "body": self.wire.tail(), "more_body": False})
        except OSError as exc:  # a server that raises once the client is gone (uvicorn returns quietly)
            raise ClientGone() from exc
        finally:
            self.metrics.active_streams.dec()

    async def _whole(self, send: Send, run: ResponseRun, first: Any, outputs: Any) -> None:
        self._feed(run, first)
        try:
            if run.ended:
                await self._recorded(run)
            else:
                await self._drain(run, outputs, None)
        except NotRecorded as exc:
            await self._error(send, ErrorKind.STORE_FAILED, f"the response could not be stored: {exc}")
            return
        if run.failure is not None:
            response = run.response()
            error = response.error if response is not None else None
            message = error.message if error is not None else "the response failed"
            await self._error(send, run.failure, message, self._stored_id())
            return
        self.status = 200
        self._closed = True
        await send_json(send, 200, self.wire.whole(run))
