"""PostgreSQL through psycopg 3 and its connection pool, for several server processes on one database.

Reads run in `REPEATABLE READ, READ ONLY` transactions (one snapshot for a page and its owner check);
writes in the default `READ COMMITTED`, where every write the store makes is one conditional statement
per row (`UPDATE … WHERE status IN (unfinished)`, `INSERT … ON CONFLICT DO NOTHING`), so concurrent
writers cannot lose an update. Migrations are serialised across processes with a transaction advisory
lock.

Writer liveness: each open store keeps one extra connection that holds a session advisory lock keyed by
its writer id. When the process dies, its connection closes and PostgreSQL releases the lock; TCP
keepalives on that connection bound how long a vanished host keeps it (about a minute).
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from .database import Database, Tx
from .migrations import POSTGRES_MIGRATIONS
from .model import StoreError

ADVISORY_CLASS = 0x48524553
"""The first key of every advisory lock this store takes; the second is 0 for migrations, else a writer id."""
SCHEMA_LOCK = 0
CONNECT_TIMEOUT_S = 10
WRITER_APPLICATION = "harmony-responses writer"
"""The `application_name` of the connection that holds a writer's lock (visible in `pg_stat_activity`)."""
KEEPALIVE = ("SET tcp_keepalives_idle = 30", "SET tcp_keepalives_interval = 10", "SET tcp_keepalives_count = 3")


@functools.lru_cache(maxsize=256)
def _placeholders(sql: str) -> str:
    return sql.replace("?", "%s")


class _PostgresTx:
    def __init__(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(_placeholders(sql), params).rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self._conn.cursor() as cur:
                cur.executemany(_placeholders(sql), rows)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(_placeholders(sql), params).fetchall()


class PostgresDatabase(Database):
    """A PostgreSQL database named by a libpq connection string or `postgresql://` URL."""

    migrations = POSTGRES_MIGRATIONS

    def __init__(self, conninfo: str, pool_size: int = 8) -> None:
        self._conninfo = conninfo
        # One direct connection first: it fails with the server's own reason, not a pool timeout.
        self._writer_conn: psycopg.Connection[tuple[Any, ...]] | None = self._connect_writer()
        self._pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True},
            open=False,
            name="harmony-responses-store",
        )
        self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)

    def _connect_writer(self) -> psycopg.Connection[tuple[Any, ...]]:
        try:
            conn = psycopg.connect(
                self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name=WRITER_APPLICATION
            )
            for statement in KEEPALIVE:
                conn.execute(statement)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to the PostgreSQL store: {exc}") from exc
        return conn

    @contextmanager
    def read(self) -> Iterator[Tx]:
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield _PostgresTx(conn)

    @contextmanager
    def write(self) -> Iterator[Tx]:
        with self._pool.connection() as conn, conn.transaction():
            yield _PostgresTx(conn)

    def lock_schema(self, tx: Tx) -> None:
        tx.rows("SELECT pg_advisory_xact_lock(?, ?)", (ADVISORY_CLASS, SCHEMA_LOCK))

    def register_writer(self) -> int:
        conn = self._writer_conn
        if conn is None:
            raise StoreError("the store is closed")
        with conn.transaction():
            row = conn.execute(
                "INSERT INTO store_writers (pid, host, started_at) VALUES (%s, %s, %s) RETURNING id",
                (os.getpid(), socket.gethostname(), time.time()),
            ).fetchone()
            assert row is not None
            writer_id = int(row[0])
            conn.execute("SELECT pg_advisory_lock(%s, %s)", (ADVISORY_CLASS, writer_id))
        return writer_id

    def ensure_writer(self, writer_id: int) -> int:
        conn = self._writer_conn
        if conn is None:
            raise StoreError("the store is closed")
        try:
            conn.execute("SELECT 1")
            return writer_id
        except psycopg.OperationalError:  # the server restarted or dropped us: our lock went with the session
            conn.close()
            self._writer_conn = self._connect_writer()
            return self.register_writer()

    @contextmanager
    def writer_is_dead(self, tx: Tx, writer_id: int) -> Iterator[bool]:
        # Held until `tx` ends: the dead writer's id cannot be locked by anyone else meanwhile.
        (acquired,) = tx.rows("SELECT pg_try_advisory_xact_lock(?, ?)", (ADVISORY_CLASS, writer_id))[0]
        yield bool(acquired)

    def release_writer(self) -> None:
        conn, self._writer_conn = self._writer_conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self.release_writer()
        self._pool.close()
