"""SQLite through the standard library's `sqlite3`: one file, WAL, one connection per thread.

The database runs in WAL mode (readers never wait for the writer) with `synchronous=FULL` by default,
so a commit that returned survives a power cut, not only a killed process (`?synchronous=normal` in
the URL trades that for speed). Write transactions start with `BEGIN IMMEDIATE`, taking the write lock
up front; a busy database is waited for (`busy_timeout`), not failed. Foreign keys are on, so deleting a
response deletes its items.

Writer liveness: beside the database, `<file>-writers/<id>.lock` is held with `flock` by the writer
`id` for as long as its store is open; the kernel drops the lock when the process ends, however it
ends. Closing the store removes its lock file (a killed process's is removed by the next recovery).

`close` waits for the transactions running on other threads to end before it closes their connections
(closing a connection another thread is executing on crashes the interpreter); later ones get
`StoreError`.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from .database import Database, Tx
from .migrations import SQLITE_MIGRATIONS
from .model import StoreError, StoreURLError

BUSY_TIMEOUT_S = 30.0
SYNCHRONOUS_MODES = ("full", "normal")


def _switch_to_wal(conn: sqlite3.Connection) -> str:
    """Set WAL mode and return the mode the file is in, waiting out other processes doing the same.

    The switch takes the file's exclusive lock, and SQLite answers SQLITE_BUSY to it at once, without
    calling the busy handler, while another connection is reading or switching: processes opening a new
    file together would fail. So a busy switch is retried until the busy timeout (WAL is kept in the file:
    once one process has switched, the others' switch only reads it).
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
        time.sleep(0.005)


class _SQLiteTx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(sql, params).rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self._conn.executemany(sql, rows)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, params).fetchall()


class SQLiteDatabase(Database):
    """A SQLite file, created (with its folder) on first open."""

    migrations = SQLITE_MIGRATIONS

    def __init__(self, path: Path, synchronous: str = "full") -> None:
        if synchronous not in SYNCHRONOUS_MODES:
            raise StoreURLError(f"synchronous must be one of {list(SYNCHRONOUS_MODES)}, not {synchronous!r}")
        self.path = path
        self._synchronous = synchronous
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        self._active = 0  # transactions running, on any thread
        self._idle = threading.Condition(self._lock)
        self._writer_fd: int | None = None
        self._writer_file: Path | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            mode = _switch_to_wal(self._connection())
        except (OSError, sqlite3.Error) as exc:
            self.close()
            raise StoreError(f"cannot open the SQLite store {str(path)!r}: {exc}") from exc
        if mode != "wal":
            self.close()
            raise StoreError(f"the SQLite store {str(path)!r} cannot use WAL (journal mode {mode!r})")

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._lock:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            self._connections.append(conn)
        conn.execute(f"PRAGMA synchronous={self._synchronous.upper()}")
        conn.execute("PRAGMA foreign_keys=ON")
        self._local.conn = conn
        return conn

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[Tx]:
        with self._lock:
            if self._closed:
                raise StoreError("the store is closed")
            self._active += 1
        try:
            conn = self._connection()
            conn.execute(begin)
            try:
                yield _SQLiteTx(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            with self._lock:
                self._active -= 1
                if not self._active:
                    self._idle.notify_all()

    def read(self) -> AbstractContextManager[Tx]:
        return self._transaction("BEGIN")

    def write(self) -> AbstractContextManager[Tx]:
        return self._transaction("BEGIN IMMEDIATE")

    def lock_schema(self, tx: Tx) -> None:
        """`BEGIN IMMEDIATE` already holds the database's one write lock."""

    def _lock_file(self, writer_id: int) -> Path:
        return self.path.with_name(self.path.name + "-writers") / f"{writer_id}.lock"

    def register_writer(self) -> int:
        with self.write() as tx:
            (writer_id,) = tx.rows(
                "INSERT INTO store_writers (pid, host, started_at) VALUES (?, ?, ?) RETURNING id",
                (os.getpid(), socket.gethostname(), time.time()),
            )[0]
            lock_file = self._lock_file(writer_id)
            lock_file.parent.mkdir(exist_ok=True)
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise StoreError(f"writer lock {str(lock_file)!r} is held by another process") from None
            self._writer_fd = fd
            self._writer_file = lock_file
        return int(writer_id)

    def ensure_writer(self, writer_id: int) -> int:
        """An `flock` is held until this process closes the file: it cannot be lost."""
        return writer_id

    @contextmanager
    def writer_is_dead(self, tx: Tx, writer_id: int) -> Iterator[bool]:
        lock_file = self._lock_file(writer_id)
        try:
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        except FileNotFoundError:  # the folder is gone: so is every writer that used it
            yield True
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True
            lock_file.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def release_writer(self) -> None:
        if self._writer_fd is not None:
            fd, self._writer_fd = self._writer_fd, None
            if self._writer_file is not None:
                self._writer_file.unlink(missing_ok=True)  # still locked: no recovery is looking at it
            os.close(fd)

    def close(self) -> None:
        self.release_writer()
        with self._lock:
            self._closed = True
            if not self._idle.wait_for(lambda: not self._active, timeout=BUSY_TIMEOUT_S * 2):
                return  # a transaction still runs: leave the connections to the process's exit, never crash it
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
