"""The `CHUNK_WRITER` scope extension of `serving.GuardedProtocol`: a streamed body's part written at once.

uvicorn's own protocol class (the project's subclass of it) is driven with real request bytes over a
transport that records what it is given; the ASGI apps below stream through `send` and the extension
side by side. The extension must write exactly the bytes `send` writes for the same part (one HTTP/1.1
chunk), and write nothing, returning False, whenever `send` would not write at once: before the response
has started, while the transport is paused, once the client is gone, after the body's end, and for a
response framed by `content-length`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from harmony_responses.server.exchange import CHUNK_WRITER
from harmony_responses.server.serving import guarded_protocol
from harmony_responses.server.settings import Settings

REQUEST = b"POST /v1/responses HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 2\r\n\r\n{}"
START = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class Transport(asyncio.Transport):
    """Records every write; closing is only noted."""

    def __init__(self) -> None:
        super().__init__()
        self.data = bytearray()
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.data += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 2), "sockname": ("127.0.0.1", 1)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _serve(app: App) -> tuple[bytes, Any]:
    """One request through the protocol to `app`; what the transport got, and the protocol."""

    async def main() -> tuple[bytes, Any]:
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        config.load()
        protocol = guarded_protocol(Settings())(config=config, server_state=ServerState(), app_state={})
        transport = Transport()
        protocol.connection_made(transport)
        app.protocol = protocol  # type: ignore[attr-defined]  # for the app to pause the transport
        protocol.data_received(REQUEST)
        for _ in range(100):
            await asyncio.sleep(0)
            if protocol.cycle is not None and protocol.cycle.response_complete:
                break
        protocol.connection_lost(None)
        return bytes(transport.data), protocol

    return asyncio.run(main())


def test_a_part_written_by_the_extension_is_the_chunk_send_writes() -> None:
    parts = [b"event: a\ndata: {}\n\n", "é ☕ 日本".encode(), b"x" * 70_000]

    async def by_send(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send(START)
        for part in parts:
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def by_writer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        write = scope["extensions"][CHUNK_WRITER]
        await send(START)
        for part in parts:
            assert write(part) is True
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    sent, _ = _serve(by_send)
    written, _ = _serve(by_writer)
    assert b"transfer-encoding: chunked" in sent
    assert written == sent
    assert sent.endswith(b"%x\r\n%s\r\n0\r\n\r\n" % (len(parts[-1]), parts[-1]))


def test_the_extension_writes_nothing_where_send_would_not_write_at_once() -> None:
    seen: dict[str, bool] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        write = scope["extensions"][CHUNK_WRITER]
        protocol = app.protocol  # type: ignore[attr-defined]
        seen["before the start"] = write(b"early")
        await send(START)
        seen["started"] = write(b"one")
        protocol.pause_writing()
        seen["paused"] = write(b"held")
        protocol.resume_writing()
        seen["resumed"] = write(b"two")
        await send({"type": "http.response.body", "body": b"end", "more_body": False})
        seen["after the end"] = write(b"late")

    data, _ = _serve(app)
    assert seen == {
        "before the start": False,
        "started": True,
        "paused": False,
        "resumed": True,
        "after the end": False,
    }
    body = data.partition(b"\r\n\r\n")[2]
    assert body == b"3\r\none\r\n3\r\ntwo\r\n3\r\nend\r\n0\r\n\r\n"


def test_the_extension_writes_nothing_once_the_client_is_gone_or_for_a_sized_body() -> None:
    seen: dict[str, bool] = {}

    async def gone(scope: dict[str, Any], receive: Any, send: Any) -> None:
        write = scope["extensions"][CHUNK_WRITER]
        await send(START)
        app_protocol = gone.protocol  # type: ignore[attr-defined]
        app_protocol.connection_lost(None)
        seen["gone"] = write(b"lost")

    async def sized(scope: dict[str, Any], receive: Any, send: Any) -> None:
        write = scope["extensions"][CHUNK_WRITER]
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]})
        seen["sized"] = write(b"body")
        await send({"type": "http.response.body", "body": b"body", "more_body": False})

    data, _ = _serve(gone)
    assert b"lost" not in data
    data, _ = _serve(sized)
    assert data.endswith(b"\r\n\r\nbody")
    assert seen == {"gone": False, "sized": False}
