"""The HTTP server around the app: uvicorn with httptools, its limits, signals and worker processes.

uvicorn's httptools protocol is kept for its speed (llhttp parses in C) and given what it lacks, in
`guarded_protocol`: a bound on the request head (431 once the line and headers pass `max_head_bytes`,
counted as bytes arrive, so a 100 MB header is never buffered), a time limit from a request's first
byte to the end of its body (408), an idle limit for a connection that sends nothing (on connect, and
between keep-alive requests), and a cap on open connections per worker answered with 503 (an accept()
that fails for want of file descriptors would leave the client hanging instead). The open-file limit
is raised to what the cap needs.

`Serving` replaces uvicorn's signal handling: the first SIGTERM or SIGINT drains (`drain.Drain`; the
listening socket stays open meanwhile, so new requests get 503 with `Retry-After` rather than a refused
connection, until the last live response has ended), the second ends every live response at once, a
third exits on the spot; the process then exits 0, without
re-raising the signal (which made Ctrl-C print a traceback and SIGTERM end the process by the signal).
With `--workers N`, `supervise` runs N worker processes on the one listening socket and passes each
signal on to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import multiprocessing
import os
import resource
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, cast

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from .errors import ErrorKind, error_payload, http_status
from .exchange import CHUNK_WRITER
from .settings import Settings

log = logging.getLogger("harmony_responses.server")

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
FD_RESERVE = 64  # descriptors kept for the store, the log, the engine's connections beyond max_concurrency


def _refusal(kind: ErrorKind, message: str) -> bytes:
    """A whole HTTP/1.1 response with the spec's error body, closing the connection."""
    status = http_status(kind)
    body = json.dumps({"error": error_payload(kind, message)}).encode()
    head = [
        b"HTTP/1.1 %d %s" % (status, _REASONS.get(status, b"Error")),
        b"content-type: application/json",
        b"content-length: %d" % len(body),
        b"connection: close",
    ]
    if status == 503:
        head.append(b"retry-after: 1")
    return b"\r\n".join(head) + b"\r\n\r\n" + body


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head size limit, a receive timeout, an idle limit and a connection cap."""

    max_head_bytes = 64 * 1024
    receive_timeout = 30.0
    idle_timeout = 5.0
    max_connections = 4096

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._in_head = True  # the bytes arriving belong to a request head (or to the wait for one)
        self._head_bytes = 0
        self._receive_timer: asyncio.TimerHandle | None = None
        self._refused = False

    # -- the connection --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            limit = self.max_connections
            self._refuse(ErrorKind.TOO_MANY_CONNECTIONS, f"the server holds its limit of {limit} open connections")
            return
        self._arm_idle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_receive_timer()
        super().connection_lost(exc)

    def _arm_idle(self) -> None:
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(self.idle_timeout, self.timeout_keep_alive_handler)

    def _cancel_receive_timer(self) -> None:
        if self._receive_timer is not None:
            self._receive_timer.cancel()
            self._receive_timer = None

    def _refuse(self, kind: ErrorKind, message: str) -> None:
        """Answer `kind` and close; what the client still sends is read and dropped for a moment, so that
        closing with unread bytes does not reset the connection before the client reads the answer."""
        if self._refused or self.transport.is_closing():
            return
        self._refused = True
        self._cancel_receive_timer()
        self._unset_keepalive_if_required()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the app's request ends: its receive() says the client left
            self.cycle.message_event.set()
        self.transport.write(_refusal(kind, message))
        with contextlib.suppress(OSError, RuntimeError, NotImplementedError):
            self.transport.write_eof()
        self.loop.call_later(1.0, self.transport.close)

    # -- bytes in --------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._in_head:
            self._head_bytes += len(data)
            if self._receive_timer is None:
                self._receive_timer = self.loop.call_later(self.receive_timeout, self._receive_expired)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.max_head_bytes and not self._refused:
            self._refuse(ErrorKind.HEAD_TOO_LARGE, f"the request line and headers are over {self.max_head_bytes} bytes")

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        super().on_headers_complete()
        cycle = self.cycle  # this request's own (an upgrade leaves the last request's in place)
        if cycle is not None and cycle.scope is self.scope and self.scope["method"] != "HEAD":
            extensions = cast(dict[str, Any], self.scope.setdefault("extensions", {}))  # ASGI types it narrower
            extensions[CHUNK_WRITER] = chunk_writer(cycle)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._cancel_receive_timer()
        self._in_head = True

    def handle_websocket_upgrade(self) -> None:
        self._cancel_receive_timer()  # the WebSocket protocol owns the connection from here
        super().handle_websocket_upgrade()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:
            self._arm_idle()

    def _receive_expired(self) -> None:
        self._receive_timer = None
        if self.cycle is not None and self.cycle.response_started:
            self.transport.close()  # answered already (an early 413, say): just stop waiting for the body
            return
        seconds = self.receive_timeout
        self._refuse(ErrorKind.REQUEST_TIMEOUT, f"the request head and body did not arrive within {seconds:g} s")


def chunk_writer(cycle: RequestResponseCycle) -> Callable[[bytes], bool]:
    """The `CHUNK_WRITER` extension of `cycle`'s request: a part of its streamed body written to the transport as
    one HTTP/1.1 chunk, the bytes uvicorn's `send` would write for it, without the ASGI message, the coroutine
    and its checks per token. It writes only when `send` would write at once: a response begun with chunked
    framing and not complete, a client still there, a transport not paused. Otherwise it writes nothing and
    says False, and the caller sends that part through `send`, which waits out the pause or drops it."""
    transport, flow = cycle.transport, cycle.flow

    def write(body: bytes) -> bool:
        if (
            flow.write_paused
            or cycle.disconnected
            or cycle.response_complete
            or not cycle.response_started
            or cycle.chunked_encoding is not True
        ):
            return False
        transport.write(b"%x\r\n%b\r\n" % (len(body), body))
        return True

    return write


def guarded_protocol(settings: Settings) -> type[GuardedProtocol]:
    """The protocol class with `settings`' limits."""
    return type(
        "GuardedProtocol",
        (GuardedProtocol,),
        {
            "max_head_bytes": settings.max_head_bytes,
            "receive_timeout": settings.receive_timeout,
            "idle_timeout": settings.idle_timeout,
            "max_connections": connection_cap(settings),
        },
    )


def connection_cap(settings: Settings) -> int:
    """`max_connections`, raising the open-file limit to fit it, or lowered to what the limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = settings.max_connections + settings.max_concurrency + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if soft == resource.RLIM_INFINITY:
        return settings.max_connections
    room = soft - settings.max_concurrency - FD_RESERVE
    if room < settings.max_connections:
        log.warning(
            "the open-file limit (%d) leaves room for %d connections, not --max-connections %d",
            soft,
            max(room, 1),
            settings.max_connections,
        )
        return max(room, 1)
    return settings.max_connections


class Serving(uvicorn.Server):
    """uvicorn's server with the drain on SIGTERM/SIGINT (see the module docstring)."""

    def __init__(self, config: uvicorn.Config, settings: Settings) -> None:
        super().__init__(config)
        self.settings = settings
        self._signals = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)
        # What start-up made (the app, the encoding's tables, the store, imported modules) lives as long as the
        # process: moved out of the collector's reach, a full collection no longer walks it. Walking it took
        # ~200 ms, a stall of every live stream each time the responses' own objects triggered one.
        gc.collect()
        gc.freeze()

    def _drain(self) -> Any:
        app = getattr(self.config, "loaded_app", None)
        while app is not None and not hasattr(app, "state") and hasattr(app, "app"):
            app = app.app  # uvicorn's middleware around ours
        state = getattr(app, "state", None)
        return getattr(state, "drain", None)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals >= 3:
            os._exit(1)  # the operator insists: no more waiting, not even for the store
        drain, loop = self._drain(), self._loop
        if drain is None or loop is None:
            self.should_exit = True  # not serving yet: uvicorn stops the start-up
            return
        if self._signals == 1:
            loop.call_soon_threadsafe(drain.begin, self.settings.shutdown_timeout)
        else:
            log.warning("second signal: ending the live responses now")
            self.should_exit = True
            loop.call_soon_threadsafe(drain.expire)

    async def on_tick(self, counter: int) -> bool:
        """While draining, the listener stays open (new requests get 503) until the last response has ended."""
        if await super().on_tick(counter):
            return True
        if not self._signals:
            return False
        drain = self._drain()
        return drain is None or not drain.calls


def uvicorn_config(settings: Settings) -> uvicorn.Config:
    return uvicorn.Config(
        "harmony_responses.server.app:app_from_env",
        factory=True,
        http=guarded_protocol(settings),
        log_level=settings.log_level,
        access_log=False,
        timeout_keep_alive=max(1, round(settings.idle_timeout)),
        # uvicorn's own deadline, past ours: by then every response was ended by the drain
        timeout_graceful_shutdown=int(settings.shutdown_timeout) + 15,
    )


def run_worker(sock: socket.socket) -> None:
    """One worker process (or the only process): serve on `sock` until drained."""
    settings = Settings.from_env(os.environ)
    Serving(uvicorn_config(settings), settings).run(sockets=[sock])


def _worker_main(sock: socket.socket, parent: int) -> None:
    os.setpgrp()  # a terminal's Ctrl-C reaches the supervisor only, which passes it on once
    level = Settings.from_env(os.environ).log_level.upper()
    logging.basicConfig(level=level, format="%(levelname)s: %(name)s: %(message)s")

    def orphaned() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)  # the supervisor is gone: drain and stop

    threading.Thread(target=orphaned, daemon=True).start()
    run_worker(sock)


def supervise(settings: Settings, sock: socket.socket) -> None:
    """Run `settings.workers` worker processes on `sock`; pass SIGTERM/SIGINT on; replace a worker that dies."""
    context = multiprocessing.get_context("spawn")
    signals: list[int] = []
    previous = {sig: signal.signal(sig, lambda sig, frame: signals.append(sig)) for sig in _SIGNALS}

    def start() -> multiprocessing.process.BaseProcess:
        process = context.Process(target=_worker_main, args=(sock, os.getpid()), daemon=False)
        process.start()
        return process

    try:
        workers = [start() for _ in range(settings.workers)]
        passed = 0
        while any(w.is_alive() for w in workers):
            for w in workers:
                w.join(0.1)
            while signals:
                signals.pop()
                passed += 1
                for w in workers:
                    if w.is_alive() and w.pid is not None:
                        # the first signal drains, the second ends the responses, the third exits at once
                        os.kill(w.pid, signal.SIGTERM)
            if not passed:
                for i, w in enumerate(workers):
                    if not w.is_alive():
                        log.warning("worker %s exited (%s); starting another", w.pid, w.exitcode)
                        workers[i] = start()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
