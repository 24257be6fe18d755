"""Schema migrations: versioned, recorded, run once, safe when processes open one database together."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from store_builders import worker

from harmony_responses.store import MigrationError, open_store
from harmony_responses.store.migrations import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS

pytest_plugins = ["store_fixtures"]


@contextmanager
def _raw(url: str) -> Iterator[Any]:
    """A plain connection to the store's database, beside the store (autocommit)."""
    if url.startswith("sqlite:///"):
        conn: Any = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    else:
        conn = psycopg.connect(url, autocommit=True)
    try:
        yield conn
    finally:
        conn.close()


def _migrations(url: str) -> Any:
    return SQLITE_MIGRATIONS if url.startswith("sqlite") else POSTGRES_MIGRATIONS


def _sql(url: str, statement: str) -> str:
    return statement if url.startswith("sqlite") else statement.replace("?", "%s")


def test_the_first_open_migrates_and_the_second_runs_nothing(persistent_url: str) -> None:
    versions = tuple(m.version for m in _migrations(persistent_url))
    with open_store(persistent_url) as store:
        assert store.migrations_applied == versions
    with open_store(persistent_url) as store:
        assert store.migrations_applied == ()
    with _raw(persistent_url) as conn:
        recorded = conn.execute("SELECT version, name, checksum FROM schema_migrations ORDER BY version").fetchall()
    assert [tuple(r) for r in recorded] == [(m.version, m.name, m.checksum) for m in _migrations(persistent_url)]


def test_processes_opening_a_new_database_together_migrate_it_once(persistent_url: str) -> None:
    workers = [worker("open", persistent_url, "--on-go", stdin=subprocess.PIPE) for _ in range(4)]
    for w in workers:
        assert w.stdout is not None and w.stdout.readline().strip() == "ready"
    for w in workers:
        assert w.stdin is not None
        w.stdin.write("go\n")
        w.stdin.flush()
    results = [w.communicate(timeout=120) for w in workers]
    assert [w.returncode for w in workers] == [0] * 4, [err for _, err in results]
    applied = sorted(tuple(json.loads(out)["applied"]) for out, _ in results)
    versions = tuple(m.version for m in _migrations(persistent_url))
    assert applied == [(), (), (), versions]


def test_a_migration_edited_after_it_ran_stops_the_open(persistent_url: str) -> None:
    open_store(persistent_url).close()
    with _raw(persistent_url) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE version = 1")
    with pytest.raises(MigrationError, match="edited after release"):
        open_store(persistent_url)


def test_a_database_migrated_by_a_newer_release_stops_the_open(persistent_url: str) -> None:
    open_store(persistent_url).close()
    with _raw(persistent_url) as conn:
        conn.execute(
            _sql(persistent_url, "INSERT INTO schema_migrations VALUES (?, ?, ?, ?)"),
            (999, "from the future", "x", "2099-01-01"),
        )
    with pytest.raises(MigrationError, match=r"\[999\]"):
        open_store(persistent_url)
