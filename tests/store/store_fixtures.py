"""Fixtures and builders for the store tests (a pytest plugin: `pytest_plugins = ["store_fixtures"]`).

`store_url` runs a test once per backend: memory, a SQLite file in the test's temporary folder, and a
database on the session's throwaway PostgreSQL server (started once, by `postgres_server`), migrated
once and emptied after each test. `persistent_url` runs SQLite and a new PostgreSQL database of its
own, for tests that migrate, reopen, crash or share a database between processes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from services.postgres import PostgresServer  # noqa: E402

from harmony_responses.store import Store, open_store  # noqa: E402


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    url = postgres_server.create_database()
    yield url
    postgres_server.drop_database(url)


@pytest.fixture(scope="session")
def postgres_shared_database(postgres_server: PostgresServer) -> str:
    url = postgres_server.create_database()
    open_store(url).close()  # migrated once, here
    return url


@pytest.fixture
def postgres_emptied_after(postgres_shared_database: str) -> Iterator[str]:
    """The shared database, emptied after the test (much cheaper than a new database per test)."""
    yield postgres_shared_database
    with psycopg.connect(postgres_shared_database, autocommit=True) as conn:
        conn.execute("TRUNCATE responses, response_items, response_events, store_writers")


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'responses.sqlite3'}"
    url: str = request.getfixturevalue("postgres_emptied_after")
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def persistent_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'responses.sqlite3'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()
