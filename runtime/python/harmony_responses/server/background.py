"""Background responses (`background: true`): run by the server, polled, cancelled, and streamed again.

    POST /v1/responses {"background": true}                 the response `queued`, at once
    POST /v1/responses {"background": true, "stream": true}  its events, live; the connection may drop
    GET  /v1/responses/{id}                                  poll: queued, in_progress, then its end
    GET  /v1/responses/{id}?stream=true&starting_after=N     the stored events after sequence number N, then
                                                             the live ones, to the terminal event
    POST /v1/responses/{id}/cancel                           stop it: status `cancelled`

A background response needs the store (`store: false` with `background: true` is a 400 naming `background`):
it is begun `queued` before the engine is asked, so a poll finds it at once, and the run is a task of the
server process (`BackgroundRuns`), not of the request: the client may leave. When the engine starts, the
stored response becomes `in_progress`; at its end it is finished as any stored response (before its terminal
event is stored). With `stream: true` every event's SSE frame is stored (in batches, at most every
`FLUSH_SECONDS`, and always before the response is finished), and the stream a client reads, the first as
any resumed one, is read from the store (`EventFollower`): so a resumed stream gives exactly the events after
N, in order, ending with the terminal event, and any process on a shared store (PostgreSQL) serves it. A
follower polls the store every `POLL_SECONDS`.

Cancelling: the process running the response cancels its task; any other process sets the store's cancel
flag, which the running process polls every `CANCEL_POLL_SECONDS` (and reads at every flush). A cancelled run
ends its stream with `error` (code `response_cancelled`) and `response.failed`, the spec's events for a
response that stops early; the stored response, what `GET` and the cancel endpoint return, has status
`cancelled` and no error, as OpenAI's API answers. Cancelling a response that has ended returns it unchanged
(OpenAI's behaviour: cancel is idempotent); cancelling one not created with `background: true` is a 400.

A process that dies leaves its background responses unfinished: the store's sweep for dead processes marks
them failed, and a follower that finds a response ended without a terminal event stored ends the stream with
`response.failed` carrying the stored response. At shutdown a background run is a live response of the drain
(`drain.Drain`) like a stream: it gets the same `--shutdown-timeout` to finish, and one still going at the
deadline is failed (`server_shutting_down`, `background.stopped_message`, with what it wrote so far) and
settled in the store before the worker stops; `BackgroundRuns.shutdown`, from the app's lifespan, does the same
for any run left then. A background response is never continued by another process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from .._tables import spec as _spec
from ..bridge import DONE_FRAME, RequestError, Status
from ..bridge.sse import SSESink, frame
from ..store import AsyncStore, Owner, ResponseNotInProgress, StoreError
from ..store.model import TERMINAL_STATUSES
from ..types import (
    ResponseCompletedStreamingEvent,
    ResponseFailedStreamingEvent,
    ResponseIncompleteStreamingEvent,
    ResponseResource,
)
from .drain import Drain
from .engines.base import Engine, EngineError, Finished
from .errors import ErrorKind, ServerError
from .exchange import error_kind
from .metrics import Metrics
from .respond import ResponseRun
from .stored import NotRecorded, Recorder
from .structured import engine_outputs

log = logging.getLogger("harmony_responses.server")

FLUSH_SECONDS = 0.05  # stored events are written in batches at most this often (and at the end)
POLL_SECONDS = 0.05  # a follower reads the store this often while it waits for events
CANCEL_POLL_SECONDS = 0.5  # the running process reads the store's cancel flag this often
SETTLE_SECONDS = 5.0  # how long a follower or a cancel waits for a response's end to be stored
TERMINAL_EVENTS = frozenset(
    m.model_fields["type"].default
    for m in (ResponseCompletedStreamingEvent, ResponseFailedStreamingEvent, ResponseIncompleteStreamingEvent)
)
_SEQUENCE = re.compile(r'"sequence_number":(\d+)')
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def check_background(store: bool | None) -> None:
    """`background: true` needs the store: refused (naming `background`) with `store: false`."""
    if store is False:
        raise RequestError.of(_spec.REQUEST_ERROR_BACKGROUND_NEEDS_STORE, "background")


class BackgroundRuns:
    """The background responses this process runs: response id → its task, and those asked to cancel."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cancelling: set[str] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def start(self, response_id: str, work: Callable[[], Any]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work())
        self._tasks[response_id] = task
        task.add_done_callback(lambda _: self._forget(response_id))

    def _forget(self, response_id: str) -> None:
        self._tasks.pop(response_id, None)
        self._cancelling.discard(response_id)

    def cancelling(self, response_id: str) -> bool:
        return response_id in self._cancelling

    def cancel(self, response_id: str) -> asyncio.Task[None] | None:
        """Cancel the response if this process runs it; its task (to await), else None."""
        task = self._tasks.get(response_id)
        if task is not None and not task.done():
            self._cancelling.add(response_id)
            task.cancel()
        return task

    async def shutdown(self) -> None:
        """Fail and settle every run still going (the server stops): each stores its end before this returns."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class EventLog:
    """Takes the SSE frames a streamed background run wrote and stores them, in batches."""

    def __init__(self, store: AsyncStore, response_id: str, sink: SSESink) -> None:
        self.store = store
        self.response_id = response_id
        self.sink = sink
        self._last = 0.0

    def _take(self) -> list[tuple[int, str]]:
        frames, self.sink.frames = self.sink.frames, []
        out = []
        for text in frames:
            found = _SEQUENCE.search(text)
            assert found is not None, "every frame the bridge writes has its sequence number"
            out.append((int(found.group(1)), text))
        return out

    async def flush(self, *, force: bool = False) -> bool:
        """Store the frames written since the last flush (only every `FLUSH_SECONDS` unless `force`); return
        whether a cancel was asked for."""
        now = time.monotonic()
        if not force and now - self._last < FLUSH_SECONDS:
            return False
        self._last = now
        return await self.store.append_events(self.response_id, self._take())


class BackgroundRun:
    """One background response, run to its end by the server whether or not its client stays. While it runs it
    is one of the drain's live responses: at the shutdown deadline `interrupt` ends it, failed."""

    def __init__(
        self,
        *,
        engine: Engine,
        run: ResponseRun,
        recorder: Recorder,
        store: AsyncStore,
        runs: BackgroundRuns,
        metrics: Metrics,
        release: Callable[[], None],
        log_events: EventLog | None,
        drain: Drain | None = None,
    ) -> None:
        self.engine = engine
        self.run = run
        self.recorder = recorder
        self.store = store
        self.runs = runs
        self.metrics = metrics
        self.release = release
        self.events = log_events
        self.drain = drain
        self._task: asyncio.Task[Any] | None = None

    def interrupt(self) -> None:
        """End the run now (the shutdown deadline): it fails as the server stopping, and settles in the store."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    @property
    def response_id(self) -> str:
        return self.run.builder.response_id

    def _feed(self, output: Any) -> None:
        self.run.finish(output) if isinstance(output, Finished) else self.run.feed(output)

    async def _flush(self, *, force: bool = False) -> None:
        if self.events is not None and await self.events.flush(force=force):
            self.runs.cancel(self.response_id)

    async def _watch_cancel(self) -> None:
        """Poll the store's cancel flag (another process asked) and cancel this run when it is set."""
        while True:
            await asyncio.sleep(CANCEL_POLL_SECONDS)
            try:
                asked = await self.store.append_events(self.response_id, [])
            except ResponseNotInProgress:
                return
            except StoreError as exc:
                log.warning("background response %s: cannot read its cancel flag: %s", self.response_id, exc)
                continue
            if asked:
                self.runs.cancel(self.response_id)
                return

    async def _generate(self) -> None:
        run = self.run
        outputs = engine_outputs(self.engine, run)  # as every other path: structured outputs, the hosted-tool loop
        try:
            try:
                first = await outputs.__anext__()
            except StopAsyncIteration:
                first = None
            await self.store.progress(
                self.response_id, run.builder.snapshot(Status.IN_PROGRESS).model_dump(mode="json")
            )
            self.metrics.input_tokens.inc(run.plan.input_tokens)
            if first is None:
                run.fail(ErrorKind.ENGINE_FAILED, "the engine ended the stream without any output")
                return
            self._feed(first)
            await self._flush()
            async for output in outputs:
                if run.ended:
                    break
                self._feed(output)
                await self._flush()
            if not run.ended:
                run.fail(ErrorKind.ENGINE_FAILED, "the engine ended the stream without finishing")
        finally:
            self.metrics.output_tokens.inc(run.output_tokens)
            await outputs.aclose()

    async def __call__(self) -> None:
        run = self.run
        drain = self.drain
        self._task = asyncio.current_task()
        if drain is not None:
            drain.calls.add(self)  # the worker stops only once this run has ended and settled
            if drain.expired:
                self.interrupt()
        watch = asyncio.ensure_future(self._watch_cancel())
        try:
            try:
                await self._generate()
            except EngineError as exc:
                kind = error_kind(exc)
                self.metrics.engine_errors.labels(kind.name.lower()).inc()
                run.fail(kind, exc.message)
            except asyncio.CancelledError:
                if run.ended:  # asked once the run had ended (its engine stream closing): it ended as it did
                    pass
                elif self.runs.cancelling(self.response_id):
                    self.recorder.cancelled = True
                    run.fail(ErrorKind.CANCELLED, _spec.BACKGROUND_CANCELLED_MESSAGE)
                else:  # the server stops: the drain's deadline passed, or the app's lifespan ends
                    run.fail(ErrorKind.SHUTTING_DOWN, _spec.BACKGROUND_STOPPED_MESSAGE)
            except (ResponseNotInProgress, StoreError) as exc:  # recovered or deleted meanwhile, or the store failed
                log.warning("background response %s stopped: %s", self.response_id, exc)
                return
            except Exception:  # a bug: the response still ends, failed
                log.exception("internal error in background response %s", self.response_id)
                run.fail(ErrorKind.INTERNAL, "internal server error in a background response")
            settle = asyncio.ensure_future(self._settle())
            while not settle.done():  # a cancel or a shutdown while settling waits for the end to be stored
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(settle)
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
            self.release()
            if drain is not None:
                drain.calls.discard(self)

    async def _settle(self) -> None:
        """Store the last events (the terminal one included), then the response's end."""
        try:
            if self.events is not None:
                await self.events.flush(force=True)
            await self.recorder.ended(self.run)
        except (NotRecorded, ResponseNotInProgress, StoreError) as exc:
            log.error("background response %s could not be settled: %s", self.response_id, exc)


async def start_background(
    *,
    engine: Engine,
    run: ResponseRun,
    recorder: Recorder,
    store: AsyncStore,
    runs: BackgroundRuns,
    metrics: Metrics,
    release: Callable[[], None],
    stream: bool,
    owner: Owner,
    drain: Drain | None = None,
) -> Response:
    """Store the response `queued` and start it, one of `drain`'s live responses while it runs; the answer: the
    queued resource, or (streamed) its events.

    The run's opening events (`response.created`, `response.in_progress`) are written and, streamed, stored
    before this answers, so a streamed background response always has events to resume from."""
    try:
        run.start()
        queued = await recorder.queue(run)
        sink = run.sink
        events = EventLog(store, run.builder.response_id, sink) if stream and isinstance(sink, SSESink) else None
        if events is not None:
            await events.flush(force=True)
    except BaseException:
        release()
        raise
    work = BackgroundRun(
        engine=engine,
        run=run,
        recorder=recorder,
        store=store,
        runs=runs,
        metrics=metrics,
        release=release,
        log_events=events,
        drain=drain,
    )
    runs.start(run.builder.response_id, work)
    if stream:
        return EventFollower(store, run.builder.response_id, owner, -1)
    return JSONResponse(queued)


# -- reading a background response's events -------------------------------------------------------------------


def _event_type(text: str) -> str:
    first = text.split("\n", 1)[0]
    return first.partition(": ")[2] if first.startswith("event: ") else ""


async def follow(store: AsyncStore, response_id: str, owner: Owner, after: int) -> AsyncIterator[bytes]:
    """The stored events after sequence number `after`, then the new ones as they are stored, to the terminal
    event; a response that ended without one stored (its process died) ends with `response.failed`."""
    last = after
    while True:
        page = await store.events_after(response_id, owner, last)
        for number, text in page.events:
            last = number
            yield text.encode()
            if _event_type(text) in TERMINAL_EVENTS:
                await _settled(store, response_id, owner)
                return
        if page.finished and not page.events:
            resource = await store.get(response_id, owner)
            event = ResponseFailedStreamingEvent(
                sequence_number=last + 1, response=ResponseResource.model_validate(resource)
            )
            yield frame(event).encode()
            return
        if not page.events:
            await asyncio.sleep(POLL_SECONDS)


async def _settled(store: AsyncStore, response_id: str, owner: Owner) -> None:
    """Wait (a little) until the response's end is stored after its terminal event, so a poll that follows the
    stream finds it ended."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        page = await store.events_after(response_id, owner, 2**31 - 1)
        if page.finished:
            return
        await asyncio.sleep(POLL_SECONDS)


class EventFollower(Response):
    """The ASGI response that streams a background response's events from the store (see `follow`). The
    client may leave at any time: the response runs on."""

    def __init__(self, store: AsyncStore, response_id: str, owner: Owner, after: int) -> None:
        super().__init__(media_type="text/event-stream")
        self.store = store
        self.response_id = response_id
        self.owner = owner
        self.after = after
        self.status: int | None = None  # set once the stream has started (as `EngineCall.status`)

    async def _stream(self, send: Send) -> None:
        self.status = 200
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        try:
            async for chunk in follow(self.store, self.response_id, self.owner, self.after):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except StoreError as exc:  # the stream is cut: no end is claimed that the store does not hold
            log.error("background response %s: cannot read its events: %s", self.response_id, exc)
            return
        await send({"type": "http.response.body", "body": DONE_FRAME.encode(), "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        work = asyncio.ensure_future(self._stream(send))
        watch = asyncio.ensure_future(_wait_disconnect(receive))
        try:
            await asyncio.wait((work, watch), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (work, watch):
                if not task.done():
                    task.cancel()
            results = await asyncio.gather(work, watch, return_exceptions=True)
        for result in results:
            if isinstance(result, OSError):
                return  # the client went away mid-send
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


# -- the endpoints ------------------------------------------------------------------------------------------------


def _not_background() -> ServerError:
    return ServerError(ErrorKind.BAD_REQUEST, _spec.BACKGROUND_NOT_BACKGROUND, param="response_id")


def _starting_after(raw: str | None) -> int:
    if raw is None:
        return -1
    try:
        value = int(raw)
    except ValueError:
        value = -2
    if value < -1:
        raise ServerError(ErrorKind.BAD_REQUEST, f"must be an integer of -1 or more, not {raw!r}", "starting_after")
    return value


async def stream_again(store: AsyncStore, response_id: str, owner: Owner, starting_after: str | None) -> Response:
    """`GET /v1/responses/{id}?stream=true&starting_after=N`: the events after N, then the live ones. A streamed
    background response has its opening events stored when it is created, so one with none was not streamed."""
    after = _starting_after(starting_after)
    resource = await store.get(response_id, owner)
    if not resource.get("background"):
        raise _not_background()
    if not (await store.events_after(response_id, owner, -1)).events:
        raise ServerError(ErrorKind.BAD_REQUEST, _spec.BACKGROUND_NOT_STREAMED, param="stream")
    return EventFollower(store, response_id, owner, after)


_TERMINAL = frozenset(s.value for s in TERMINAL_STATUSES)


async def cancel(store: AsyncStore, runs: BackgroundRuns, response_id: str, owner: Owner) -> dict[str, Any]:
    """`POST /v1/responses/{id}/cancel`: the response, cancelled (or as it ended, if it had)."""
    resource = await store.get(response_id, owner)
    if not resource.get("background"):
        raise _not_background()
    if resource.get("status") in _TERMINAL:
        return resource
    task = runs.cancel(response_id)
    if task is not None:
        with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), SETTLE_SECONDS)
    else:  # another process runs it: ask through the store, and wait for its end
        await store.request_cancel(response_id, owner)
        deadline = time.monotonic() + SETTLE_SECONDS + CANCEL_POLL_SECONDS
        while time.monotonic() < deadline:
            if (await store.events_after(response_id, owner, 2**31 - 1)).finished:
                break
            await asyncio.sleep(POLL_SECONDS)
    return await store.get(response_id, owner)


__all__ = ["BackgroundRuns", "EventFollower", "cancel", "check_background", "start_background", "stream_again"]
