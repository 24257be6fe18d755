"""WebSocket mode: one socket at `/v1/responses` for a whole agent loop (the spec's `x-openresponses-websocket`).

The client sends `response.create` messages: a response request with `"type": "response.create"` and
without the HTTP-only `stream`, `stream_options` and `background`. The server answers each with its
stream's events, one JSON text frame per event, the same events SSE carries. Responses run one after
another: a message that arrives while one runs waits its turn (at most `MAX_WAITING` wait; past that,
the socket is read no further until one is taken).

Continuing: `previous_response_id` is looked up first in the connection's cache, which holds the most
recent response of this socket with its whole conversation (also with `store: false`), then, for
responses stored with `store: true`, in the store. A `store: false` chain therefore continues only on
its socket: after a reconnect, send its history again (or continue a stored response). A
`response.create` that fails, with an error event or a failed response, evicts the response it
continued from the cache.

Errors before a response starts (a malformed message, an unknown previous response, the concurrency
limit, an engine that fails before its first output, a server that is shutting down) are the spec's
`WebSocketErrorEvent`,
`{"type": "error", "status": 400, "error": {"type", "code", "message", "param"}}`, and the socket stays
open. A failure once the response has started is the stream's own `error` event, then
`response.failed`. A missing or wrong API key gets one such error (401), then the socket is closed
(code 1008, policy violation).

While the server drains (`drain.Drain`), the response running on a socket may finish; one still running
at the deadline ends with `error` and `response.failed` (`server_shutting_down`), and a new
`response.create` gets that error event. The socket is closed (1012, service restart) once the worker
has no response left to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect

from .._tables import spec as _spec
from ..bridge import OPENAI_REASONING_EVENTS, EventSink, RequestError, Status
from ..models import Message
from ..store import Owner
from ..types import (
    CreateResponseBody,
    StreamingEvent,
    WebSocketErrorEvent,
    WebSocketErrorEventError,
    WebSocketResponseCreateEvent,
)
from .body import load_json_object
from .engines.base import EngineError, EngineOutput, Finished
from .errors import SERVER_ERRORS, ErrorKind, ServerError
from .exchange import error_kind
from .hosted.backends import chain_items
from .hosted.loop import HostedRun
from .respond import SERVER_CAPABILITIES, Plan, ResponseRun, parse_body, plan_for
from .settings import ReasoningEvents
from .state import ServerState
from .stored import (
    NOTHING_BEFORE,
    NotRecorded,
    Prior,
    Recorder,
    input_calls,
    input_items,
    load_previous,
    output_calls,
    owner_of,
    resolve_references,
)
from .structured import engine_outputs

log = logging.getLogger("harmony_responses.server")

CREATE: str = WebSocketResponseCreateEvent.model_fields["type"].default  # the client event's type
MAX_WAITING = 16
POLICY_VIOLATION = 1008
ENDPOINT = "websocket /v1/responses"  # the metrics label of WebSocket responses


@dataclass(frozen=True)
class Cached:
    """The connection's most recent response, with its whole conversation: what continues it at once."""

    response_id: str
    messages: list[Message]
    calls: dict[str, Any]  # `KnownCalls.to_json()` of every call in `messages`
    rendered: list[Sequence[int] | None]  # beside `messages`: their token ids


def error_frame(exc: RequestError | ServerError) -> str:
    """The spec's `WebSocketErrorEvent` for an error before a response starts."""
    if isinstance(exc, RequestError):
        error = WebSocketErrorEventError(type=exc.type, code=exc.code, message=exc.message, param=exc.param)
    else:
        _status, type_, code = SERVER_ERRORS[exc.kind]
        error = WebSocketErrorEventError(type=type_, code=code, message=exc.message, param=exc.param)
    return WebSocketErrorEvent(status=exc.status, error=error).model_dump_json()


def event_frame(event: StreamingEvent, names: ReasoningEvents) -> str:
    """One event's JSON (raw reasoning events renamed as `--reasoning-events` says, as on SSE)."""
    body = event.model_dump_json()
    name: str = event.type
    if names is ReasoningEvents.OPENAI and name in OPENAI_REASONING_EVENTS:
        body = body.replace(json.dumps(name), json.dumps(OPENAI_REASONING_EVENTS[name]), 1)
    return body


async def serve_socket(scope: Scope, receive: Receive, send: Send, state: ServerState) -> None:
    """The ASGI WebSocket endpoint at `/v1/responses`."""
    socket = WebSocket(scope, receive, send)
    try:
        state.keys.check(socket.headers)
    except ServerError as exc:
        await socket.accept()
        await socket.send_text(error_frame(exc))
        await socket.close(POLICY_VIOLATION)
        return
    await socket.accept()
    await Connection(socket, state, owner_of(socket.headers)).serve()


class Connection:
    """One socket: its queue of client messages, its cache, and the response running now."""

    def __init__(self, socket: WebSocket, state: ServerState, owner: Owner) -> None:
        self._raw: dict[str, Any] = {}  # the last `response.create` body read (its hosted tools)
        self.socket = socket
        self.state = state
        self.owner = owner
        self.cache: Cached | None = None
        self.waiting: asyncio.Queue[str | bytes | None] = asyncio.Queue(MAX_WAITING)
        self._work: asyncio.Future[None] | None = None
        self._interrupted = False

    def interrupt(self) -> None:
        """The server's shutdown deadline: end the running response now (`_run` sends its terminal events)."""
        if self._work is not None and not self._interrupted:
            self._interrupted = True
            self._work.cancel()

    async def serve(self) -> None:
        reader = asyncio.ensure_future(self._read())
        try:
            while True:
                message = await self.waiting.get()
                if message is None:
                    return  # the client closed the socket
                drain = self.state.drain
                if drain.draining:
                    shutting = ServerError(ErrorKind.SHUTTING_DOWN, "the server is shutting down; reconnect elsewhere")
                    await self.socket.send_text(error_frame(shutting))
                    continue
                work = self._work = asyncio.ensure_future(self._respond(message))
                drain.calls.add(self)
                try:
                    await asyncio.wait((work, reader), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    drain.calls.discard(self)
                if not work.done():  # the client went away mid-response: stop the engine now
                    work.cancel()
                    self.state.metrics.disconnects.inc()
                try:
                    await work
                except (asyncio.CancelledError, WebSocketDisconnect, OSError):
                    pass  # the client is gone
                except Exception:  # a bug: say so on the socket and go on with the next message
                    log.exception("internal error on a WebSocket response")
                    internal = ServerError(ErrorKind.INTERNAL, "internal server error")
                    with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):
                        await self.socket.send_text(error_frame(internal))
                if reader.done():
                    return
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def _read(self) -> None:
        """Queue the client's messages until it closes the socket (None marks the end)."""
        try:
            while True:
                message = await self.socket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                data = message.get("text")
                await self.waiting.put(data if data is not None else message.get("bytes") or b"")
        finally:
            with contextlib.suppress(asyncio.QueueFull):
                self.waiting.put_nowait(None)

    # -- one response.create --------------------------------------------------------------------------

    def _parse(self, data: str | bytes) -> CreateResponseBody:
        if isinstance(data, bytes):
            raise ServerError(ErrorKind.BAD_REQUEST, f"send each {CREATE} as a text frame of JSON, not binary")
        settings = self.state.settings
        raw = load_json_object(
            data.encode("utf-8", "surrogatepass"),
            max_bytes=settings.max_body_bytes,
            max_depth=settings.max_json_depth,
            what="the message",
        )
        kind = raw.pop("type", None)
        if kind != CREATE:
            raise RequestError.of(_spec.REQUEST_ERROR_WEBSOCKET_EVENT_TYPE, "type", expected=CREATE, found=kind)
        for field in _spec.WEBSOCKET_HTTP_ONLY_FIELDS:
            if field in raw:
                raise RequestError.of(_spec.REQUEST_ERROR_WEBSOCKET_TRANSPORT_FIELD, field, field=field)
        self._raw = raw
        capabilities = self.state.hosted.capabilities(SERVER_CAPABILITIES)
        return parse_body(raw, capabilities, hosted_tools=settings.hosted_tools)

    async def _prior(self, body: CreateResponseBody) -> Prior:
        previous = body.previous_response_id
        if previous is None:
            return NOTHING_BEFORE
        cached = self.cache
        if cached is not None and cached.response_id == previous:
            return Prior(cached.messages, cached.calls, cached.rendered)
        return await load_previous(self.state.store, previous, self.owner, self.state.renderer.key)

    def _evict(self, previous: str | None) -> None:
        if previous is not None and self.cache is not None and self.cache.response_id == previous:
            self.cache = None

    async def _respond(self, data: str | bytes) -> None:
        state = self.state
        previous: str | None = None
        hosted: HostedRun | None = None
        try:
            body = self._parse(data)
            previous = body.previous_response_id
            prior = await self._prior(body)
            body = await resolve_references(body, state.store, self.owner)
            chain: list[dict[str, Any]] = []  # a stored chain's items (MCP: its tool lists, its approval requests)
            if previous is not None and state.hosted.wants_chain(self._raw):
                chain = await chain_items(state.store, previous, self.owner)
            hosted = await state.hosted.open(self._raw, chain)
            plan = plan_for(state, body, prior, hosted)

            def remember(run: ResponseRun, rendered: list[Sequence[int]]) -> None:
                messages = [*prior.messages, *plan.parts.turn, *run.builder.messages()]
                names = {**prior.calls, **input_calls(plan.body), **output_calls(run)}
                self.cache = Cached(run.builder.response_id, messages, names, [*prior.rendered, *rendered])

            store = state.store if body.store is not False else None
            recorder = Recorder(store, self.owner, plan, input_items(body), state.renderer, on_end=remember)
            state.acquire()
        except (RequestError, ServerError) as exc:
            if hosted is not None:
                await hosted.aclose()
            self._evict(previous)
            state.metrics.requests.labels(ENDPOINT, str(exc.status)).inc()
            await self.socket.send_text(error_frame(exc))
            return
        try:
            ended_well = await self._run(plan, recorder)
        finally:
            state.release()
        if not ended_well:
            self._evict(previous)

    async def _send(self, sink: EventSink) -> None:
        names = self.state.settings.reasoning_events
        for event in sink.take():
            await self.socket.send_text(event_frame(event, names))

    async def _run(self, plan: Plan, recorder: Recorder) -> bool:
        """Stream one response to the socket; whether it ended without failing."""
        state, sink = self.state, EventSink()
        run = ResponseRun(
            plan, state.encoding, sink, model=state.settings.model, stored=recorder.keeps, seal=state.reasoning.seal
        )
        outputs = engine_outputs(state.engine, run)
        state.metrics.in_flight.inc()
        try:
            try:
                first = await outputs.__anext__()
            except EngineError as exc:
                state.metrics.engine_errors.labels(error_kind(exc).name.lower()).inc()
                raise ServerError(error_kind(exc), exc.message) from None
            except StopAsyncIteration:
                raise ServerError(ErrorKind.ENGINE_FAILED, "the engine ended the stream without any output") from None
            state.metrics.input_tokens.inc(plan.input_tokens)
            run.start()
            await recorder.started(run)
            state.metrics.requests.labels(ENDPOINT, "200").inc()
            await self._feed(run, first, recorder, sink)
            try:
                while not run.ended:
                    await self._feed(run, await outputs.__anext__(), recorder, sink)
            except StopAsyncIteration:
                run.fail(ErrorKind.ENGINE_FAILED, "the engine ended the stream without finishing")
                await self._end(run, recorder, sink)
            except EngineError as exc:
                state.metrics.engine_errors.labels(error_kind(exc).name.lower()).inc()
                run.fail(error_kind(exc), exc.message)
                await self._end(run, recorder, sink)
        except (RequestError, ServerError) as exc:
            state.metrics.requests.labels(ENDPOINT, str(exc.status)).inc()
            await self.socket.send_text(error_frame(exc))
            return False
        except NotRecorded as exc:  # the terminal event stays unsent: the store does not hold this end
            sink.take()
            await self.socket.send_text(error_frame(ServerError(ErrorKind.STORE_FAILED, f"not stored: {exc}")))
            return False
        except asyncio.CancelledError:
            if not self._interrupted:
                raise  # the client left
            timeout = state.drain.timeout
            message = f"the server shut down before the response finished (--shutdown-timeout {timeout:g} s)"
            if not run.started:
                await self.socket.send_text(error_frame(ServerError(ErrorKind.SHUTTING_DOWN, message)))
                return False
            if not run.ended:
                run.fail(ErrorKind.SHUTTING_DOWN, message)
                await self._end(run, recorder, sink)
            return False
        finally:
            state.metrics.in_flight.dec()
            state.metrics.output_tokens.inc(run.output_tokens)
            if not run.ended:
                await recorder.abandoned(run)
            await outputs.aclose()
        return run.builder.status is not Status.FAILED

    async def _feed(self, run: ResponseRun, output: EngineOutput, recorder: Recorder, sink: EventSink) -> None:
        if isinstance(output, Finished):
            run.finish(output)
        else:
            run.feed(output)
        if run.ended:
            await self._end(run, recorder, sink)
        else:
            await self._send(sink)

    async def _end(self, run: ResponseRun, recorder: Recorder, sink: EventSink) -> None:
        """The run ended: store its end, then send the events that tell of it."""
        await recorder.ended(run)
        await self._send(sink)
