"""Test helpers for the server: real processes (the server, fake engines) on 127.0.0.1, started and stopped.

Every process binds port 0 and prints the port it got (`listening on ...`), which is read back here:
no port is guessed. Output is drained by a thread (kept for failure messages), so a chatty process
never blocks on a full pipe.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
FAKE_ENGINE = ROOT / "tests" / "fake_engines" / "serve.py"
ENV_PREFIX = "HARMONY_RESPONSES_"


class Proc:
    """A child process that announces its address on a line matching `ready`."""

    def __init__(self, argv: Sequence[str], ready: str, env: dict[str, str] | None = None, timeout: float = 60) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
        self.popen = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**base, **(env or {})},
        )
        self.lines: list[str] = []
        self._found = threading.Event()
        self._pattern = re.compile(ready)
        self.match: re.Match[str] | None = None
        threading.Thread(target=self._drain, daemon=True).start()
        if not self._found.wait(timeout):
            self.stop()
            raise RuntimeError(f"{argv} did not start within {timeout}s:\n" + "".join(self.lines[-40:]))
        if self.match is None:
            self.stop()
            raise RuntimeError(f"{argv} exited before it was ready:\n" + "".join(self.lines[-40:]))

    def _drain(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line)
            if self.match is None:
                m = self._pattern.search(line)
                if m:
                    self.match = m
                    self._found.set()
        self._found.set()

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return "".join(self.lines)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


class Server(Proc):
    """`harmony-responses serve --port 0 ARGS`; `url` is its base (`http://127.0.0.1:PORT`).

    Without `--store`, the server keeps its responses in the default SQLite file under a data folder of
    its own (`XDG_DATA_HOME`, removed when it stops), never in the user's.
    """

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        env = dict(env or {})
        self.data_home: str | None = None
        if "--store" not in args and ENV_PREFIX + "STORE" not in env and "XDG_DATA_HOME" not in env:
            self.data_home = env["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="harmony-serve-")
        argv = [sys.executable, "-m", "harmony_responses.cli", "serve", "--host", "127.0.0.1", "--port", "0", *args]
        super().__init__(argv, r"listening on (http://\S+)", env)
        assert self.match is not None
        self.url = self.match.group(1)

    def stop(self) -> None:
        super().stop()
        if self.data_home is not None:
            shutil.rmtree(self.data_home, ignore_errors=True)


class FakeEngine(Proc):
    """A fake inference engine process (tests/fake_engines/serve.py KIND ARGS)."""

    def __init__(self, kind: str, *args: str) -> None:
        super().__init__([sys.executable, str(FAKE_ENGINE), kind, "--port", "0", *args], r"listening on (\d+)")
        assert self.match is not None
        self.kind = kind
        self.url = f"http://127.0.0.1:{self.match.group(1)}"

    def stats(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(self.url + "/_fake/stats", timeout=10).json()
        return data

    def reset(self) -> None:
        httpx.post(self.url + "/_fake/reset", timeout=10)

    def wait_idle(self, timeout: float = 5.0) -> dict[str, Any]:
        """The stats once no request is active (or the last stats seen after `timeout`)."""
        deadline = time.monotonic() + timeout
        stats = self.stats()
        while stats["active"] and time.monotonic() < deadline:
            time.sleep(0.02)
            stats = self.stats()
        return stats


@contextmanager
def running(proc: Proc) -> Iterator[Proc]:
    try:
        yield proc
    finally:
        proc.stop()


def sse_events(text: str) -> list[dict[str, Any]]:
    """The JSON data of every SSE frame before `data: [DONE]` (asserting `event:` names match `type`)."""
    events = []
    for frame in text.split("\n\n"):
        lines = frame.split("\n")
        data = [line[6:] for line in lines if line.startswith("data: ")]
        names = [line[7:] for line in lines if line.startswith("event: ")]
        if not data:
            continue
        if data[0] == "[DONE]":
            break
        event = json.loads("\n".join(data))
        if names:
            assert names[0] == event.get("type"), (names, event.get("type"))
        events.append(event)
    return events


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def process_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def asgi_post(app: Any, path: str, body: dict[str, Any], sent_to: list[Any] | None = None) -> tuple[int, bytes]:
    """One POST to an app in this process, through its ASGI interface (for unit tests that count calls inside the
    server); the status and the whole body. Every ASGI message the app sent goes to `sent_to` too."""
    return asgi_request(app, "POST", path, json.dumps(body).encode(), sent_to=sent_to)


def asgi_request(
    app: Any, method: str, path: str, payload: bytes = b"", query: str = "", sent_to: list[Any] | None = None
) -> tuple[int, bytes]:
    """One request to an app in this process (see `asgi_post`)."""
    messages: list[dict[str, Any]] = [] if sent_to is None else sent_to
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [],
        "query_string": query.encode(),
        "root_path": "",
    }
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in messages if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
