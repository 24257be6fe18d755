"""`memory`: the store in this process's memory, for tests and for servers that keep nothing.

Objects are kept as JSON text, as a database would keep them, so what a caller changes after storing
or reading never reaches the store. Everything is gone when the process ends; `recover` has nothing to
do, since no other process can write here.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .base import Store
from .model import (
    SECRET_BYTES,
    TERMINAL_STATUSES,
    CallRecord,
    DuplicateResponse,
    EventPage,
    History,
    ItemNotFound,
    ItemPage,
    Order,
    Owner,
    ResponseInProgress,
    ResponseNotFound,
    ResponseNotInProgress,
    ResponseStatus,
    Turn,
    interrupted,
    messages_from,
    paginate,
    unpack_tokens,
)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass
class _Row:
    owner: Owner
    previous: str | None
    status: ResponseStatus
    resource: str
    input_items: list[tuple[str, str]]
    input_messages: str
    input_calls: dict[str, CallRecord] = field(default_factory=dict)
    output_items: list[tuple[str, str]] = field(default_factory=list)
    output_messages: str = "[]"
    output_calls: dict[str, CallRecord] = field(default_factory=dict)
    rendered_by: str | None = None
    input_rendered: bytes | None = None
    output_rendered: bytes | None = None
    events: list[tuple[int, str]] = field(default_factory=list)
    cancel_requested: bool = False


def _both(input_rendered: bytes | None, output_rendered: bytes | None) -> tuple[list[int], ...] | None:
    first, second = unpack_tokens(input_rendered), unpack_tokens(output_rendered)
    return None if first is None or second is None else first + second


class MemoryStore(Store):
    """Responses in a dict behind one lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, _Row] = {}  # insertion order is creation order
        self._secrets: dict[str, bytes] = {}

    def _insert(
        self,
        response_id: str,
        owner: Owner,
        resource: dict[str, Any],
        input_items: list[tuple[str, dict[str, Any]]],
        input_messages: list[dict[str, Any]],
        previous_response_id: str | None,
        calls: dict[str, CallRecord],
        rendered: tuple[str, bytes] | None,
    ) -> None:
        row = _Row(
            owner,
            previous_response_id,
            ResponseStatus(resource["status"]),
            _dump(resource),
            [(item_id, _dump(item)) for item_id, item in input_items],
            _dump(input_messages),
            dict(calls),
            rendered_by=rendered[0] if rendered else None,
            input_rendered=rendered[1] if rendered else None,
        )
        with self._lock:
            if response_id in self._rows:
                raise DuplicateResponse(response_id)
            if previous_response_id is not None:
                self._finished(previous_response_id, owner)
            self._rows[response_id] = row

    def _finished(self, response_id: str, owner: Owner) -> _Row:
        row = self._rows.get(response_id)
        if row is None or row.owner != owner:
            raise ResponseNotFound(response_id)
        if row.status not in TERMINAL_STATUSES:
            raise ResponseInProgress(response_id)
        return row

    def _complete(
        self,
        response_id: str,
        status: ResponseStatus,
        resource: dict[str, Any],
        output_items: list[tuple[str, dict[str, Any]]],
        output_messages: list[dict[str, Any]],
        calls: dict[str, CallRecord],
        rendered: tuple[str, bytes] | None,
    ) -> None:
        items = [(item_id, _dump(item)) for item_id, item in output_items]
        text, messages = _dump(resource), _dump(output_messages)
        with self._lock:
            row = self._rows.get(response_id)
            if row is None or row.status in TERMINAL_STATUSES:
                raise ResponseNotInProgress(response_id)
            row.status, row.resource, row.output_items, row.output_messages = status, text, items, messages
            row.output_calls = dict(calls)
            row.output_rendered = rendered[1] if rendered else None
            if rendered is None or rendered[0] != row.rendered_by:
                row.rendered_by = None

    def _unfinished(self, response_id: str) -> _Row:
        row = self._rows.get(response_id)
        if row is None or row.status in TERMINAL_STATUSES:
            raise ResponseNotInProgress(response_id)
        return row

    def _progress(self, response_id: str, status: ResponseStatus, resource: dict[str, Any]) -> None:
        text = _dump(resource)
        with self._lock:
            row = self._unfinished(response_id)
            row.status, row.resource = status, text

    def append_events(self, response_id: str, events: Sequence[tuple[int, str]]) -> bool:
        with self._lock:
            row = self._unfinished(response_id)
            row.events.extend((int(n), str(body)) for n, body in events)
            return row.cancel_requested

    def events_after(self, response_id: str, owner: Owner, after: int) -> EventPage:
        with self._lock:
            row = self._owned(response_id, owner)
            return EventPage(row.status, tuple(e for e in row.events if e[0] > after), row.cancel_requested)

    def request_cancel(self, response_id: str, owner: Owner) -> dict[str, Any]:
        with self._lock:
            row = self._owned(response_id, owner)
            if row.status not in TERMINAL_STATUSES:
                row.cancel_requested = True
            text = row.resource
        result: dict[str, Any] = json.loads(text)
        return result

    def _owned(self, response_id: str, owner: Owner) -> _Row:
        row = self._rows.get(response_id)
        if row is None or row.owner != owner:
            raise ResponseNotFound(response_id)
        return row

    def get(self, response_id: str, owner: Owner) -> dict[str, Any]:
        with self._lock:
            text = self._owned(response_id, owner).resource
        result: dict[str, Any] = json.loads(text)
        return result

    def delete(self, response_id: str, owner: Owner) -> None:
        with self._lock:
            self._owned(response_id, owner)
            del self._rows[response_id]

    def _page(self, response_id: str, owner: Owner, after: str | None, limit: int, order: Order) -> ItemPage:
        with self._lock:
            items = list(self._owned(response_id, owner).input_items)
        return paginate([(item_id, json.loads(text)) for item_id, text in items], after, limit, order)

    def get_item(self, item_id: str, owner: Owner) -> dict[str, Any]:
        with self._lock:
            for row in reversed(self._rows.values()):
                if row.owner == owner:
                    for candidate, text in (*row.output_items, *row.input_items):
                        if candidate == item_id:
                            result: dict[str, Any] = json.loads(text)
                            return result
        raise ItemNotFound(item_id)

    def load_history(self, response_id: str, owner: Owner) -> History:
        chain: list[tuple[str, _Row]] = []
        with self._lock:
            head = self._owned(response_id, owner)
            if head.status not in TERMINAL_STATUSES:
                raise ResponseInProgress(response_id)
            current: str | None = response_id
            while current is not None:
                row = self._rows.get(current)
                if row is None or row.owner != owner:
                    raise ResponseNotFound(current, requested=response_id)
                chain.append((current, row))
                current = row.previous
        return History(
            tuple(
                Turn(
                    rid,
                    row.status,
                    messages_from(json.loads(row.input_messages)),
                    messages_from(json.loads(row.output_messages)),
                    {**row.input_calls, **row.output_calls},
                    row.rendered_by,
                    _both(row.input_rendered, row.output_rendered),
                )
                for rid, row in reversed(chain)
            )
        )

    def secret(self, name: str) -> bytes:
        with self._lock:
            return self._secrets.setdefault(name, secrets.token_bytes(SECRET_BYTES))

    def recover(self) -> int:
        return 0

    def close(self) -> None:
        with self._lock:
            for row in self._rows.values():
                if row.status not in TERMINAL_STATUSES:
                    row.resource = _dump(interrupted(json.loads(row.resource)))
                    row.status = ResponseStatus.FAILED
