"""`AsyncStore`: the store for an asyncio server, every call run on a worker thread.

SQLite has no asynchronous interface and PostgreSQL's would need a second implementation of every
statement, so the store stays synchronous and this wrapper moves each call onto its own small thread
pool: the event loop never waits on a disk or a socket, and at most `threads` store calls run at once
(more wait their turn in the pool's queue, not on the loop).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..models import Message
from .base import Store
from .model import (
    LIST_LIMIT_DEFAULT,
    LIST_ORDER_DEFAULT,
    CallRecord,
    EventPage,
    History,
    ItemPage,
    Order,
    Owner,
    Rendering,
)

T = TypeVar("T")


class AsyncStore:
    """A `Store` with awaitable methods of the same names and arguments."""

    def __init__(self, store: Store, threads: int = 8) -> None:
        self.store = store
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="response-store")

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    async def begin(
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
        await self._run(
            self.store.begin,
            response_id,
            owner=owner,
            resource=resource,
            input_items=input_items,
            input_messages=input_messages,
            previous_response_id=previous_response_id,
            calls=calls,
            rendered=rendered,
        )

    async def finish(
        self,
        response_id: str,
        *,
        resource: Mapping[str, Any],
        output_items: Sequence[Mapping[str, Any]],
        output_messages: Sequence[Message],
        calls: Mapping[str, CallRecord] | None = None,
        rendered: Rendering | None = None,
    ) -> None:
        await self._run(
            self.store.finish,
            response_id,
            resource=resource,
            output_items=output_items,
            output_messages=output_messages,
            calls=calls,
            rendered=rendered,
        )

    async def progress(self, response_id: str, resource: Mapping[str, Any]) -> None:
        await self._run(self.store.progress, response_id, resource)

    async def append_events(self, response_id: str, events: Sequence[tuple[int, str]]) -> bool:
        return await self._run(self.store.append_events, response_id, events)

    async def events_after(self, response_id: str, owner: Owner, after: int) -> EventPage:
        return await self._run(self.store.events_after, response_id, owner, after)

    async def request_cancel(self, response_id: str, owner: Owner) -> dict[str, Any]:
        return await self._run(self.store.request_cancel, response_id, owner)

    async def get(self, response_id: str, owner: Owner) -> dict[str, Any]:
        return await self._run(self.store.get, response_id, owner)

    async def delete(self, response_id: str, owner: Owner) -> None:
        await self._run(self.store.delete, response_id, owner)

    async def list_input_items(
        self,
        response_id: str,
        owner: Owner,
        *,
        after: str | None = None,
        limit: int = LIST_LIMIT_DEFAULT,
        order: Order | str = LIST_ORDER_DEFAULT,
    ) -> ItemPage:
        return await self._run(self.store.list_input_items, response_id, owner, after=after, limit=limit, order=order)

    async def get_item(self, item_id: str, owner: Owner) -> dict[str, Any]:
        return await self._run(self.store.get_item, item_id, owner)

    async def load_history(self, response_id: str, owner: Owner) -> History:
        return await self._run(self.store.load_history, response_id, owner)

    async def secret(self, name: str) -> bytes:
        return await self._run(self.store.secret, name)

    async def recover(self) -> int:
        return await self._run(self.store.recover)

    async def close(self) -> None:
        """Close the store once every call already queued or running has returned (no call starts after)."""

        def close_after_the_rest() -> None:
            self._pool.shutdown(wait=True)
            self.store.close()

        await asyncio.get_running_loop().run_in_executor(None, close_after_the_rest)
