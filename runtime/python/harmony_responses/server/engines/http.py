"""What the HTTP adapters share: pooled keep-alive connections, streamed POSTs, SSE and NDJSON framing, errors.

The streamed answer is read by `reader` (an asyncio protocol with httptools; see there why): one timeout
per stream, a deadline that every byte from the engine moves forward, bounds the connection, the
response head and every wait between chunks, so an engine that stalls raises `EngineTimeout`; transport
failures and 5xx answers raise `EngineUnavailable`, 4xx answers `EngineRejected` with the engine's own
message, and output of the wrong shape `EngineMalformed`. The engine's address is never in these
messages (clients see them, and the stored responses keep them): it goes to the log only. `outputs` reads
the chunks that arrived together as one batch (SSE `data:` fields or NDJSON lines), so the adapter passes
their token ids on as one output and the client gets their events in one write; a caller that streams
(`exchange.EngineCall`) can have them handed to it in the connection's own callback instead (`DIRECT`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any, Protocol

import httpx
import orjson

from ..._tables import spec as _spec
from .base import (
    SHAPE_ERRORS,
    Engine,
    EngineError,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
    Text,
    TokenLogprob,
    Tokens,
    malformed,
)
from .reader import EnginePool, EngineResponse, Framing, ReadFailure

log = logging.getLogger("harmony_responses.server")

# Engine words spelled like Harmony's (see tests/test_facts_once.py): vLLM's old flat error's `object`.
WIRE = {"error_object": "error"}

READY_TIMEOUT_S = 2.0
_SSE_DONE = _spec.SSE_DONE.encode()  # the engines' SSE streams end as OpenAI's (and ours) do


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


class Outputs:
    """The outputs of chunks read together: consecutive ids become one `Tokens` (fed token by token all the
    same, so the events do not change); each text stays its own `Text`."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Tokens | Text] = []

    def ids(self, ids: list[int], logprobs: list[TokenLogprob] | None = None) -> None:
        """Ids read from one chunk, with their log probabilities when the engine sent them (kept one per id)."""
        items = self.items
        last = items[-1] if items else None
        if type(last) is Tokens and (last.logprobs is None) == (logprobs is None):
            last.ids.extend(ids)
            if last.logprobs is not None and logprobs is not None:
                last.logprobs.extend(logprobs)
        else:
            items.append(Tokens(list(ids), None if logprobs is None else list(logprobs)))

    def text(self, text: str) -> None:
        self.items.append(Text(text))  # one each: text is parsed as it comes, and where chunks end shapes the deltas


class HttpEngine(Engine):
    """An engine behind HTTP: `post` opens a streamed response, `outputs` reads its chunks in batches."""

    ready_path = "/health"  # answers 2xx once the engine can take requests (vLLM, SGLang, llama.cpp)

    def __init__(self, base_url: str, *, timeout: float, max_connections: int) -> None:
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self._pool = EnginePool(self.base_url, timeout=timeout, max_connections=max_connections)

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def check_ready(self) -> str | None:
        try:  # a rare probe: a client of its own, so a readiness check never waits behind the streams' pool
            async with httpx.AsyncClient(base_url=self.base_url, timeout=READY_TIMEOUT_S) as client:
                response = await client.get(self.ready_path)
        except httpx.HTTPError as exc:
            log.warning("readiness: %s%s: %s: %s", self.base_url, self.ready_path, type(exc).__name__, exc)
            return f"the engine does not answer ({type(exc).__name__})"
        if not response.is_success:
            log.warning("readiness: %s%s answered HTTP %d", self.base_url, self.ready_path, response.status_code)
            return f"the engine is not ready (its health check answered HTTP {response.status_code})"
        return None

    @asynccontextmanager
    async def post(
        self, path: str, payload: Mapping[str, Any], framing: Framing = Framing.SSE
    ) -> AsyncIterator[EngineResponse]:
        """A streamed POST whose status is 2xx; engine failures become `EngineError`s."""
        where = f"{self.base_url}{path}"
        try:
            response = await self._pool.open(path, _dumps(payload), framing)
        except ReadFailure as exc:
            raise _engine_error(exc, where) from None
        try:
            if response.status >= 400:
                body = await response.body()
                message = error_message(response.status, body)
                if 400 <= response.status < 500 and response.status not in (401, 403, 404, 408, 429):
                    raise EngineRejected(message, response.status)
                raise EngineUnavailable(message, response.status)
            yield response
        except ReadFailure as exc:
            raise _engine_error(exc, where) from None
        finally:
            self._pool.close(response)

    async def outputs(
        self, response: EngineResponse, read: Callable[[Any, Outputs], None]
    ) -> AsyncGenerator[Tokens | Text, None]:
        """The outputs of each batch of chunks that arrived together (SSE `data:` fields until `data: [DONE]`,
        or NDJSON lines, as the response's framing says), every chunk's JSON read by `read` into the batch's
        `Outputs`. A payload that is not JSON fails the batch before any of it is read; otherwise what a
        batch gave before a chunk failed is passed on first, then the failure is raised (a chunk of the
        wrong shape as `EngineMalformed`).

        One generator does the waiting, the framing and the reading: every token of every stream passes
        through it, and each layer of generators or coroutines would cost a frame resumed per token. When
        its caller set a `Direct` consumer in `DIRECT`, the batches that arrive while it waits are read in
        the connection's callback and handed to the consumer there, with no wake-up of the task at all;
        the body's end, a payload that is not JSON and a failure still come back here."""
        sse = response.framing is Framing.SSE
        take, arrival = response.take, response.arrival
        left: list[EngineUnavailable] = []  # a failure the direct path met, for this generator to raise
        listener: Callable[[list[bytes]], bool] | None = None
        while True:
            payloads = take()
            if payloads is None:
                direct = DIRECT.get()
                if direct is None or not direct.active:
                    await arrival()
                    continue
                if listener is None:
                    listener = _listener(response, read, direct, left)
                response.listen(listener)
                try:
                    await arrival()
                finally:
                    response.listen(None)
                if not direct.active:
                    yield Tokens([])  # the consumer stopped: its caller takes over before anything else is read
                if left:
                    raise left.pop()
                continue
            if not payloads:
                return
            chunks: list[Any] = []
            done = False
            for data in payloads:
                if sse and data == _SSE_DONE:
                    done = True
                    break
                chunks.append(_loads(data))
            if chunks:
                out, failure = _read_chunks(chunks, read)
                for output in out.items:
                    yield output
                if failure is not None:
                    raise failure
            if done:
                return


class Direct(Protocol):
    """A consumer of a stream's outputs in the engine connection's own callback (set in `DIRECT` by the caller
    that iterates `outputs`): while `active`, each batch of chunks is read and handed to it there, instead of
    waking the iterating task; it returns False to stop (the iterator then yields an empty `Tokens`, so the
    caller runs before anything else is read, and the caller sets `active` again to go on). `flush` runs once
    the loop turn's other streams have had their batches (see `reader._Turn`): the consumer's client write
    goes there; it too returns False to stop."""

    active: bool

    def __call__(self, outputs: list[Tokens | Text]) -> bool: ...

    def flush(self) -> bool: ...


DIRECT: ContextVar[Direct | None] = ContextVar("harmony_responses_direct", default=None)


def _listener(
    response: EngineResponse, read: Callable[[Any, Outputs], None], direct: Direct, left: list[EngineUnavailable]
) -> Callable[[list[bytes]], bool]:
    """The connection's callback for `direct`: a batch read as `outputs` reads it, or left to `outputs` (the
    body's end, a payload that is not JSON) before any of it is read."""
    sse = response.framing is Framing.SSE
    loads = orjson.loads
    after_turn, flush = response.after_turn, direct.flush  # bound once, not per batch

    def listener(payloads: list[bytes]) -> bool:
        if sse and _SSE_DONE in payloads:
            return False
        try:
            # one payload is the common case (one token per decode step): no comprehension frame for it
            chunks = [loads(payloads[0])] if len(payloads) == 1 else [loads(data) for data in payloads]
        except ValueError:
            return False
        out, failure = _read_chunks(chunks, read)
        if failure is not None:
            left.append(failure)
        more = direct(out.items)
        after_turn(flush)  # what the batch made is written before the task hears of a stop
        if not more or left:
            response.stop_listening()
        return True

    return listener


def _read_chunks(chunks: list[Any], read: Callable[[Any, Outputs], None]) -> tuple[Outputs, EngineUnavailable | None]:
    """A batch's decoded chunks read by the adapter: the outputs read before any failure, and that failure (a chunk
    of the wrong shape as `EngineMalformed`, an error chunk as the adapter raised it), for the caller to raise
    after handing those outputs on."""
    out = Outputs()
    try:
        for chunk in chunks:
            read(chunk, out)
    except SHAPE_ERRORS as exc:
        return out, malformed(f"{type(exc).__name__}: {exc}")
    except EngineUnavailable as exc:
        return out, exc
    return out, None


def _engine_error(exc: ReadFailure, where: str) -> EngineError:
    """The client's error for a failed read: how it failed, never where (the address goes to the log only)."""
    log.warning("engine %s: %s", where, exc)
    if exc.timed_out:
        return EngineTimeout(f"no answer from the engine within the timeout ({exc.kind.value})")
    return EngineUnavailable(f"the engine cannot be reached or broke the stream ({exc.kind.value})")


def _dumps(payload: Mapping[str, Any]) -> bytes:
    try:
        return orjson.dumps(payload)
    except TypeError:  # what orjson does not take (an integer past 64 bits, a mapping that is not a dict)
        return json.dumps(payload, ensure_ascii=False).encode()


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except ValueError:
        raise malformed("a chunk that is not JSON", data[:120].decode("utf-8", "replace")) from None


__all__ = ["DIRECT", "Direct", "EngineError", "HttpEngine", "Outputs", "error_message", "stream_error"]
