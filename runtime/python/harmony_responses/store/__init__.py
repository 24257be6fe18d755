"""Stored responses: the state behind `previous_response_id`, `GET/DELETE /responses/{id}` and input items.

    store = open_store("sqlite:///responses.sqlite3")   # or "postgresql://…", or "memory"
    store.begin(rid, owner=Owner.of_api_key(key), resource=..., input_items=..., input_messages=...)
    store.finish(rid, resource=..., output_items=..., output_messages=...)
    history = store.load_history(rid, owner)            # the chain's Harmony messages, oldest first

`AsyncStore(store)` offers the same calls to an asyncio server. SQLite needs only the standard library;
PostgreSQL needs the `store` extra (psycopg 3 and its pool).
"""

from __future__ import annotations

from .aio import AsyncStore
from .base import Store
from .memory import MemoryStore
from .model import (
    INTERRUPTED_ERROR,
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    CallRecord,
    DuplicateResponse,
    EventPage,
    History,
    InvalidArgument,
    ItemNotFound,
    ItemPage,
    MigrationError,
    Order,
    Owner,
    Rendering,
    ResponseInProgress,
    ResponseNotFound,
    ResponseNotInProgress,
    ResponseStatus,
    StoreError,
    StoreURLError,
    Turn,
)
from .urls import data_dir, default_sqlite_path, default_store_url, open_store

__all__ = [
    "INTERRUPTED_ERROR",
    "LIST_LIMIT_DEFAULT",
    "LIST_LIMIT_MAX",
    "AsyncStore",
    "CallRecord",
    "DuplicateResponse",
    "EventPage",
    "History",
    "InvalidArgument",
    "ItemNotFound",
    "ItemPage",
    "MemoryStore",
    "MigrationError",
    "Order",
    "Owner",
    "Rendering",
    "ResponseInProgress",
    "ResponseNotFound",
    "ResponseNotInProgress",
    "ResponseStatus",
    "Store",
    "StoreError",
    "StoreURLError",
    "Turn",
    "data_dir",
    "default_sqlite_path",
    "default_store_url",
    "open_store",
]
