"""What `SQLStore` needs from a database: transactions, its dialect's schema, and writer liveness.

A *writer* is one open store (one server process). It registers itself in `store_writers` and holds a
lock that the operating system or the database releases when the process dies, however it dies: an
`flock` on a file for SQLite, a session advisory lock for PostgreSQL. Recovery asks, for each other
writer, whether its lock can be taken; if it can, that writer is dead and its unfinished responses are
marked failed. A live writer's responses are never touched, so several processes can share a database
and restart one at a time.

SQL is written once with `?` placeholders; each dialect's transaction object adapts it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .migrations import Migration


class Tx(Protocol):
    """One open transaction."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; return the number of rows it changed."""
        ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement once per row of parameters."""
        ...

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a query; return every row."""
        ...


class Database(ABC):
    """A connection to one database, shared by the threads of one process."""

    migrations: tuple[Migration, ...]
    """This dialect's schema steps, oldest first."""

    @abstractmethod
    def read(self) -> AbstractContextManager[Tx]:
        """A read-only transaction that sees one snapshot."""

    @abstractmethod
    def write(self) -> AbstractContextManager[Tx]:
        """A read-write transaction, committed when the block ends without an exception."""

    @abstractmethod
    def lock_schema(self, tx: Tx) -> None:
        """Keep other processes from migrating until `tx` ends."""

    @abstractmethod
    def register_writer(self) -> int:
        """Add this process to `store_writers` while holding its liveness lock; return its id."""

    @abstractmethod
    def ensure_writer(self, writer_id: int) -> int:
        """`writer_id` while this process still holds its liveness lock; else (its database connection
        was lost, and with it the lock) a newly registered writer's id."""

    @abstractmethod
    def writer_is_dead(self, tx: Tx, writer_id: int) -> AbstractContextManager[bool]:
        """Whether writer `writer_id` is dead; while the block runs, it cannot come back to life."""

    @abstractmethod
    def release_writer(self) -> None:
        """Drop this process's liveness lock (after its row is gone)."""

    @abstractmethod
    def close(self) -> None:
        """Close every connection."""
