"""Real clients against a real `serve --engine demo`: their installs (cached) and a recording proxy.

The clients are installed from their registries at test time, once, into `.cache/clients/` under the worktree
(.gitignore covers it): a virtual environment for the Python clients (`PY_CLIENTS`), an npm folder for the Node
ones (`NODE_CLIENTS`, Codex CLI's binary ships inside its npm package). A later session finds them there and
installs nothing. Each client talks to the server through `Recorder`, a proxy on 127.0.0.1 that keeps every
request body and every response (JSON or SSE events) it passes on, so a test can say what the client sent and
check that everything the server answered is valid under the spec and its overrides.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("HARMONY_CLIENTS_CACHE") or ROOT / ".cache" / "clients")
HERE = Path(__file__).resolve().parent

# The versions docs/clients.md was written against (ai 7 needs Node 22; this machine has Node 20: ai 6).
PY_CLIENTS = ("openai-agents==0.24.0", "openai==3.57.0")
NODE_CLIENTS = ("@openai/codex@0.171.0", "ai@6.0.326", "@ai-sdk/openai@3.0.141", "zod@4")


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _stamp(packages: tuple[str, ...]) -> str:
    return json.dumps(list(packages))


def python_clients() -> Path:
    """The Python interpreter of the clients' virtual environment (created and filled on first use)."""
    venv = CACHE / "py"
    python = venv / "bin" / "python"
    with _locked("py"):
        stamp = venv / ".installed"
        if not stamp.is_file() or stamp.read_text() != _stamp(PY_CLIENTS):
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *PY_CLIENTS],
                check=True,
                timeout=900,
            )
            stamp.write_text(_stamp(PY_CLIENTS))
    return python


def node_clients() -> Path:
    """The npm folder holding the Node clients (`node_modules`), installed on first use."""
    folder = CACHE / "node"
    with _locked("node"):
        stamp = folder / ".installed"
        if not stamp.is_file() or stamp.read_text() != _stamp(NODE_CLIENTS):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "package.json").write_text('{"name": "harmony-clients", "private": true, "type": "module"}\n')
            subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", *NODE_CLIENTS],
                cwd=folder,
                check=True,
                timeout=900,
            )
            stamp.write_text(_stamp(NODE_CLIENTS))
    return folder


@dataclass
class Exchange:
    """One request through the proxy: what the client sent and what the server answered."""

    method: str
    path: str
    request: Any  # the JSON body (None: none)
    status: int
    response: Any = None  # the JSON body, or None for a stream
    events: list[dict[str, Any]] = field(default_factory=list)  # the SSE events' data, for a stream


class Recorder:
    """A proxy on 127.0.0.1 in front of `target` that records every exchange (`exchanges`); `url` is its base."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                return

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else b""
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                body = json.loads(data) if data else None
                with (
                    httpx.Client(timeout=120) as client,
                    client.stream(self.command, recorder.target + self.path, content=data, headers=headers) as upstream,
                ):
                    self.send_response(upstream.status_code)
                    for key, value in upstream.headers.items():
                        if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                            self.send_header(key, value)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    raw = b""
                    listening = True  # a client may hang up once it has what it wants: the rest is still recorded
                    for chunk in upstream.iter_raw():
                        raw += chunk
                        listening = listening and _send(self.wfile, f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    if listening:
                        _send(self.wfile, b"0\r\n\r\n")
                    exchange = Exchange(self.command, self.path, body, upstream.status_code)
                    if upstream.headers.get("content-type", "").startswith("text/event-stream"):
                        exchange.events = _sse(raw.decode("utf-8"))
                    elif raw:
                        exchange.response = json.loads(raw)
                with recorder._lock:
                    recorder.exchanges.append(exchange)

            do_GET = do_POST = do_DELETE = _forward  # noqa: N815 - http.server's names

        self._server = _Quiet(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def posted(self, path: str = "/v1/responses") -> list[Exchange]:
        with self._lock:
            return [e for e in self.exchanges if e.method == "POST" and e.path.split("?")[0] == path]

    def clear(self) -> None:
        with self._lock:
            self.exchanges.clear()


def _send(out: Any, data: bytes) -> bool:
    """Write to a client; False once it has hung up."""
    try:
        out.write(data)
        out.flush()
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def _sse(text: str) -> list[dict[str, Any]]:
    events = []
    for frame in text.split("\n\n"):
        for line in frame.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[len("data: ") :]))
    return events


def run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 180) -> str:
    """Run a client process; its standard output, or an assertion naming what it printed when it fails."""
    done = subprocess.run(
        argv, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv[:3]} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


# -- fixtures (imported by each test module) -------------------------------------------------------------------

sys.path.insert(0, str(ROOT / "tests" / "server"))

from responses_checker import assert_valid_event, assert_valid_response, check_stream  # noqa: E402

from serverkit import Server  # noqa: E402


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    """`serve --engine demo` with its default store, for the whole session."""
    proc = Server("--engine", "demo")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def proxy(server: Server) -> Iterator[Recorder]:
    """A fresh recording proxy per test; at its end, every response and event the server sent must be valid."""
    recorder = Recorder(server.url)
    try:
        yield recorder
        check_exchanges(recorder)
    finally:
        recorder.close()


def check_exchanges(recorder: Recorder) -> None:
    """Every response and event the server sent through `recorder` is valid, and every stream in order."""
    for exchange in recorder.exchanges:
        if exchange.events:
            for event in exchange.events:
                assert_valid_event(event)
            if exchange.events[0].get("type") == "response.created":
                check_stream(exchange.events)
        elif exchange.status == 200 and exchange.method == "POST" and exchange.path == "/v1/responses":
            assert_valid_response(exchange.response)


def responses_of(recorder: Recorder) -> list[dict[str, Any]]:
    """Every final response the server sent through `recorder` (a stream's terminal event's, or the JSON body)."""
    out = []
    for exchange in recorder.posted():
        if exchange.events:
            out += [
                e["response"]
                for e in exchange.events
                if e.get("type") in ("response.completed", "response.incomplete", "response.failed")
            ]
        elif exchange.status == 200:
            out.append(exchange.response)
    return out
