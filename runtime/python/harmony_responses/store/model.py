"""What the response store keeps and hands back: owners, statuses, turns, pages of items, and its errors.

Every backend (memory, SQLite, PostgreSQL) speaks these types, so the server never sees a row or a
connection. Responses and items travel as plain JSON objects (`dict[str, Any]`, the Open Responses wire
form); Harmony messages as `harmony_responses.Message`, stored in their reference JSON form.
"""

from __future__ import annotations

import hashlib
import sys
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .._tables import spec as _spec
from ..models import Message

# Open Responses facts this package needs that spec/ does not hold yet, in one place for the lead to move:
# the response statuses (the schema's `status` is a free string; these are the values servers use), the
# error a response carries when its server stopped before it finished, and the input-items list endpoint's
# paging rules (the OpenAPI document does not describe `GET /responses/{id}/input_items`; these follow the
# hosted API that clients are written against).


class ResponseStatus(str, Enum):
    """A response's `status`."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    INCOMPLETE = "incomplete"
    FAILED = "failed"
    CANCELLED = "cancelled"  # a background response cancelled before it ended (`POST /responses/{id}/cancel`)


CallRecord = str | Sequence[str | None]
"""What the caller keeps of a call, under its call id (the server: `[author, channel]`); stored as JSON."""
INTERRUPTED_ERROR: dict[str, str] = dict(_spec.INTERRUPTED_ERROR)
LIST_OBJECT = _spec.SERVER_OBJECT_LIST
LIST_LIMIT_DEFAULT = _spec.INPUT_ITEMS_LIMIT_DEFAULT
LIST_LIMIT_MAX = _spec.INPUT_ITEMS_LIMIT_MAX
LIST_ORDER_DEFAULT = _spec.INPUT_ITEMS_ORDER_DEFAULT
SECRET_BYTES = 32
TERMINAL_STATUSES = frozenset(
    {ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE, ResponseStatus.FAILED, ResponseStatus.CANCELLED}
)


class Order(str, Enum):
    """The order of a page of items: `asc` is the order the items were given in."""

    ASC = "asc"
    DESC = "desc"


_ANONYMOUS = "anonymous"
_OWNER_DOMAIN = b"harmony-responses owner\x00"


@dataclass(frozen=True, slots=True)
class Owner:
    """Who a stored object belongs to: a one-way digest of the API key that created it, never the key.

    `Owner.of_api_key(None)` is the owner of requests that carried no key (servers without keys).
    """

    digest: str

    @classmethod
    def of_api_key(cls, api_key: str | None) -> Owner:
        """The owner for an API key: SHA-256 over a domain prefix and the key, in hex."""
        if api_key is None:
            return cls(_ANONYMOUS)
        return cls(hashlib.sha256(_OWNER_DOMAIN + api_key.encode("utf-8")).hexdigest())


@dataclass(frozen=True, slots=True)
class Rendering:
    """Each message's token ids as an encoding rendered it alone (`HarmonyEncoding.render`), and `key`, which
    names that encoding and its rules: tokens rendered under another key are never used."""

    key: str
    tokens: Sequence[Sequence[int]]


@dataclass(frozen=True, slots=True)
class Turn:
    """One stored response as history: the messages its input added and the messages it produced, the
    calls among its input and output items (call id → the caller's record of the call), and, when both halves
    were rendered under one key, every message's token ids."""

    response_id: str
    status: ResponseStatus
    input_messages: tuple[Message, ...]
    output_messages: tuple[Message, ...]
    calls: Mapping[str, CallRecord] = field(default_factory=dict)
    rendered_by: str | None = None
    rendered: tuple[list[int], ...] | None = None  # input then output messages' token ids

    def messages(self) -> list[Message]:
        return [*self.input_messages, *self.output_messages]

    def rendering(self, key: str) -> list[list[int] | None]:
        """Each message's token ids if they were rendered under `key`, else None for each."""
        if self.rendered_by == key and self.rendered is not None:
            return list(self.rendered)
        return [None] * (len(self.input_messages) + len(self.output_messages))


@dataclass(frozen=True, slots=True)
class History:
    """A chain of responses, oldest first, ending with the one asked for."""

    turns: tuple[Turn, ...]

    def messages(self) -> list[Message]:
        """Every turn's messages in order: what the next prompt renders before the new input."""
        return [m for turn in self.turns for m in turn.messages()]

    def rendering(self, key: str) -> list[list[int] | None]:
        """Beside `messages()`: each message's token ids when rendered under `key` (None where unknown)."""
        return [tokens for turn in self.turns for tokens in turn.rendering(key)]

    def calls(self) -> dict[str, CallRecord]:
        """call id → record of every call in the chain (a later turn wins a reused id): what a new output
        item needs to find the call it answers (Harmony messages carry no call ids)."""
        records: dict[str, CallRecord] = {}
        for turn in self.turns:
            records.update(turn.calls)
        return records


@dataclass(frozen=True, slots=True)
class ItemPage:
    """One page of a response's input items, as the list endpoint returns it."""

    data: tuple[dict[str, Any], ...]
    has_more: bool

    @property
    def first_id(self) -> str | None:
        return str(self.data[0]["id"]) if self.data else None

    @property
    def last_id(self) -> str | None:
        return str(self.data[-1]["id"]) if self.data else None

    def to_json(self) -> dict[str, Any]:
        """The list object: `object`, `data`, `first_id`, `last_id`, `has_more`."""
        return {
            "object": LIST_OBJECT,
            "data": list(self.data),
            "first_id": self.first_id,
            "last_id": self.last_id,
            "has_more": self.has_more,
        }


@dataclass(frozen=True, slots=True)
class EventPage:
    """A background response's stored stream events after a sequence number, and its status when they were read.

    `events` are (sequence number, the event's SSE frame as sent), in order; `cancel_requested` says whether a
    cancel was asked for (by any process) while it runs."""

    status: ResponseStatus
    events: tuple[tuple[int, str], ...]
    cancel_requested: bool = False

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL_STATUSES


# -- errors ------------------------------------------------------------------------------------------


class StoreError(Exception):
    """Base of every error the store raises."""


class ResponseNotFound(StoreError, LookupError):
    """No response `response_id` for this owner: never stored, deleted, or another owner's.

    When a chain is broken (an earlier response was deleted), `response_id` names the missing one and
    `requested` the one that was asked for.
    """

    def __init__(self, response_id: str, requested: str | None = None) -> None:
        self.response_id = response_id
        self.requested = requested if requested is not None else response_id
        if self.requested == response_id:
            super().__init__(f"response {response_id!r} not found")
        else:
            super().__init__(f"response {self.requested!r} continues {response_id!r}, which is not found")


class ItemNotFound(StoreError, LookupError):
    """No item `item_id` in any response of this owner."""

    def __init__(self, item_id: str) -> None:
        self.item_id = item_id
        super().__init__(f"item {item_id!r} not found")


class ResponseInProgress(StoreError):
    """The response has not finished yet, so it cannot be continued."""

    def __init__(self, response_id: str) -> None:
        self.response_id = response_id
        super().__init__(f"response {response_id!r} is still in progress and cannot be continued yet")


class ResponseNotInProgress(StoreError):
    """`finish` found the response already finished, marked failed by recovery, or deleted."""

    def __init__(self, response_id: str) -> None:
        self.response_id = response_id
        super().__init__(f"response {response_id!r} is no longer in progress (finished, recovered or deleted)")


class DuplicateResponse(StoreError):
    """A response with this id is already stored."""

    def __init__(self, response_id: str) -> None:
        self.response_id = response_id
        super().__init__(f"response {response_id!r} is already stored")


class InvalidArgument(StoreError, ValueError):
    """A caller's argument the store cannot take; `param` names it (`after`, `limit`, `input_items[3]`)."""

    def __init__(self, param: str, message: str) -> None:
        self.param = param
        self.message = message
        super().__init__(f"{param}: {message}")


class MigrationError(StoreError):
    """The database's schema cannot be brought to this version (edited or newer migrations)."""


class StoreURLError(StoreError, ValueError):
    """A store URL that names no backend this package has, or that the backend cannot use."""


# -- checks every backend shares ---------------------------------------------------------------------


def check_items(items: Sequence[Mapping[str, Any]], param: str) -> list[tuple[str, dict[str, Any]]]:
    """(id, item) for each item; every item must be a JSON object with a string `id`."""
    out = []
    for i, item in enumerate(items):
        item_id = item.get("id") if isinstance(item, Mapping) else None
        if not isinstance(item_id, str) or not item_id:
            raise InvalidArgument(f"{param}[{i}]", "every stored item needs a string `id`; assign one before storing")
        out.append((item_id, dict(item)))
    return out


def _is_call_record(value: object) -> bool:
    if isinstance(value, str):
        return bool(value)
    return isinstance(value, (list, tuple)) and bool(value) and all(v is None or isinstance(v, str) for v in value)


def check_calls(calls: Mapping[str, CallRecord] | None, param: str) -> dict[str, CallRecord]:
    """The calls of a turn as a plain dict: every key a call id (a non-empty string), every value the
    caller's record of the call (a non-empty string, or a non-empty list of strings and nulls)."""
    out = dict(calls or {})
    for call_id, record in out.items():
        if not isinstance(call_id, str) or not call_id or not _is_call_record(record):
            raise InvalidArgument(
                param, f"maps call ids to records (a string, or a list of strings and nulls); got {call_id!r}"
            )
    return out


def check_rendering(rendering: Rendering | None, messages: Sequence[Message], param: str) -> Rendering | None:
    """`rendering`, when it has one list of token ids for each of `messages`."""
    if rendering is None:
        return None
    if len(rendering.tokens) != len(messages) or not rendering.key:
        raise InvalidArgument(param, f"needs a key and one token list per message ({len(messages)})")
    return rendering


def pack_tokens(lists: Sequence[Sequence[int]]) -> bytes:
    """Token lists as one blob: little-endian uint32, each list's length then its ids."""
    flat = array("I")
    for tokens in lists:
        flat.append(len(tokens))
        flat.extend(tokens)
    if sys.byteorder == "big":  # pragma: no cover - the format is little-endian everywhere
        flat.byteswap()
    return flat.tobytes()


def unpack_tokens(blob: bytes | memoryview | None) -> tuple[list[int], ...] | None:
    if blob is None:
        return None
    flat = array("I")
    flat.frombytes(bytes(blob))
    if sys.byteorder == "big":  # pragma: no cover
        flat.byteswap()
    out, i, values = [], 0, flat.tolist()
    while i < len(values):
        n = values[i]
        out.append(values[i + 1 : i + 1 + n])
        i += 1 + n
    return tuple(out)


def status_of(resource: Mapping[str, Any]) -> ResponseStatus:
    raw = resource.get("status")
    try:
        return ResponseStatus(raw)
    except ValueError:
        raise InvalidArgument("resource.status", f"{raw!r} is not a response status") from None


def check_resource(resource: Mapping[str, Any], response_id: str, status: ResponseStatus) -> dict[str, Any]:
    """The resource as a dict, after checking that it is the response it is stored as."""
    if resource.get("id") != response_id:
        raise InvalidArgument("resource.id", f"is {resource.get('id')!r}, the response is {response_id!r}")
    if resource.get("status") != status.value:
        raise InvalidArgument("resource.status", f"is {resource.get('status')!r}, the response is {status.value!r}")
    return dict(resource)


def check_page_args(limit: int, order: Order | str) -> Order:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIST_LIMIT_MAX:
        raise InvalidArgument("limit", f"must be an integer from 1 to {LIST_LIMIT_MAX}")
    try:
        return Order(order)
    except ValueError:
        raise InvalidArgument("order", f"must be one of {[o.value for o in Order]}, not {order!r}") from None


def interrupted(resource: Mapping[str, Any]) -> dict[str, Any]:
    """The resource of a response whose server died before it finished: status failed, with the error."""
    out = dict(resource)
    out["status"] = ResponseStatus.FAILED.value
    out["error"] = dict(INTERRUPTED_ERROR)
    return out


def message_dicts(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in messages]


def messages_from(raw: Sequence[dict[str, Any]]) -> tuple[Message, ...]:
    return tuple(Message.from_dict(d) for d in raw)


def paginate(items: Sequence[tuple[str, dict[str, Any]]], after: str | None, limit: int, order: Order) -> ItemPage:
    """A page of `items` (in the order given) as `list_input_items` describes it."""
    walk = list(items) if order is Order.ASC else list(reversed(items))
    start = 0
    if after is not None:
        position = next((i for i, (item_id, _) in enumerate(walk) if item_id == after), None)
        if position is None:
            raise InvalidArgument("after", f"{after!r} is not an input item of this response")
        start = position + 1
    chunk = walk[start : start + limit + 1]
    return ItemPage(tuple(item for _, item in chunk[:limit]), has_more=len(chunk) > limit)
