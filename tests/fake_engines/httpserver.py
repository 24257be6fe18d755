"""A small HTTP/1.1 server on asyncio streams, for fake inference engines.

It gives the fakes byte-level control of what goes on the wire (chunked bodies written in pieces, with
pauses, or a connection cut mid-stream), keeps connections alive like the real engines, and notices a
client that disconnects mid-response (a pending read returns EOF), which is how the tests measure
cancellation. `/_fake/stats` reports what happened; `/_fake/reset` clears it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Status:
    """The response head: a status and a content type; `chunked` bodies may be written in pieces."""

    code: int
    content_type: str = "application/json"


@dataclass
class Sleep:
    seconds: float


@dataclass
class Cut:
    """Close the connection now, mid-response."""


Action = Status | bytes | Sleep | Cut
Handler = Callable[[Request], AsyncIterator[Action]]


@dataclass
class Stats:
    started: int = 0
    finished: int = 0
    cancelled: int = 0
    active: int = 0
    disconnect_times: list[float] = field(default_factory=list)
    requests: list[Any] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "finished": self.finished,
            "cancelled": self.cancelled,
            "active": self.active,
            "disconnect_times": self.disconnect_times,
            "requests": self.requests[-50:],
        }


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error", 503: "Service Unavailable"}


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = b""
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    return Request(method, path, headers, body)


class FakeServer:
    """Routes POST paths to handlers that yield `Action`s; counts requests and disconnects."""

    def __init__(self, routes: dict[str, Handler], listings: dict[str, Any] | None = None) -> None:
        self.routes = routes
        self.listings = listings or {}  # GET path → JSON body (the engine's list of models)
        self.stats = Stats()

    async def _write_head(self, writer: asyncio.StreamWriter, status: Status, length: int | None) -> None:
        head = (
            f"HTTP/1.1 {status.code} {_REASONS.get(status.code, 'Status')}\r\ncontent-type: {status.content_type}\r\n"
        )
        head += f"content-length: {length}\r\n" if length is not None else "transfer-encoding: chunked\r\n"
        writer.write(head.encode() + b"\r\n")
        await writer.drain()

    async def _json(self, writer: asyncio.StreamWriter, code: int, data: Any) -> None:
        body = json.dumps(data).encode()
        await self._write_head(writer, Status(code), len(body))
        writer.write(body)
        await writer.drain()

    async def _respond(self, request: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection must close."""
        if request.path == "/_fake/stats":
            await self._json(writer, 200, self.stats.as_dict())
            return True
        if request.path == "/_fake/reset":
            self.stats = Stats()
            await self._json(writer, 200, {"ok": True})
            return True
        if request.method == "GET" and request.path in self.listings:
            await self._json(writer, 200, self.listings[request.path])
            return True
        if request.method == "GET" and request.path.rsplit("/", 2)[-1] in ("health", "version"):
            await self._json(
                writer, 200, {"status": "ok"}
            )  # readiness: /health (vLLM, SGLang, llama.cpp), /api/version
            return True
        handler = self.routes.get(request.path)
        if handler is None or request.method != "POST":
            await self._json(writer, 404, {"error": {"message": f"no route {request.method} {request.path}"}})
            return True
        stats = self.stats
        stats.started += 1
        stats.active += 1
        try:
            stats.requests.append(request.json())
        except ValueError:
            stats.requests.append(None)
        eof = asyncio.ensure_future(reader.read(1))  # completes with b"" when the client goes away
        try:
            keep = await self._stream(handler(request), eof, writer)
        finally:
            stats.active -= 1
        if not eof.done():
            eof.cancel()
            await asyncio.gather(eof, return_exceptions=True)  # the reader is free again before the next request
            return keep
        return False  # the client closed the connection (or sent bytes mid-response, which no client here does)

    async def _stream(
        self, actions: AsyncIterator[Action], eof: asyncio.Future[bytes], writer: asyncio.StreamWriter
    ) -> bool:
        stats = self.stats
        started = False
        try:
            async for action in actions:
                if eof.done():
                    stats.cancelled += 1
                    stats.disconnect_times.append(time.time())
                    return False
                if isinstance(action, Status):
                    await self._write_head(writer, action, None)
                    started = True
                elif isinstance(action, Sleep):
                    await asyncio.wait({eof}, timeout=action.seconds)
                elif isinstance(action, Cut):
                    writer.transport.abort()
                    return False
                elif action:
                    writer.write(b"%x\r\n%s\r\n" % (len(action), action))
                    await writer.drain()
            if started:
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            stats.finished += 1
            return True
        except ConnectionError:
            stats.cancelled += 1
            stats.disconnect_times.append(time.time())
            return False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await _read_request(reader)
                if request is None or not await self._respond(request, reader, writer):
                    break
        finally:
            writer.close()


async def serve(
    routes: dict[str, Handler],
    port: int,
    ready: Callable[[int], Awaitable[None] | None],
    listings: dict[str, Any] | None = None,
) -> None:
    server = FakeServer(routes, listings)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", port)
    actual = listener.sockets[0].getsockname()[1]
    result = ready(actual)
    if result is not None:
        await result
    async with listener:
        await listener.serve_forever()
