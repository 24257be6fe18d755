"""Test helpers for web search: the fake search and page services as processes, and a server in front of them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "server"))
sys.path.insert(0, str(ROOT / "tests"))

from serverkit import Proc, Server  # noqa: E402

FAKE_WEB = ROOT / "tests" / "services" / "fake_web.py"


@dataclass
class Web:
    """A fake page server and a fake SearXNG-style search service whose hits point at it."""

    pages: Proc
    search: Proc

    @property
    def pages_url(self) -> str:
        assert self.pages.match is not None
        return f"http://127.0.0.1:{self.pages.match.group(1)}"

    @property
    def search_url(self) -> str:
        assert self.search.match is not None
        return f"http://127.0.0.1:{self.search.match.group(1)}"

    def page_requests(self) -> list[str]:
        found: list[str] = httpx.get(self.pages_url + "/_fake/requests", timeout=10).json()
        return found

    def queries(self) -> list[str]:
        found: list[str] = httpx.get(self.search_url + "/_fake/queries", timeout=10).json()
        return found


@contextmanager
def fake_web() -> Iterator[Web]:
    pages = Proc([sys.executable, str(FAKE_WEB), "pages"], r"listening on (\d+)")
    try:
        search_url = f"http://127.0.0.1:{pages.match.group(1) if pages.match else 0}"
        search = Proc([sys.executable, str(FAKE_WEB), "search", search_url], r"listening on (\d+)")
        try:
            yield Web(pages, search)
        finally:
            search.stop()
    finally:
        pages.stop()


@contextmanager
def serving(*args: str, env: dict[str, str] | None = None) -> Iterator[Server]:
    server = Server(*args, env=env)
    try:
        yield server
    finally:
        server.stop()


def post(server: Server, body: dict[str, Any], timeout: float = 60) -> httpx.Response:
    return httpx.post(server.url + "/v1/responses", json={"model": "gpt-oss", **body}, timeout=timeout)
