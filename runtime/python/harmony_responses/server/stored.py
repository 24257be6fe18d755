"""Stored responses, the server's side: whose they are, what a continuation loads, and what a response leaves.

- **Owner.** Every stored object belongs to the API key that made it (`Owner.of_api_key`, a digest);
  another key gets the spec's not-found error, exactly as for an object that never existed.
- **Continuing.** `load_previous` loads the chain a `previous_response_id` ends (its Harmony messages and
  the names of its function calls); `resolve_references` replaces `item_reference` input items with the
  stored items they name. Store errors become the spec's request errors (400 `previous_response_not_found`,
  `item_reference_not_found`).
- **Recording.** A `Recorder` stores one response: `started` (`begin`: the response in progress, its input
  items and input messages) before the client sees `response.created`, and `ended` (`finish`: the final
  resource, the output items and the messages the model wrote, analysis included) before the client
  sees the terminal event, so a client is never told of an end the store does not hold. A response whose
  client left is stored failed (`abandoned`). A store that cannot record raises `NotRecorded`: the server
  then ends the exchange without the terminal event (the stream is cut; a whole response is a 503).
  A background response (`server.background`) is begun `queued` at once (`queue`) and, when it was
  cancelled, stored with status `cancelled` (`cancelled`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from .._tables import ItemKind
from .._tables import spec as _spec
from ..bridge import KnownCalls, RequestError, Status, Verbatim, random_id
from ..encoding import HarmonyEncoding
from ..models import Author, Message, Role
from ..store import (
    AsyncStore,
    ItemNotFound,
    Owner,
    Rendering,
    ResponseInProgress,
    ResponseNotFound,
    ResponseStatus,
    StoreError,
)
from ..types import (
    AssistantMessageItemParam,
    CompactionSummaryItemParam,
    CreateResponseBody,
    DeveloperMessageItemParam,
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    ItemParam,
    ItemParamAdapter,
    ItemReferenceParam,
    ReasoningItemParam,
    SystemMessageItemParam,
    UserMessageItemParam,
)
from .auth import presented_key
from .compaction import COMPACTION_ID_PREFIX
from .errors import ErrorKind, ServerError
from .respond import Plan, ResponseRun

log = logging.getLogger("harmony_responses.server")

# Ids for input items that came without one (the input-items list names every item). The spec names the
# prefixes of output kinds; the two input-only kinds have none there, so this table holds them.
_MESSAGE_PREFIX = _spec.ITEM_KINDS[ItemKind.MESSAGE]["id_prefix"]
_MESSAGE_TYPE = _spec.ITEM_KINDS[ItemKind.MESSAGE]["type"]
_OUTPUT_TEXT = _spec.ITEM_KINDS[ItemKind.MESSAGE]["text"]["part"]
_INPUT_TEXT = "input_text"  # the input text part's type, as the bridge reads it
_COMPLETED_STATUS = Status.COMPLETED.value
INPUT_ID_PREFIXES: dict[type[Any], str] = {
    UserMessageItemParam: _MESSAGE_PREFIX,
    SystemMessageItemParam: _MESSAGE_PREFIX,
    DeveloperMessageItemParam: _MESSAGE_PREFIX,
    AssistantMessageItemParam: _MESSAGE_PREFIX,
    FunctionCallItemParam: _spec.ITEM_KINDS[ItemKind.FUNCTION_CALL]["id_prefix"],
    ReasoningItemParam: _spec.ITEM_KINDS[ItemKind.REASONING]["id_prefix"],
    FunctionCallOutputItemParam: _spec.INPUT_ITEM_ID_PREFIX_FUNCTION_CALL_OUTPUT,
    CompactionSummaryItemParam: COMPACTION_ID_PREFIX,
}
_OTHER_PREFIX = _spec.INPUT_ITEM_ID_PREFIX_OTHER


class TurnRenderer:
    """Renders a turn's messages one by one, under a key naming the encoding and how it renders.

    The key hashes the encoding's name and its rendering of a probe of every header feature (a user
    message, analysis, an answer, a call with its recipient and content type, a tool's output): token ids
    stored under another key, by a release that renders differently, are never used.
    """

    def __init__(self, encoding: HarmonyEncoding) -> None:
        self.encoding = encoding
        digest = hashlib.sha256(encoding.name.encode())
        for message in _probe():
            digest.update(repr(encoding.render(message)).encode())
        self.key = digest.hexdigest()[:32]

    def __call__(self, messages: Sequence[Message]) -> Rendering:
        return Rendering(self.key, [self.encoding.render(m) for m in messages])


def _probe() -> list[Message]:
    functions = _spec.HEADER_FUNCTION_NAMESPACE + _spec.HEADER_NAMESPACE_SEPARATOR + "probe"
    return [
        Message.from_role_and_content(Role.USER, "probe"),
        Message.from_role_and_content(Role.ASSISTANT, "probe").with_channel(_spec.CHANNEL_REASONING),
        Message.from_role_and_content(Role.ASSISTANT, "probe").with_channel(_spec.CHANNEL_ANSWER),
        Message.from_role_and_content(Role.ASSISTANT, "{}")
        .with_channel(_spec.CHANNEL_TOOL_CALLS)
        .with_recipient(functions)
        .with_content_type(_spec.SPELLING_CONSTRAIN + _spec.CONTENT_TYPE_FUNCTION_ARGUMENTS),
        Message.from_author_and_content(Author.new(Role.TOOL, functions), "{}")
        .with_recipient(Role.ASSISTANT.value)
        .with_channel(_spec.CHANNEL_TOOL_CALLS),
    ]


def owner_of(headers: Mapping[str, str]) -> Owner:
    """The owner of what a request stores: the key it presents (checked already when keys are configured)."""
    return Owner.of_api_key(presented_key(headers))


# -- continuing ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prior:
    """The turns a request continues: their Harmony messages, oldest first, their calls (`KnownCalls.to_json()`), and
    beside each message its token ids when they are known (None where the prompt must encode it)."""

    messages: list[Message] = field(default_factory=list)
    calls: dict[str, Any] = field(default_factory=dict)  # `KnownCalls.to_json()` of the turns' calls
    rendered: Sequence[Sequence[int] | None] = field(default_factory=list)


NOTHING_BEFORE = Prior()


def previous_error(exc: ResponseNotFound | ResponseInProgress, requested: str) -> RequestError:
    """The spec's 400 for a `previous_response_id` the store cannot continue."""
    if isinstance(exc, ResponseInProgress):
        return RequestError.of(_spec.REQUEST_ERROR_PREVIOUS_RESPONSE_IN_PROGRESS, "previous_response_id", id=requested)
    if exc.response_id != requested:  # an earlier response of the chain was deleted
        return RequestError.of(
            _spec.REQUEST_ERROR_PREVIOUS_RESPONSE_BROKEN, "previous_response_id", id=requested, missing=exc.response_id
        )
    return RequestError.of(_spec.REQUEST_ERROR_PREVIOUS_RESPONSE_UNKNOWN, "previous_response_id", id=requested)


def store_failed(exc: StoreError) -> ServerError:
    log.error("the response store failed: %s", exc)
    return ServerError(ErrorKind.STORE_FAILED, f"the response store is unavailable: {exc}")


async def load_previous(store: AsyncStore, response_id: str, owner: Owner, rendering_key: str) -> Prior:
    """The chain `response_id` ends, or the spec's error (unknown, deleted, another key's, unfinished)."""
    try:
        history = await store.load_history(response_id, owner)
    except (ResponseNotFound, ResponseInProgress) as exc:
        raise previous_error(exc, response_id) from None
    except StoreError as exc:
        raise store_failed(exc) from exc
    return Prior(history.messages(), history.calls(), history.rendering(rendering_key))


def _as_input(stored: Mapping[str, Any], where: str) -> ItemParam:
    try:
        item: ItemParam = ItemParamAdapter.validate_python(dict(stored))
    except ValidationError as exc:
        first = exc.errors()[0]
        reason = f"{'.'.join(str(p) for p in first['loc'][1:]) or 'the item'}: {first['msg']}"
        raise RequestError.of(
            _spec.REQUEST_ERROR_ITEM_REFERENCE_NOT_INPUT, where, id=stored.get("id"), reason=Verbatim(reason)
        ) from None
    return item


async def resolve_references(body: CreateResponseBody, store: AsyncStore, owner: Owner) -> CreateResponseBody:
    """`body` with every `item_reference` input item replaced by the stored item it names (this owner's)."""
    if body.input is None or isinstance(body.input, str):
        return body
    if not any(isinstance(item, ItemReferenceParam) for item in body.input):
        return body
    items: list[ItemParam] = []
    for i, item in enumerate(body.input):
        if isinstance(item, ItemReferenceParam):
            try:
                stored = await store.get_item(item.id, owner)
            except ItemNotFound:
                where = f"input[{i}].id"
                raise RequestError.of(_spec.REQUEST_ERROR_ITEM_REFERENCE_UNKNOWN, where, id=item.id) from None
            except StoreError as exc:
                raise store_failed(exc) from exc
            item = _as_input(stored, f"input[{i}]")
        items.append(item)
    return body.model_copy(update={"input": items})


# -- what a response leaves -------------------------------------------------------------------------------


_MESSAGES = (UserMessageItemParam, SystemMessageItemParam, DeveloperMessageItemParam, AssistantMessageItemParam)


def _as_listed_message(item: Any, data: dict[str, Any]) -> dict[str, Any]:
    """A message item as OpenAI lists input items (the openai SDK reads them as `ResponseInputMessageItem`): its
    `type`, its content as a list of typed parts (a string becomes one text part), and a `status`."""
    listed = {**data, "type": _MESSAGE_TYPE, "status": data.get("status") or _COMPLETED_STATUS}
    if isinstance(item.content, str):
        if isinstance(item, AssistantMessageItemParam):
            listed["content"] = [{"type": _OUTPUT_TEXT, "text": item.content, "annotations": []}]
        else:
            listed["content"] = [{"type": _INPUT_TEXT, "text": item.content}]
    return listed


def input_items(body: CreateResponseBody) -> list[dict[str, Any]]:
    """The request's input items as JSON, each with an id (made for those that came without one)."""
    if body.input is None:
        return []
    given: list[Any] = [UserMessageItemParam(content=body.input)] if isinstance(body.input, str) else body.input
    out = []
    for item in given:
        data: dict[str, Any] = item.model_dump(mode="json", by_alias=True, exclude_none=True)
        if isinstance(item, _MESSAGES):
            data = _as_listed_message(item, data)
        if not data.get("id"):
            data = {"id": random_id(INPUT_ID_PREFIXES.get(type(item), _OTHER_PREFIX)), **data}
        out.append(data)
    return out


def input_calls(body: CreateResponseBody) -> dict[str, Any]:
    """The calls a request sends as input (function calls and vendor-prefixed calls), as `KnownCalls.to_json()`."""
    if body.input is None or isinstance(body.input, str):
        return {}
    return KnownCalls.of_items(body.input).to_json()


def output_calls(run: ResponseRun) -> dict[str, Any]:
    """The calls the model made, as `KnownCalls.to_json()`."""
    response = run.response()
    return KnownCalls.of_items(response.output if response is not None else []).to_json()


class NotRecorded(Exception):
    """The store could not record a response's start or end (the client must not be told it ended)."""


OnEnd = Callable[[ResponseRun, list[Sequence[int]]], None]
"""Called with a run that ended without failing and its turn's token ids (input then output messages)."""


class Recorder:
    """What one response leaves behind: in the store when `store` is given (`store: true`), and in `on_end`
    (a WebSocket connection's cache) when it ends without failing. Each turn message is rendered alone
    (`render`) and its token ids kept beside it, so a continuation is assembled, not encoded again."""

    def __init__(
        self,
        store: AsyncStore | None,
        owner: Owner,
        plan: Plan,
        items: Sequence[Mapping[str, Any]],
        render: TurnRenderer,
        *,
        on_end: OnEnd | None = None,
    ) -> None:
        self.store = store
        self.owner = owner
        self.plan = plan
        self.items = list(items)
        self.render = render
        self.on_end = on_end
        self._input: Rendering | None = None
        self._begun = False
        self._finished = False
        self.cancelled = False  # a background response cancelled: its end is stored `cancelled`, not `failed`

    def _input_rendering(self) -> Rendering:
        if self._input is None:
            self._input = self.render(self.plan.parts.turn)
        return self._input

    @property
    def begun(self) -> bool:
        """Whether the store holds the response (its start was stored)."""
        return self._begun

    @property
    def keeps(self) -> bool:
        """Whether the response is stored (echoed as `store: true`)."""
        return self.store is not None

    async def started(self, run: ResponseRun) -> None:
        """Store the response in progress (before `response.created` leaves): `RequestError` when what it
        continues went meanwhile, `ServerError` when the store fails."""
        if self.store is None:
            return
        await self._begin(run, run.builder.snapshot(Status.IN_PROGRESS).model_dump(mode="json"))

    async def queue(self, run: ResponseRun) -> dict[str, Any]:
        """Store a background response `queued`, before the engine is asked (`begin`'s errors as `started`'s);
        return the resource stored."""
        resource = self.queued_resource(run)
        await self._begin(run, resource)
        return resource

    @staticmethod
    def queued_resource(run: ResponseRun) -> dict[str, Any]:
        resource: dict[str, Any] = run.builder.snapshot(Status.IN_PROGRESS).model_dump(mode="json")
        resource["status"] = ResponseStatus.QUEUED.value
        return resource

    async def _begin(self, run: ResponseRun, resource: dict[str, Any]) -> None:
        assert self.store is not None
        body = self.plan.body
        try:
            await self.store.begin(
                run.builder.response_id,
                owner=self.owner,
                resource=resource,
                input_items=self.items,
                input_messages=self.plan.parts.turn,
                previous_response_id=body.previous_response_id,
                calls=input_calls(body),
                rendered=self._input_rendering(),
            )
        except (ResponseNotFound, ResponseInProgress) as exc:
            assert body.previous_response_id is not None  # nothing else is looked up by `begin`
            raise previous_error(exc, body.previous_response_id) from None
        except StoreError as exc:
            raise store_failed(exc) from exc
        self._begun = True

    async def ended(self, run: ResponseRun) -> None:
        """Store the response's end (before the terminal event leaves); `NotRecorded` if the store cannot."""
        wanted = self.on_end is not None or (self.store is not None and self._begun and not self._finished)
        if not wanted:
            return
        written = run.builder.messages()
        output = self.render(written)
        if self.store is not None and self._begun and not self._finished:
            response = run.response()
            assert response is not None, "a run that ended has its final response"
            resource = response.model_dump(mode="json")
            if self.cancelled:
                resource["status"], resource["error"] = ResponseStatus.CANCELLED.value, None
            try:
                await self.store.finish(
                    run.builder.response_id,
                    resource=resource,
                    output_items=resource["output"],
                    output_messages=written,
                    calls=output_calls(run),
                    rendered=output,
                )
            except Exception as exc:  # the store's errors, and anything else: never claim an end not stored
                log.error("response %s could not be stored: %s", run.builder.response_id, exc)
                raise NotRecorded(str(exc)) from exc
            self._finished = True
        response = run.response()
        if self.on_end is not None and response is not None and response.status != Status.FAILED.value:
            self.on_end(run, [*self._input_rendering().tokens, *output.tokens])

    async def abandoned(self, run: ResponseRun) -> None:
        """The exchange is over and the run did not end (its client left): store it failed."""
        if self.store is None or not self._begun or self._finished:
            return
        run.fail(ErrorKind.CLIENT_DISCONNECTED, "the client disconnected before the response ended")
        try:
            await self.ended(run)
        except NotRecorded:
            pass  # logged; the store's recovery marks it failed when this process is gone
