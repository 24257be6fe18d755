"""The store's one interface: start a response, finish it atomically, read, list, continue, delete.

A response lives through two writes. `begin` stores it `in_progress` with its input (items as given,
and the Harmony messages they rendered to) when the response starts; `finish` stores its terminal
resource, output items and output messages in one transaction. A process killed between the two leaves
an `in_progress` row owned by a dead writer: `recover` (run by every open, and callable at any time)
marks such rows `failed`. Nothing else is ever written, so a response is never half-written.

Every read takes the owner and answers `ResponseNotFound` for another owner's object, exactly as for a
missing one. Continuations form a tree: two responses may continue the same one (two branches); no
row is ever updated by a continuation, so concurrent continuations cannot lose an update.

The methods block; `AsyncStore` (in `aio`) runs them on worker threads for an asyncio server.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from ..models import Message
from .model import (
    LIST_LIMIT_DEFAULT,
    LIST_ORDER_DEFAULT,
    TERMINAL_STATUSES,
    CallRecord,
    EventPage,
    History,
    InvalidArgument,
    ItemPage,
    Order,
    Owner,
    Rendering,
    ResponseStatus,
    check_calls,
    check_items,
    check_page_args,
    check_rendering,
    check_resource,
    message_dicts,
    pack_tokens,
    status_of,
)


def _packed(rendering: Rendering | None) -> tuple[str, bytes] | None:
    return None if rendering is None else (rendering.key, pack_tokens(rendering.tokens))


class Store(ABC):
    """Stored responses, by owner. Thread-safe; open one per process with `open_store(url)`."""

    migrations_applied: tuple[int, ...] = ()
    """The schema versions this open applied (empty when the database was already current)."""

    def begin(
        self,
        response_id: str,
        *,
        owner: Owner,
        resource: Mapping[str, Any],
        input_items: Sequence[Mapping[str, Any]],
        input_messages: Sequence[Message],
        previous_response_id: str | None = None,
        calls: Mapping[str, CallRecord] | None = None,
        rendered: Rendering | None = None,
    ) -> None:
        """Store a response that starts now, `in_progress`, with its input.

        `resource` is its ResponseResource JSON at start (status `in_progress` or `queued`); `input_items`
        the input items as given, each with an `id`; `input_messages` the Harmony messages this turn adds
        before the model speaks (without the system and developer messages, which each request renders
        afresh); `calls` the calls among the input items (call id → the caller's record of it, kept as
        JSON); `rendered` the input messages' token ids, kept for the prompts that continue this response. Raises
        `ResponseNotFound` when `previous_response_id` is not this owner's, `ResponseInProgress` when it
        has not finished, `DuplicateResponse` for a reused id.
        """
        status = status_of(resource)
        if status in TERMINAL_STATUSES:
            raise InvalidArgument("resource.status", f"a response begins queued or in_progress, not {status.value!r}")
        self._insert(
            response_id,
            owner,
            check_resource(resource, response_id, status),
            check_items(input_items, "input_items"),
            message_dicts(input_messages),
            previous_response_id,
            check_calls(calls, "calls"),
            _packed(check_rendering(rendered, input_messages, "rendered")),
        )

    def finish(
        self,
        response_id: str,
        *,
        resource: Mapping[str, Any],
        output_items: Sequence[Mapping[str, Any]],
        output_messages: Sequence[Message],
        calls: Mapping[str, CallRecord] | None = None,
        rendered: Rendering | None = None,
    ) -> None:
        """Store a response's end in one transaction: its final resource (status `completed`,
        `incomplete`, `failed` or `cancelled`), its output items, the Harmony messages the model wrote (analysis
        included), the calls among the output items (call id → record) and the output messages'
        token ids (used only when rendered under the key `begin` was given). Raises
        `ResponseNotInProgress` when it was finished, recovered or deleted meanwhile.
        """
        status = status_of(resource)
        if status not in TERMINAL_STATUSES:
            raise InvalidArgument(
                "resource.status",
                f"a response finishes completed, incomplete, failed or cancelled, not {status.value!r}",
            )
        self._complete(
            response_id,
            status,
            check_resource(resource, response_id, status),
            check_items(output_items, "output_items"),
            message_dicts(output_messages),
            check_calls(calls, "calls"),
            _packed(check_rendering(rendered, output_messages, "rendered")),
        )

    def progress(self, response_id: str, resource: Mapping[str, Any]) -> None:
        """Store the new resource of a response that has not ended (a background response `queued` that
        starts: `in_progress`). Raises `ResponseNotInProgress` when it ended, was recovered or deleted."""
        status = status_of(resource)
        if status in TERMINAL_STATUSES:
            raise InvalidArgument("resource.status", f"progress is queued or in_progress, not {status.value!r}")
        self._progress(response_id, status, check_resource(resource, response_id, status))

    @abstractmethod
    def append_events(self, response_id: str, events: Sequence[tuple[int, str]]) -> bool:
        """Append stream events (sequence number, SSE frame) to a response that has not ended; return whether a
        cancel was asked for (`request_cancel`). Raises `ResponseNotInProgress` when it ended, was recovered or
        deleted. With no events it only answers the question (the background runner polls it)."""

    @abstractmethod
    def events_after(self, response_id: str, owner: Owner, after: int) -> EventPage:
        """The response's stored events with a sequence number above `after`, in order, and its status (read in
        one snapshot). Raises `ResponseNotFound`."""

    @abstractmethod
    def request_cancel(self, response_id: str, owner: Owner) -> dict[str, Any]:
        """Ask the process running the response to cancel it (a flag it polls); return its resource as it
        stands. A response that has ended is left as it is. Raises `ResponseNotFound`."""

    @abstractmethod
    def get(self, response_id: str, owner: Owner) -> dict[str, Any]:
        """The response's ResponseResource JSON (the start snapshot while in progress)."""

    @abstractmethod
    def delete(self, response_id: str, owner: Owner) -> None:
        """Remove the response, its items and its messages for good. Responses that continued it keep
        their own rows, but their history now stops at a missing response (`ResponseNotFound`)."""

    def list_input_items(
        self,
        response_id: str,
        owner: Owner,
        *,
        after: str | None = None,
        limit: int = LIST_LIMIT_DEFAULT,
        order: Order | str = LIST_ORDER_DEFAULT,
    ) -> ItemPage:
        """A page of the response's input items: `limit` (1..100) items after the item `after`, walking
        in `order` (`asc` is the order they were given in). Raises `InvalidArgument` for an `after` that
        is not one of its items."""
        return self._page(response_id, owner, after, limit, check_page_args(limit, order))

    @abstractmethod
    def get_item(self, item_id: str, owner: Owner) -> dict[str, Any]:
        """An input or output item of one of the owner's responses, by id (the newest if reused)."""

    @abstractmethod
    def load_history(self, response_id: str, owner: Owner) -> History:
        """The chain ending at `response_id` (following `previous_response_id`), oldest first, with each
        turn's Harmony messages. Raises `ResponseNotFound` (naming the missing response) when it or an
        earlier one is missing, and `ResponseInProgress` when it has not finished."""

    @abstractmethod
    def secret(self, name: str) -> bytes:
        """The random key `name` (32 bytes), made on first use and the same for every process on this store
        from then on (the compaction signing key). A `memory` store's keys last as long as the process."""

    @abstractmethod
    def recover(self) -> int:
        """Mark `failed` every `in_progress` response whose writer has died; return how many.

        Every open runs it; a server also calls it now and then (say every 30 s), which frees a dead
        sibling's responses without waiting for a restart, and re-registers this process if its
        database connection (and with it its liveness lock) was lost."""

    @abstractmethod
    def close(self) -> None:
        """Mark this process's unfinished responses failed and release the database."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what each backend implements --------------------------------------------------------------

    @abstractmethod
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
    ) -> None: ...

    @abstractmethod
    def _complete(
        self,
        response_id: str,
        status: ResponseStatus,
        resource: dict[str, Any],
        output_items: list[tuple[str, dict[str, Any]]],
        output_messages: list[dict[str, Any]],
        calls: dict[str, CallRecord],
        rendered: tuple[str, bytes] | None,
    ) -> None: ...

    @abstractmethod
    def _progress(self, response_id: str, status: ResponseStatus, resource: dict[str, Any]) -> None: ...

    @abstractmethod
    def _page(self, response_id: str, owner: Owner, after: str | None, limit: int, order: Order) -> ItemPage: ...
