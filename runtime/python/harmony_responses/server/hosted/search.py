"""Where `browser.search` finds pages: a small provider interface, and SearXNG's JSON API behind it.

`--web-search URL` names a SearXNG-compatible search API (the open, self-hosted choice): `GET URL/search?q=...
&format=json` answers `{"results": [{"url", "title", "content"}, ...]}`. Another provider only has to give a
query's hits (`SearchProvider.search`). The operator configured the URL, so its own host is allowed for this
provider's requests (`FetchPolicy.trusting`); the pages the model opens go through the plain policy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from .policy import FetchPolicy, FetchRefused

WIRE = {"format": "json"}  # SearXNG's `format` parameter for its JSON answer

__all__ = ["SearchError", "SearchHit", "SearchProvider", "SearxngProvider", "read_limited"]


class SearchError(Exception):
    """The search provider failed (unreachable, an error status, an answer that is not its JSON)."""


@dataclass(frozen=True)
class SearchHit:
    url: str
    title: str
    snippet: str


class SearchProvider(Protocol):
    """Gives the hits of a query, best first."""

    async def search(self, query: str, *, count: int, timeout: float) -> list[SearchHit]: ...

    async def aclose(self) -> None: ...


async def read_limited(response: httpx.Response, limit: int) -> bytes:
    """A streamed response's body, refused past `limit` bytes (a page or an answer too large to read)."""
    declared = response.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ValueError(f"the body is {int(declared)} bytes, more than the {limit} allowed")
    out = bytearray()
    async for chunk in response.aiter_bytes():
        out += chunk
        if len(out) > limit:
            raise ValueError(f"the body is larger than the {limit} bytes allowed")
    return bytes(out)


class SearxngProvider:
    """SearXNG's JSON search API (`format=json`), or anything that answers the same."""

    def __init__(self, base_url: str, policy: FetchPolicy, *, max_bytes: int, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_bytes = max_bytes
        self._client = policy.trusting(base_url).client(timeout=timeout)

    async def search(self, query: str, *, count: int, timeout: float) -> list[SearchHit]:
        params = {"q": query, "format": WIRE["format"]}
        try:
            async with self._client.stream("GET", f"{self.base_url}/search", params=params, timeout=timeout) as reply:
                if reply.status_code != 200:
                    raise SearchError(f"the search service answered HTTP {reply.status_code}")
                body = await read_limited(reply, self.max_bytes)
        except FetchRefused as exc:
            raise SearchError(f"the search service may not be reached: {exc.reason}") from None
        except httpx.TimeoutException:
            raise SearchError("the search service did not answer in time") from None
        except (httpx.HTTPError, ValueError) as exc:
            raise SearchError(f"the search service failed: {exc}") from None
        try:
            data: Any = json.loads(body)
        except ValueError:
            raise SearchError("the search service's answer is not JSON") from None
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            raise SearchError("the search service's answer has no `results` list")
        hits = []
        for result in results:
            if not isinstance(result, dict) or not isinstance(result.get("url"), str):
                continue
            title, snippet = result.get("title"), result.get("content")
            hits.append(
                SearchHit(
                    result["url"],
                    title if isinstance(title, str) else result["url"],
                    snippet if isinstance(snippet, str) else "",
                )
            )
        return hits[:count]

    async def aclose(self) -> None:
        await self._client.aclose()
