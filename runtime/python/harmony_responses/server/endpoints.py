"""The endpoints beyond creating a response: stored responses and compaction.

    GET    /v1/responses/{id}               the stored ResponseResource (in progress: its start); with
                                            ?stream=true&starting_after=N a background response's events
    POST   /v1/responses/{id}/cancel        cancel a background response (see `background`)
    DELETE /v1/responses/{id}               {"id", "object": "response.deleted", "deleted": true}
    GET    /v1/responses/{id}/input_items   a page of its input items (?after=ID&limit=1..100&order=asc|desc)
    POST   /v1/responses/compact            the spec's CompactResource (see `compaction`)

A response that is not the caller's (unknown, deleted, or made with another key) is a 404 with the
spec's error body, the same for every case.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._tables import ItemKind
from .._tables import spec as _spec
from ..bridge import RequestError, Status, random_id
from ..bridge.items import NullSink
from ..models import Role
from ..store import LIST_LIMIT_DEFAULT, InvalidArgument, ResponseNotFound, StoreError
from ..store.model import LIST_ORDER_DEFAULT
from ..types import (
    CompactionBody,
    CompactResource,
    InputTextContent,
    Message,
    OutputTextContent,
    UserMessageItemParam,
)
from .background import cancel, stream_again
from .body import read_json
from .compaction import COMPACTION_ID_PREFIX, COMPACTION_PROMPT, as_response_request, kept_user_texts
from .errors import ErrorKind, ServerError
from .exchange import complete
from .respond import ResponseRun, parse_body, plan_request
from .state import ServerState
from .stored import NOTHING_BEFORE, load_previous, owner_of, resolve_references, store_failed

DELETED_OBJECT = _spec.SERVER_OBJECT_DELETED  # the deletion's `object` (the OpenAPI document has no DELETE)
_MESSAGE_PREFIX = _spec.ITEM_KINDS[ItemKind.MESSAGE]["id_prefix"]
_FINAL_PHASE = _spec.ITEM_KINDS[ItemKind.MESSAGE]["phases"]["answer"]
_COMPLETED: Any = Status.COMPLETED.value  # typed as the models' status literal
_USER: Any = Role.USER.value


def _error(exc: ServerError | RequestError) -> JSONResponse:
    if isinstance(exc, RequestError):
        return JSONResponse(exc.to_body(), status_code=exc.status)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def _not_found(response_id: str) -> ServerError:
    return ServerError(
        ErrorKind.NOT_FOUND,
        f"no response {response_id!r} is stored for this API key (never stored, deleted, or another key's)",
    )


def stored_error(exc: ServerError | StoreError, response_id: str) -> JSONResponse:
    """The HTTP error of an endpoint on stored response `response_id`, the same for each of them: not this key's
    response is a 404 (one body for unknown, deleted and another key's), an argument the store cannot take a 400
    naming it, any other store error the server's `store_failed`; a `ServerError` (a refused key, a bad query)
    is answered as it is."""
    if isinstance(exc, ResponseNotFound):
        exc = _not_found(response_id)
    elif isinstance(exc, InvalidArgument):
        exc = ServerError(ErrorKind.BAD_REQUEST, exc.message, param=exc.param)
    elif isinstance(exc, StoreError):
        exc = store_failed(exc)
    return _error(exc)


async def get_response(request: Request, state: ServerState) -> Response:
    response_id = request.path_params["response_id"]
    query = request.query_params
    try:
        state.keys.check(request.headers)
        if query.get("stream", "").lower() == "true":  # a background response's events, again (`background`)
            return await stream_again(state.store, response_id, owner_of(request.headers), query.get("starting_after"))
        resource = await state.store.get(response_id, owner_of(request.headers))
    except (ServerError, StoreError) as exc:
        return stored_error(exc, response_id)
    return JSONResponse(resource)


async def cancel_response(request: Request, state: ServerState) -> Response:
    response_id = request.path_params["response_id"]
    try:
        state.keys.check(request.headers)
        resource = await cancel(state.store, state.background, response_id, owner_of(request.headers))
    except (ServerError, StoreError) as exc:
        return stored_error(exc, response_id)
    return JSONResponse(resource)


async def delete_response(request: Request, state: ServerState) -> Response:
    response_id = request.path_params["response_id"]
    try:
        state.keys.check(request.headers)
        await state.store.delete(response_id, owner_of(request.headers))
    except (ServerError, StoreError) as exc:
        return stored_error(exc, response_id)
    return JSONResponse({"id": response_id, "object": DELETED_OBJECT, "deleted": True})


def _limit(raw: str | None) -> int:
    if raw is None:
        return LIST_LIMIT_DEFAULT
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgument("limit", f"must be an integer, not {raw!r}") from None


async def list_input_items(request: Request, state: ServerState) -> Response:
    response_id = request.path_params["response_id"]
    query = request.query_params
    try:
        state.keys.check(request.headers)
        page = await state.store.list_input_items(
            response_id,
            owner_of(request.headers),
            after=query.get("after"),
            limit=_limit(query.get("limit")),
            order=query.get("order", LIST_ORDER_DEFAULT),
        )
    except (ServerError, StoreError) as exc:
        return stored_error(exc, response_id)
    return JSONResponse(page.to_json())


def _summary(run: ResponseRun) -> str:
    """The model's final answer: the summary (any answer text when it wrote no final one)."""
    response = run.response()
    messages = [item for item in (response.output if response else []) if isinstance(item, Message)]
    final = [m for m in messages if m.phase == _FINAL_PHASE] or messages
    return "".join(part.text for m in final for part in m.content if isinstance(part, OutputTextContent))


async def compact(request: Request, state: ServerState) -> Response:
    settings = state.settings
    try:
        state.keys.check(request.headers)
        raw = await read_json(
            request.headers, request.stream(), max_bytes=settings.max_body_bytes, max_depth=settings.max_json_depth
        )
        body = parse_body(as_response_request(raw))
        owner = owner_of(request.headers)
        body = await resolve_references(body, state.store, owner)
        prior = (
            await load_previous(state.store, body.previous_response_id, owner, state.renderer.key)
            if body.previous_response_id is not None
            else NOTHING_BEFORE
        )
        given: list[Any] = [UserMessageItemParam(content=body.input)] if isinstance(body.input, str) else []
        given += body.input if isinstance(body.input, list) else []
        if not given and not prior.messages:
            raise RequestError.of(_spec.REQUEST_ERROR_COMPACTION_NOT_SUMMARISED, "input")
        asked = body.model_copy(update={"input": [*given, UserMessageItemParam(content=COMPACTION_PROMPT)]})
        plan = plan_request(
            asked,
            state.encoding,
            media=settings.media,
            budget=settings.default_max_output_tokens,
            history=prior.messages,
            calls=prior.calls,
            history_rendered=prior.rendered,
            compaction=state.seal.reader(),
            window=settings.context_window,
            reasoning=state.reasoning.reader(),
        )
        state.acquire()
        try:
            run = ResponseRun(plan, state.encoding, NullSink(), model=settings.model)
            await complete(state.engine, run, state.metrics)
        finally:
            state.release()
        final = run.response()
        if run.failure is not None or final is None:
            error = final.error if final is not None else None
            raise ServerError(run.failure or ErrorKind.ENGINE_FAILED, error.message if error else "compaction failed")
        summary = _summary(run)
        if not summary:
            raise ServerError(ErrorKind.MODEL_OUTPUT_INVALID, "the model wrote no summary of the conversation")
    except (ServerError, RequestError) as exc:
        return _error(exc)
    created = int(time.time())
    kept = kept_user_texts([*prior.messages, *plan.parts.turn[:-1]])  # not the compaction prompt
    output: list[Any] = [
        Message(id=random_id(_MESSAGE_PREFIX), status=_COMPLETED, role=_USER, content=[InputTextContent(text=text)])
        for text in kept
    ]
    output.append(
        CompactionBody(id=random_id(COMPACTION_ID_PREFIX), encrypted_content=state.seal.seal(summary, created))
    )
    resource = CompactResource(
        id=random_id(_spec.RESPONSE_ID_PREFIX), created_at=created, output=output, usage=run.builder.usage()
    )
    return JSONResponse(resource.model_dump(mode="json"))
