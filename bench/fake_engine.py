"""A paced fake inference engine for bench_server.py: one process, one wire format, one shared decode clock.

    python bench/fake_engine.py KIND [--port 0] [--tps 100] [--first-token-ms 50] [--words 250]

KIND is the wire format (../shared/docs/engines.md): `vllm` (`POST /v1/completions`, SSE chunks with
`token_ids`), `sglang` (`POST /generate`, SSE, delta `output_ids` as with `--incremental-streaming-output`),
`llamacpp` (`POST /completion`, SSE, no `[DONE]`, `<|return|>` stops silently), `ollama` (`POST
/api/generate` raw, NDJSON text) or `chat` (`POST /v1/chat/completions`, SSE `delta.content`, for the LiteLLM
side of the comparison). Every request gets the same completion (bench_server.completion_text), one token
per chunk, each chunk its own HTTP chunk, as the engines send them.

The clock: like continuous batching, one decode step every 1/tps seconds gives every running stream its
next token at once; a new stream's first token comes on the first step at least `--first-token-ms` after its
request arrived. All frames are encoded once at start-up, and a step is one timer callback writing one
frame per stream, so the fake costs a few microseconds per token and is not what the bench measures. The
process prints `fake engine KIND listening on PORT` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))

from harmony_responses import HarmonyEncodingName, load_harmony_encoding  # noqa: E402

ROUTES = {
    "vllm": "/v1/completions",
    "sglang": "/generate",
    "llamacpp": "/completion",
    "ollama": "/api/generate",
    "chat": "/v1/chat/completions",
}


def completion_text(words: int) -> str:
    """The completion every stream plays: reasoning, then a final answer of `words` words."""
    thought = " ".join(f"step{i}" for i in range(words // 5))
    answer = " ".join(f"word{i % 97}" for i in range(words))
    analysis = f"<|channel|>analysis<|message|>{thought}<|end|>"
    return f"{analysis}<|start|>assistant<|channel|>final<|message|>{answer}<|return|>"


def _chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


def _sse(data: object) -> bytes:
    return _chunk(b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n")


def frames(kind: str, tokens: list[int], texts: list[str]) -> tuple[bytes, list[bytes], bytes]:
    """The response head, one frame per decode step, and the tail, for `kind`."""
    sse_head = b"content-type: text/event-stream\r\ncache-control: no-cache\r\n"
    done = _chunk(b"data: [DONE]\n\n")
    steps: list[bytes] = []
    tail = b""
    n = len(tokens)
    if kind == "vllm":
        for i, (token, text) in enumerate(zip(tokens, texts, strict=True)):
            last = i == n - 1
            choice = {"index": 0, "text": text, "token_ids": [token], "finish_reason": "stop" if last else None,
                      "stop_reason": token if last else None}  # fmt: skip
            steps.append(_sse({"id": "cmpl-bench", "object": "text_completion", "created": 0, "model": "gpt-oss",
                               "choices": [choice]}))  # fmt: skip
        usage = {"prompt_tokens": 20, "completion_tokens": n, "total_tokens": 20 + n}
        tail = _sse({"id": "cmpl-bench", "object": "text_completion", "created": 0, "model": "gpt-oss", "choices": [],
                     "usage": usage}) + done  # fmt: skip
        head = sse_head
    elif kind == "sglang":
        for i, (token, text) in enumerate(zip(tokens, texts, strict=True)):
            last = i == n - 1
            meta = {"id": "bench", "finish_reason": {"type": "stop", "matched": token} if last else None,
                    "prompt_tokens": 20, "completion_tokens": i + 1, "cached_tokens": 0}  # fmt: skip
            steps.append(_sse({"text": text, "output_ids": [token], "meta_info": meta}))
        tail = done
        head = sse_head
    elif kind == "llamacpp":
        body = tokens[:-1]  # <|return|> is end-of-generation: it stops the stream without a chunk of its own
        for i, token in enumerate(body):
            steps.append(_sse({"index": 0, "content": texts[i], "tokens": [token], "stop": False, "id_slot": 0,
                               "tokens_predicted": i + 1, "tokens_evaluated": 20}))  # fmt: skip
        end = {"index": 0, "content": "", "tokens": [], "stop": True, "stop_type": "eos", "stopping_word": "",
               "tokens_predicted": n, "tokens_evaluated": 20, "truncated": False}  # fmt: skip
        steps.append(_sse(end))
        head = sse_head
    elif kind == "ollama":
        for text in texts[:-1]:  # raw mode: <|return|> ends the stream without text
            line = {"model": "gpt-oss:20b", "created_at": "2026-01-01T00:00:00Z", "response": text, "done": False}
            steps.append(_chunk(json.dumps(line).encode() + b"\n"))
        end = {"model": "gpt-oss:20b", "created_at": "2026-01-01T00:00:00Z", "response": "", "done": True,
               "done_reason": "stop", "prompt_eval_count": 20, "eval_count": n}  # fmt: skip
        steps.append(_chunk(json.dumps(end).encode() + b"\n"))
        head = b"content-type: application/x-ndjson\r\n"
    elif kind == "chat":
        for i, text in enumerate(texts):
            last = i == n - 1
            delta = {"content": text} if not last else {}
            choice = {"index": 0, "delta": delta, "finish_reason": "stop" if last else None}
            steps.append(_sse({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
                               "model": "gpt-oss", "choices": [choice]}))  # fmt: skip
        tail = done
        head = sse_head
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    return b"HTTP/1.1 200 OK\r\n" + head + b"transfer-encoding: chunked\r\n\r\n", steps, tail + b"0\r\n\r\n"


class Clock:
    """One decode step every 1/tps seconds for every running stream (absolute times: no drift)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tps: float, steps: list[bytes], tail: bytes) -> None:
        self.loop = loop
        self.step = 1.0 / tps
        self.origin = loop.time()
        self.n = 0
        self.steps = steps
        self.tail = tail
        self.running: dict[Conn, int] = {}  # connection -> index of its next frame
        self.waiting: list[tuple[float, Conn]] = []  # (first step time, connection)
        self.loop.call_at(self.origin + self.step, self.tick)

    def add(self, conn: Conn, first_token_s: float) -> None:
        self.waiting.append((self.loop.time() + first_token_s, conn))

    def tick(self) -> None:
        self.n += 1
        now_step = self.origin + self.n * self.step
        if self.waiting:
            due = [c for t, c in self.waiting if t <= now_step]
            if due:
                self.waiting = [(t, c) for t, c in self.waiting if t > now_step]
                for conn in due:
                    self.running[conn] = 0
        steps, last = self.steps, len(self.steps) - 1
        ended = []
        for conn, i in self.running.items():
            if conn.closed:
                ended.append(conn)
                continue
            if i == last:
                conn.transport.write(steps[i] + self.tail)
                ended.append(conn)
                conn.done()
            else:
                conn.transport.write(steps[i])
                self.running[conn] = i + 1
        for conn in ended:
            del self.running[conn]
        # the next step at its absolute time; a late process skips no step (the streams fall behind instead)
        self.loop.call_at(max(self.origin + (self.n + 1) * self.step, self.loop.time()), self.tick)


class Conn(asyncio.Protocol):
    """One HTTP/1.1 keep-alive connection: a request (Content-Length body) starts a paced stream."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.buffer = b""
        self.closed = False
        self.busy = False
        self.transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCP transport is not asyncio's class

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while not self.busy:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            request_line = head.split("\r\n", 1)[0].split(" ")
            self.buffer = self.buffer[end + 4 + length :]
            self.start(request_line[0], request_line[1] if len(request_line) > 1 else "")

    def start(self, method: str, path: str) -> None:
        server = self.server
        if method == "GET" and path.rstrip("/").endswith("/models"):
            body = json.dumps({"object": "list", "data": [{"id": "gpt-oss", "object": "model"}]}).encode()
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                                 % (len(body), body))  # fmt: skip
            return
        if method != "POST" or path.split("?")[0] != server.route:
            body = b'{"error":{"message":"no such route","code":404}}'
            head = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
            self.transport.write(head % len(body) + body)
            return
        self.busy = True
        self.transport.write(server.head)
        server.clock.add(self, server.first_token_s)

    def done(self) -> None:
        self.busy = False
        if self.buffer:
            self.data_received(b"")


class Server:
    def __init__(self, kind: str, tps: float, first_token_ms: float, words: int) -> None:
        enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
        tokens = enc.encode(completion_text(words), allowed_special="all")
        texts = [enc.decode([t]) for t in tokens]
        self.route = ROUTES[kind]
        self.head, steps, tail = frames(kind, tokens, texts)
        self.first_token_s = first_token_ms / 1000
        self.clock = Clock(asyncio.get_running_loop(), tps, steps, tail)


async def run(args: argparse.Namespace) -> None:
    server = Server(args.kind, args.tps, args.first_token_ms, args.words)
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(lambda: Conn(server), "127.0.0.1", args.port, backlog=4096)
    port = listener.sockets[0].getsockname()[1]
    print(f"fake engine {args.kind} listening on {port}", flush=True)
    await listener.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=sorted(ROUTES))
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--tps", type=float, default=100.0, help="tokens per second per stream")
    ap.add_argument("--first-token-ms", type=float, default=50.0)
    ap.add_argument("--words", type=int, default=250)
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
