"""The ASGI application: routes, auth, limits, and the spec's error body for every failure.

    POST /v1/responses          Open Responses (stream true or false), stored unless `store: false`
    WS   /v1/responses          WebSocket mode: `response.create` messages, events as JSON frames
    GET/DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items, POST /v1/responses/compact
    POST /v1/responses/{id}/cancel, GET /v1/responses/{id}?stream=true  background responses (`background`)
    POST /v1/chat/completions   Chat Completions (stream true or false), on the same Harmony path
    GET  /v1/models             the served model; GET /v1/models/{id} one model or 404
    GET  /health                liveness (no key needed; says nothing of the engine's address)
    GET  /ready                 readiness: 200 when the engine answers, 503 when not or while draining
    GET  /metrics               Prometheus metrics (no key needed)
    POST /v1/harmony/inspect    the bridge run on a raw completion given with a request (the page's inspector)
    GET  /                      the page: a playground and an inspector (static files, no key needed)

The response store is opened (and migrated) when the app is made, swept for responses of dead
processes every `--store-recover-interval` seconds, and closed at shutdown, after the last response has
ended and the last store write has landed (this process's unfinished responses are then marked failed).
While the worker drains (`drain.Drain`), every request but `/health`, `/ready` and `/metrics` gets 503
`server_shutting_down` with `Retry-After`, and the connection is closed.

Starlette, not FastAPI: the request and response models already exist (the generated Open Responses
types, validated by the bridge), the streaming path is a hand-written ASGI response, and errors must
use the spec's body, so FastAPI's validation layer and OpenAPI generation would be bypassed or fought.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._tables import spec as _spec
from ..bridge.encrypted import SECRET_NAME as REASONING_SECRET_NAME
from ..bridge.encrypted import ReasoningSeal
from ..bridge.items import NullSink
from ..encoding import HarmonyEncoding, load_harmony_encoding
from ..store import AsyncStore, Owner, Store, StoreError, open_store
from . import page
from .auth import KeyCheck
from .background import check_background, start_background
from .body import read_json_sized
from .chat import ChatCompletionRequest, chat_request_error, parse_chat_request, to_responses_body
from .compaction import SECRET_NAME, CompactionSeal
from .endpoints import cancel_response, compact, delete_response, get_response, list_input_items
from .engines.base import Engine
from .engines.spec import build_engine
from .errors import ErrorKind, ServerError, error_payload, http_status
from .exchange import ChatWire, EngineCall, ResponsesWire, Wire
from .hosted import containers
from .hosted.backends import HostedService, chain_items
from .hosted.loop import HostedRun
from .inspect import inspect
from .metrics import Metrics
from .offload import maybe_off_loop
from .respond import Plan, RequestError, ResponseRun, capabilities_for, parse_body, plan_for
from .settings import Settings
from .state import ServerState
from .stored import NOTHING_BEFORE, Recorder, TurnRenderer, input_items, load_previous, owner_of, resolve_references
from .websocket import serve_socket

log = logging.getLogger("harmony_responses.server")

_RESPONSES = "/v1/responses"
_CHAT = "/v1/chat/completions"
_INSPECT = "/v1/harmony/inspect"
_OWNER = "harmony-responses"


def _error_response(exc: ServerError | RequestError) -> JSONResponse:
    if isinstance(exc, RequestError):
        return JSONResponse(exc.to_body(), status_code=exc.status)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.server
    return state


async def _read(request: Request, state: ServerState) -> tuple[dict[str, Any], int]:
    """The body (keys checked first) and its size: past `offload.OFFLOAD_BYTES` the CPU-heavy steps (parsing,
    validating, rendering and tokenizing) run on a worker thread, so a large request never pauses a stream."""
    state.keys.check(request.headers)
    return await read_json_sized(
        request.headers,
        request.stream(),
        max_bytes=state.settings.max_body_bytes,
        max_depth=state.settings.max_json_depth,
    )


def _call(
    state: ServerState,
    plan: Plan,
    wire: Wire,
    *,
    stream: bool,
    endpoint: str,
    received_at: float,
    recorder: Recorder | None = None,
) -> EngineCall:
    state.acquire()
    # A streamed run writes to the wire's sink; a whole one keeps no events (its response is the builder's).
    sink = wire.sink if stream else NullSink()
    stored = recorder is not None and recorder.keeps
    run = ResponseRun(plan, state.encoding, sink, model=state.settings.model, stored=stored, seal=state.reasoning.seal)
    return EngineCall(
        engine=state.engine,
        run=run,
        wire=wire,
        stream=stream,
        metrics=state.metrics,
        endpoint=endpoint,
        received_at=received_at,
        release=state.release,
        recorder=recorder,
        drain=state.drain,
    )


async def _background(
    state: ServerState, plan: Plan, recorder: Recorder, wire: Wire, *, stream: bool, owner: Owner
) -> Response:
    """A `background: true` response: stored `queued` and run by this process (`server.background`)."""
    state.acquire()
    sink = wire.sink if stream else NullSink()
    settings = state.settings
    run = ResponseRun(
        plan, state.encoding, sink, model=settings.model, stored=True, seal=state.reasoning.seal, background=True
    )
    return await start_background(
        engine=state.engine,
        run=run,
        recorder=recorder,
        store=state.store,
        runs=state.background,
        metrics=state.metrics,
        release=state.release,
        stream=stream,
        owner=owner,
        drain=state.drain,
    )


async def responses(request: Request, state: ServerState) -> Response | EngineCall:
    received_at = time.monotonic()
    hosted: HostedRun | None = None
    try:
        raw, size = await _read(request, state)
        settings = state.settings
        capabilities = state.hosted.capabilities(capabilities_for(state.engine.info))
        body = await maybe_off_loop(size, parse_body, raw, capabilities, hosted_tools=settings.hosted_tools)
        owner = owner_of(request.headers)
        if body.background:
            check_background(body.store)
        body = await resolve_references(body, state.store, owner)
        prior = NOTHING_BEFORE
        if body.previous_response_id is not None:
            prior = await load_previous(state.store, body.previous_response_id, owner, state.renderer.key)
        chain: list[dict[str, Any]] = []
        if body.previous_response_id is not None and state.hosted.wants_chain(raw):
            chain = await chain_items(state.store, body.previous_response_id, owner)
        hosted = await state.hosted.open(raw, chain)  # closed by the run's tool loop, or below if it never starts
        plan = await maybe_off_loop(size, plan_for, state, body, prior, hosted)
        store = state.store if body.store is not False else None
        items = await maybe_off_loop(size, input_items, body)  # each item as stored JSON
        recorder = Recorder(store, owner, plan, items, state.renderer)
        wire = ResponsesWire(settings.reasoning_events)
        if body.background:
            return await _background(state, plan, recorder, wire, stream=bool(body.stream), owner=owner)
        return _call(
            state, plan, wire, stream=bool(body.stream), endpoint=_RESPONSES, received_at=received_at, recorder=recorder
        )
    except (ServerError, RequestError) as exc:
        if hosted is not None:
            await hosted.aclose()
        state.metrics.requests.labels(_RESPONSES, str(exc.status)).inc()
        return _error_response(exc)


async def chat_completions(request: Request, state: ServerState) -> Response | EngineCall:
    received_at = time.monotonic()
    try:
        raw, size = await _read(request, state)
        chat, plan = await maybe_off_loop(size, _chat_plan, raw, state)
        wire = ChatWire(chat.include_usage)
        return _call(state, plan, wire, stream=bool(chat.stream), endpoint=_CHAT, received_at=received_at)
    except (ServerError, RequestError) as exc:
        state.metrics.requests.labels(_CHAT, str(exc.status)).inc()
        return _error_response(exc)


def _chat_plan(raw: dict[str, Any], state: ServerState) -> tuple[ChatCompletionRequest, Plan]:
    """A Chat Completions body read, mapped onto the Responses path, and planned (on a worker thread if large)."""
    chat: ChatCompletionRequest = parse_chat_request(raw)
    mapped, items = to_responses_body(chat, state.settings.media)
    try:
        body = parse_body(mapped, capabilities_for(state.engine.info))
        plan = plan_for(state, body, NOTHING_BEFORE, seed=chat.seed, max_output_tokens=chat.budget)
    except RequestError as exc:
        raise chat_request_error(exc, items) from exc
    return chat, plan


def _model_card(state: ServerState) -> dict[str, Any]:
    owner = f"{_OWNER} ({state.engine.info.kind} engine)"  # `demo` says so here too: it is not a model
    return {"id": state.settings.model, "object": "model", "created": state.started_at, "owned_by": owner}


async def models(request: Request) -> Response:
    state = _state(request)
    try:
        state.keys.check(request.headers)
    except ServerError as exc:
        return _error_response(exc)
    return JSONResponse({"object": "list", "data": [_model_card(state)]})


async def model(request: Request) -> Response:
    state = _state(request)
    try:
        state.keys.check(request.headers)
        name = request.path_params["model_id"]
        if name != state.settings.model:
            served = state.settings.model
            raise ServerError(ErrorKind.NOT_FOUND, f"no model named {name!r}: this server serves {served!r}")
    except ServerError as exc:
        return _error_response(exc)
    return JSONResponse(_model_card(state))


async def inspect_completion(request: Request, state: ServerState) -> Response:
    """The page's inspector: the bridge run on a raw completion given with a request (see `inspect`)."""
    try:
        raw, size = await _read(request, state)
        found = await maybe_off_loop(size, inspect, raw, state.encoding, model=state.settings.model)
    except (ServerError, RequestError) as exc:
        return _error_response(exc)
    return JSONResponse(found)


async def health(request: Request) -> Response:
    """Liveness: the process answers. No key is needed, so nothing here says where the engine is."""
    state = _state(request)
    return JSONResponse(
        {
            "status": _spec.PROBE_DRAINING if state.drain.draining else _spec.PROBE_ALIVE,
            "model": state.settings.model,
            "pid": os.getpid(),
            "engine": {"kind": state.engine.info.kind, "active_requests": state.engine.active},
            "in_flight": state.in_flight,
        }
    )


async def ready(request: Request) -> Response:
    """Readiness, for load balancers and orchestrators: 200 when the engine answers, else 503 saying why."""
    state = _state(request)
    problem = "the server is shutting down" if state.drain.draining else await state.engine.check_ready()
    if problem is None:
        return JSONResponse({"status": _spec.PROBE_READY, "model": state.settings.model})
    body = {"status": _spec.PROBE_NOT_READY, "error": error_payload(ErrorKind.NOT_READY, problem)}
    return JSONResponse(body, status_code=http_status(ErrorKind.NOT_READY), headers={"Retry-After": "1"})


async def metrics(request: Request) -> Response:
    state = _state(request)
    return Response(state.metrics.render(), media_type=state.metrics.content_type)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kinds = {404: ErrorKind.NOT_FOUND, 405: ErrorKind.METHOD_NOT_ALLOWED}
    kind = kinds.get(exc.status_code, ErrorKind.BAD_REQUEST)
    message = f"{request.method} {request.url.path}: " + (
        "no such endpoint" if exc.status_code == 404 else str(exc.detail)
    )
    headers = dict(exc.headers or {})
    return JSONResponse({"error": error_payload(kind, message)}, status_code=exc.status_code, headers=headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    body = {"error": error_payload(ErrorKind.INTERNAL, f"internal server error ({type(exc).__name__})")}
    return JSONResponse(body, status_code=500)


_ALWAYS = ("/health", "/ready", "/metrics")  # answered while draining, for the orchestrator
_SHUTTING_DOWN = json.dumps(
    {"error": error_payload(ErrorKind.SHUTTING_DOWN, "the server is shutting down; retry on another instance")}
).encode()


async def _turned_away(scope: Scope, send: Send) -> None:
    """A request that arrived while the worker drains: 503 with `Retry-After`, and the connection closed."""
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1012})  # service restart
        return
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(_SHUTTING_DOWN)).encode()),
        (b"retry-after", b"1"),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": http_status(ErrorKind.SHUTTING_DOWN), "headers": headers})
    await send({"type": "http.response.body", "body": _SHUTTING_DOWN, "more_body": False})


Handler = Callable[[Request, ServerState], Awaitable[Response | EngineCall]]
_ENGINE_ROUTES: dict[str, Handler] = {_RESPONSES: responses, _CHAT: chat_completions}
StateHandler = Callable[[Request, ServerState], Awaitable[Response]]


def _with_state(handler: StateHandler) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await handler(request, _state(request))

    return endpoint


class App:
    """The ASGI entry point: engine-backed POSTs go straight to their handlers, everything else to Starlette.

    A streamed response writes once per engine output; Starlette's middleware would wrap every one of
    those writes in two more coroutines, so the two engine endpoints are dispatched here, with the same
    guarantee Starlette gives: an unexpected exception before the response starts is a 500 with the
    spec's error body (and is logged).
    """

    def __init__(self, starlette: Starlette, state: ServerState) -> None:
        self.starlette = starlette
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.state.drain.draining and scope["type"] in ("http", "websocket") and scope["path"] not in _ALWAYS:
            await _turned_away(scope, send)
            return
        if scope["type"] == "websocket" and scope["path"] == _RESPONSES:
            await serve_socket(scope, receive, send, self.state)
            return
        if scope["type"] == "http" and scope["method"] == "POST":
            handler = _ENGINE_ROUTES.get(scope["path"])
            if handler is not None:
                await self._engine_call(handler, scope, receive, send)
                return
        await self.starlette(scope, receive, send)

    async def _engine_call(self, handler: Handler, scope: Scope, receive: Receive, send: Send) -> None:
        response: Response | EngineCall | None = None
        try:
            response = await handler(Request(scope, receive), self.state)
            await response(scope, receive, send)
        except Exception as exc:
            log.exception("internal error on POST %s", scope["path"], exc_info=exc)
            if isinstance(response, EngineCall) and response.status is not None:
                raise  # the response has started: uvicorn closes the connection
            body = {"error": error_payload(ErrorKind.INTERNAL, f"internal server error ({type(exc).__name__})")}
            await JSONResponse(body, status_code=500)(scope, receive, send)


async def _recover_now_and_then(store: AsyncStore, interval: float) -> None:
    """Mark failed the unfinished responses of server processes that died (a sibling killed, a host lost)."""
    while True:
        await asyncio.sleep(interval)
        try:
            failed = await store.recover()
        except StoreError as exc:
            log.warning("store recovery failed (will retry): %s", exc)
            continue
        if failed:
            log.warning("marked %d responses of a stopped server process failed", failed)


def create_app(
    settings: Settings,
    engine: Engine | None = None,
    encoding: HarmonyEncoding | None = None,
    store: Store | None = None,
) -> App:
    """The application for `settings` (the engine and the store are made from `settings` unless given).

    The store is opened here (`StoreError` for a bad URL or an unreachable database), so a worker that
    cannot store never starts serving.
    """
    enc = encoding or load_harmony_encoding(_spec.ENCODING_NAME)
    eng = engine or build_engine(
        settings.engine,
        enc,
        model=settings.model,
        timeout=settings.engine_timeout,
        max_connections=settings.max_concurrency,
    )
    opened = store or open_store(settings.store_url())
    key = settings.compaction_key
    seal = CompactionSeal.from_passphrase(key) if key else CompactionSeal(opened.secret(SECRET_NAME))
    sealing = settings.reasoning_key
    reasoning = (
        ReasoningSeal.from_passphrase(sealing) if sealing else ReasoningSeal(opened.secret(REASONING_SECRET_NAME))
    )
    responses_store = AsyncStore(opened)
    counters = Metrics()
    state = ServerState(
        metrics=counters,
        hosted=HostedService.from_settings(settings, counters),
        settings=settings,
        encoding=enc,
        engine=eng,
        keys=KeyCheck(settings.api_keys),
        store=responses_store,
        seal=seal,
        renderer=TurnRenderer(enc),
        reasoning=reasoning,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sweeper = asyncio.ensure_future(_recover_now_and_then(responses_store, settings.store_recover_interval))
        try:
            yield
        finally:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)
            await state.background.shutdown()  # background responses still running: failed, settled in the store
            try:
                await eng.aclose()
                await state.hosted.aclose()
            finally:
                await responses_store.close()

    async def unreachable(request: Request) -> Response:  # App dispatches these POSTs; Starlette answers 405s
        raise HTTPException(405)

    starlette = Starlette(
        routes=[
            Route(_RESPONSES, unreachable, methods=["POST"]),
            Route(_CHAT, unreachable, methods=["POST"]),
            Route(_RESPONSES + "/compact", _with_state(compact), methods=["POST"]),
            Route(_RESPONSES + "/{response_id}", _with_state(get_response), methods=["GET"]),
            Route(_RESPONSES + "/{response_id}", _with_state(delete_response), methods=["DELETE"]),
            Route(_RESPONSES + "/{response_id}/input_items", _with_state(list_input_items), methods=["GET"]),
            Route(_RESPONSES + "/{response_id}/cancel", _with_state(cancel_response), methods=["POST"]),
            *containers.routes(),  # the code interpreter's containers and their files
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", model, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/ready", ready, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route(_INSPECT, _with_state(inspect_completion), methods=["POST"]),
            Route("/", page.index, methods=["GET"]),
            Route("/favicon.ico", page.favicon, methods=["GET"]),
            Route("/page/{name}", page.page_asset, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
        lifespan=lifespan,
    )
    starlette.state.server = state
    return App(starlette, state)


def app_from_env() -> App:
    """The application for the `HARMONY_RESPONSES_*` environment (uvicorn's factory in each worker)."""
    return create_app(Settings.from_env(os.environ))
