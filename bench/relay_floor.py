"""The floor under any server in bench_server.py: a relay that does nothing but the socket work per token.

    python bench/relay_floor.py --engine-port PORT [--words 250] [--parse]

For each client request it opens a stream from the fake vLLM engine (bench/fake_engine.py) and, for every
read of the engine's socket, makes one write to the client: a delta frame, sized like the server's, for each
token of the read that gives a delta in the server's stream, and the terminal event at the end. No HTTP
parsing, no JSON, no Harmony: one engine read and one client write per token, on uvloop, is what the
operating system charges every server for streaming one token to one client. `bench_server.py --floor`
runs the same levels against it, so the server's CPU per token is read beside what no server can go under
on the same machine in the same minute.

`--parse` makes it the floor of a gateway written in Python instead: per engine read it also does the
least such a gateway must do per token, with the libraries the server uses, and nothing of Harmony: the
engine's HTTP/1.1 answer parsed by httptools, its SSE lines split from bytes, each chunk decoded with
orjson, its token ids counted, a delta frame made from the chunk's text (its JSON string written by
orjson, with a sequence number) and sent as an HTTP/1.1 chunk. `bench_server.py --floor parse` runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))

from fake_engine import completion_text  # noqa: E402

FRAME = (
    b"event: response.output_text.delta\n"
    b'data: {"type":"response.output_text.delta","sequence_number":17,"item_id":"msg_0123456789abcdef0123456789",'
    b'"output_index":1,"content_index":0,"delta":" word42","logprobs":[]}\n\n'
)
END_FRAME = b'event: response.completed\ndata: {"type":"response.completed"}\n\n'
TOKEN = b'"token_ids"'  # once in every token chunk of the fake vLLM engine
DONE = b"data: [DONE]"
PARSE_FRAME = (
    b"event: response.output_text.delta\n"
    b'data: {"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_0123456789abcdef0123456789",'
    b'"output_index":1,"content_index":0,"delta":%s,"logprobs":[]}\n\n'
)
REQUEST = b'{"model":"gpt-oss","prompt":[200006],"stream":true}'


class Upstream(asyncio.Protocol):
    """The engine's stream of one client: one client write per read."""

    def __init__(self, client: asyncio.Transport, deltas: frozenset[int]) -> None:
        self.client = client
        self.deltas = deltas
        self.i = 0  # the index of the next completion token
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCP transport is not asyncio's class

    def data_received(self, data: bytes) -> None:
        out = []
        for _ in range(data.count(TOKEN)):
            if self.i in self.deltas:
                out.append(FRAME)
            self.i += 1
        done = DONE in data
        if done:
            out.append(END_FRAME)
        if out:
            self.client.write(b"".join(out))
        if done:
            self.client.close()
            if self.transport is not None:
                self.transport.close()


class ParsingUpstream(asyncio.Protocol):
    """The engine's stream of one client, read as a Python gateway must read it (`--parse`)."""

    def __init__(self, client: asyncio.Transport, deltas: frozenset[int]) -> None:
        import httptools
        import orjson

        self.client = client
        self.deltas = deltas
        self.i = 0
        self.sequence = 0
        self.partial = b""
        self.out: list[bytes] = []
        self.done = False
        self.loads: Callable[[bytes], object] = orjson.loads
        self.dumps: Callable[[object], bytes] = orjson.dumps
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def on_body(self, body: bytes) -> None:
        lines = (self.partial + body).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                self.done = True
                continue
            for choice in self.loads(payload)["choices"]:  # type: ignore[index]  # the last chunk has none
                for _ in choice["token_ids"]:
                    if self.i in self.deltas:
                        self.sequence += 1
                        self.out.append(PARSE_FRAME % (self.sequence, self.dumps(choice["text"])))
                    self.i += 1

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)
        out = self.out
        if self.done:
            out.append(END_FRAME)
        if out:
            body = b"".join(out)
            self.client.write(b"%x\r\n%s\r\n" % (len(body), body))
            self.out = []
        if self.done:
            self.client.write(b"0\r\n\r\n")
            self.client.close()
            if self.transport is not None:
                self.transport.close()


class Client(asyncio.Protocol):
    """One client connection: its request (ignored once whole) starts an engine stream."""

    def __init__(self, engine_port: int, deltas: frozenset[int], parse: bool) -> None:
        self.engine_port = engine_port
        self.deltas = deltas
        self.parse = parse
        self.buffer = b""
        self.started = False
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if self.started or end < 0:
            return
        length = 0
        for line in self.buffer[:end].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(self.buffer) < end + 4 + length:
            return
        self.started = True
        asyncio.ensure_future(self.relay())

    async def relay(self) -> None:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        client = self.transport
        upstream: Callable[[], asyncio.Protocol]
        if self.parse:
            client.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            upstream = lambda: ParsingUpstream(client, self.deltas)  # noqa: E731
        else:
            client.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
            upstream = lambda: Upstream(client, self.deltas)  # noqa: E731
        transport, _ = await loop.create_connection(upstream, "127.0.0.1", self.engine_port)
        transport.write(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(REQUEST), REQUEST))  # fmt: skip


async def run(args: argparse.Namespace) -> None:
    from bench_server import delta_token_indexes

    from harmony_responses import HarmonyEncodingName, load_harmony_encoding

    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    deltas = frozenset(delta_token_indexes(enc.encode(completion_text(args.words), allowed_special="all")))
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(
        lambda: Client(args.engine_port, deltas, args.parse), "127.0.0.1", 0, backlog=4096
    )
    print(f"relay listening on {listener.sockets[0].getsockname()[1]}", flush=True)
    await listener.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine-port", type=int, required=True, help="the fake vLLM engine's port")
    ap.add_argument("--words", type=int, default=250)
    ap.add_argument("--parse", action="store_true", help="also parse and frame as a Python gateway must (see above)")
    args = ap.parse_args()
    try:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    try:
        asyncio.run(run(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
