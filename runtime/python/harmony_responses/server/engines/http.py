"""What the HTTP adapters share: one pooled httpx client, streamed POSTs, SSE and NDJSON framing, errors.

httpx's read timeout bounds every wait on the engine (the response head, then each chunk), so an
engine that stalls raises `EngineTimeout`; transport failures and 5xx answers raise
`EngineUnavailable`, 4xx answers `EngineRejected` with the engine's own message, and output of the
wrong shape `EngineMalformed`. The engine's address is never in these messages (clients see them, and
the stored responses keep them): it goes to the log only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx

from ..._tables import spec as _spec
from .base import Engine, EngineError, EngineRejected, EngineTimeout, EngineUnavailable, malformed

log = logging.getLogger("harmony_responses.server")

# Engine words spelled like Harmony's (see tests/test_facts_once.py): vLLM's old flat error's `object`.
WIRE = {"error_object": "error"}

READY_TIMEOUT_S = 2.0
_SSE_DATA = "data:"
_SSE_DONE = _spec.SSE_DONE  # the engines' SSE streams end as OpenAI's (and ours) do


def error_message(status: int, body: bytes) -> str:
    """The message of an engine's error body: `{"error": {"message"}}`, `{"error": "…"}`, `{"message"}` or text."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return f"HTTP {status}: {text[:500]}" if text else f"HTTP {status}"
    return f"HTTP {status}: {stream_error(data) or text[:500]}"


def stream_error(data: Any) -> str | None:
    """The error message a chunk carries (`{"error": …}` or vLLM's old flat `{"object": "error", …}`), else None."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    if isinstance(error, str):
        return error
    if data.get("object") == WIRE["error_object"]:
        return str(data.get("message", data))
    return None


class HttpEngine(Engine):
    """An engine behind HTTP: `post` opens a streamed response, `sse` and `ndjson` read its frames."""

    ready_path = "/health"  # answers 2xx once the engine can take requests (vLLM, SGLang, llama.cpp)

    def __init__(self, base_url: str, *, timeout: float, max_connections: int) -> None:
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            verify=self.base_url.startswith("https:"),  # no certificate store to load for plain http
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def check_ready(self) -> str | None:
        try:
            response = await self._client.get(self.ready_path, timeout=READY_TIMEOUT_S)
        except httpx.HTTPError as exc:
            log.warning("readiness: %s%s: %s: %s", self.base_url, self.ready_path, type(exc).__name__, exc)
            return f"the engine does not answer ({type(exc).__name__})"
        if not response.is_success:
            log.warning("readiness: %s%s answered HTTP %d", self.base_url, self.ready_path, response.status_code)
            return f"the engine is not ready (its health check answered HTTP {response.status_code})"
        return None

    @asynccontextmanager
    async def post(self, path: str, payload: Mapping[str, Any]) -> AsyncIterator[httpx.Response]:
        """A streamed POST whose status is 2xx; engine failures become `EngineError`s."""
        try:
            async with self._client.stream("POST", path, json=payload) as response:
                if response.status_code >= 400:
                    body = await response.aread()
                    message = error_message(response.status_code, body)
                    if 400 <= response.status_code < 500 and response.status_code not in (401, 403, 404, 408, 429):
                        raise EngineRejected(message, response.status_code)
                    raise EngineUnavailable(message, response.status_code)
                yield response
        except httpx.TimeoutException as exc:
            log.warning("engine %s%s: no answer within the timeout (%s)", self.base_url, path, type(exc).__name__)
            raise EngineTimeout(f"no answer from the engine within the timeout ({type(exc).__name__})") from exc
        except httpx.HTTPError as exc:
            log.warning("engine %s%s: %s: %s", self.base_url, path, type(exc).__name__, exc)
            raise EngineUnavailable(f"the engine cannot be reached or broke the stream ({type(exc).__name__})") from exc

    async def sse(self, response: httpx.Response) -> AsyncGenerator[Any, None]:
        """The JSON of each SSE `data:` field, until `data: [DONE]` or the end of the body."""
        async for line in response.aiter_lines():
            if not line.startswith(_SSE_DATA):
                continue  # event names, comments, blank separators
            data = line[len(_SSE_DATA) :].strip()
            if data == _SSE_DONE:
                return
            yield _loads(data)

    async def ndjson(self, response: httpx.Response) -> AsyncGenerator[Any, None]:
        """The JSON of each non-empty line."""
        async for line in response.aiter_lines():
            if line.strip():
                yield _loads(line)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise malformed("a chunk that is not JSON", text[:120]) from None


__all__ = ["EngineError", "HttpEngine", "error_message", "stream_error"]
