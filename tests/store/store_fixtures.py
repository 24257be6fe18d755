"""Fixtures and builders for the store tests (a pytest plugin: `pytest_plugins = ["store_fixtures"]`).

`store_url` runs a test once per backend: memory, a SQLite file in the test's temporary folder, and a
fresh database on the session's throwaway PostgreSQL server (started once, by `postgres_server`).
`persistent_url` is the same without memory, for tests that reopen, crash or share a database.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

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


def _url(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> str:
    if backend == "memory":
        return "memory"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'responses.sqlite3'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _url(request, request.param, tmp_path)


@pytest.fixture(params=["sqlite", "postgresql"])
def persistent_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _url(request, request.param, tmp_path)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = open_store(store_url)
    yield opened
    opened.close()
