"""A real headless Chromium for the tests, driven over the Chrome DevTools protocol (a small client here).

`Browser.start()` finds Debian's `chromium` (`$CHROMIUM`, then `PATH`) and, when it is missing and we are
root, installs the package with apt-get first (waiting for apt's lock, which other sessions may hold). It
runs Chromium headless with a fresh profile folder and `--remote-debugging-port=0`, reads the DevTools
address Chromium prints, and opens one page. `Page` navigates, evaluates JavaScript, waits for conditions,
takes screenshots, and keeps every console error, uncaught exception and failed load the page reports.
The browser only ever loads 127.0.0.1 (the flags turn off its own network traffic).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

DEBIAN_PACKAGE = "chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "--remote-debugging-address=127.0.0.1",
)


class ChromiumUnavailable(RuntimeError):
    """No Chromium here and none can be installed, or it did not start."""


def find_chromium() -> str | None:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def install_chromium() -> str:
    if os.geteuid() != 0:
        raise ChromiumUnavailable("chromium is not installed and this session is not root: apt-get install chromium")
    cmd = ["apt-get", "install", "-y", "-o", "DPkg::Lock::Timeout=600", DEBIAN_PACKAGE]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    if run.returncode != 0:
        update = subprocess.run(["apt-get", "update"], capture_output=True, text=True, env=env, timeout=600)
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
        if run.returncode != 0:
            raise ChromiumUnavailable(f"apt-get install chromium failed:\n{update.stderr[-800:]}{run.stderr[-2000:]}")
    found = find_chromium()
    if found is None:
        raise ChromiumUnavailable("apt-get installed chromium but no chromium is on PATH")
    return found


class Page:
    """One browser tab over a DevTools websocket: commands, and the events the tests look at."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._replies: dict[int, dict[str, Any]] = {}
        self._reply = threading.Condition()
        self.problems: list[str] = []  # console errors, uncaught exceptions, failed loads
        self.console: list[str] = []
        self._closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                message = json.loads(self.ws.recv())
                if "id" in message:
                    with self._reply:
                        self._replies[message["id"]] = message
                        self._reply.notify_all()
                else:
                    self._event(message.get("method", ""), message.get("params", {}))
        except Exception:  # noqa: BLE001 - the socket closed: the browser is stopping
            pass
        finally:
            with self._reply:
                self._closed = True
                self._reply.notify_all()

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append(f"{params.get('type')}: {text}")
            if params.get("type") in ("error", "assert"):
                self.problems.append(f"console.{params.get('type')}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            exc = details.get("exception", {}).get("description") or details.get("text")
            self.problems.append(f"uncaught: {exc}")
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            if entry.get("level") == "error":
                self.problems.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())

    def send(self, method: str, timeout: float = 30, **params: Any) -> dict[str, Any]:
        with self._lock:
            ident = next(self._ids)
            self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        with self._reply:
            while ident not in self._replies:
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    raise TimeoutError(f"no answer to {method} within {timeout}s")
                self._reply.wait(left)
            reply = self._replies.pop(ident)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression (awaited when it is a promise)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 20, poll: float = 0.05) -> Any:
        """Poll until the expression is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression!r} stayed false for {timeout}s; console: {self.console[-10:]}")
            time.sleep(poll)

    def watch(self, expression: str, until: Callable[[Any], bool], timeout: float = 20) -> list[Any]:
        """Every distinct value of `expression` seen while polling, until `until(value)` holds."""
        seen: list[Any] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if not seen or seen[-1] != value:
                seen.append(value)
            if until(value):
                return seen
            time.sleep(0.02)
        raise TimeoutError(f"{expression!r} never reached its end; seen {seen[-5:]}")

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def screenshot(self, path: Path, height: int | None = None) -> None:
        """A PNG of the page: the viewport, or its top `height` pixels (a taller shot of a long page)."""
        params: dict[str, Any] = {"format": "png"}
        if height is not None:
            params.update(
                captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1}
            )
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))


class Browser:
    """A headless Chromium process with one page; `stop()` ends it and removes its profile."""

    def __init__(self, executable: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="harmony-chromium-")
        argv = [executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"]
        self.popen = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        address = self._devtools_address()
        port = int(re.sub(r".*:(\d+)/.*", r"\1", address))
        self.base = f"http://127.0.0.1:{port}"
        targets = httpx.get(self.base + "/json/list", timeout=10).json()
        page = next(t for t in targets if t.get("type") == "page")
        self._socket = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=20)
        self.page = Page(self._socket.__enter__())
        for domain in ("Page", "Runtime", "Log"):
            self.page.send(f"{domain}.enable")
        self.page.send("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)

    def _devtools_address(self) -> str:
        assert self.popen.stderr is not None
        deadline = time.monotonic() + 60
        for line in self.popen.stderr:
            self.lines.append(line)
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                threading.Thread(target=self._drain, daemon=True).start()
                return m.group(1)
            if time.monotonic() > deadline:
                break
        self.stop()
        raise ChromiumUnavailable("chromium did not start:\n" + "".join(self.lines[-30:]))

    def _drain(self) -> None:
        assert self.popen.stderr is not None
        for line in self.popen.stderr:
            self.lines.append(line)

    @classmethod
    def start(cls) -> Browser:
        return cls(find_chromium() or install_chromium())

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
