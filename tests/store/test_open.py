"""Store URLs, the embedded default location, owners, and the asyncio wrapper."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from services.postgres import free_port
from store_builders import ALICE, BOB, add_turn, resource, user

from harmony_responses.store import (
    AsyncStore,
    MemoryStore,
    Owner,
    ResponseNotFound,
    StoreError,
    StoreURLError,
    default_sqlite_path,
    open_store,
)

pytest_plugins = ["store_fixtures"]


def test_the_default_file_is_under_xdg_data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_sqlite_path() == tmp_path / "data" / "harmony-responses" / "responses.sqlite3"


def test_without_xdg_data_home_the_default_is_under_local_share(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for unusable in ("", "relative/dir"):  # the XDG spec ignores a relative value
        monkeypatch.setenv("XDG_DATA_HOME", unusable)
        assert default_sqlite_path() == tmp_path / ".local" / "share" / "harmony-responses" / "responses.sqlite3"


def test_the_default_store_is_created_on_first_open_in_wal_mode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "fresh"))
    with open_store("sqlite://") as store:
        add_turn(store, "resp_1", ALICE, None, "hi")
    path = tmp_path / "fresh" / "harmony-responses" / "responses.sqlite3"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()
    with open_store(f"sqlite:///{path}") as store:
        assert store.get("resp_1", ALICE)["status"] == "completed"


def test_switching_a_new_file_to_wal_waits_for_another_connections_write(tmp_path: Path) -> None:
    # SQLite answers "database is locked" to the WAL switch at once, without waiting, while another
    # connection holds the write lock: processes opening a new file together met this (CI, stop 28)
    path = tmp_path / "new.sqlite3"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE t (x)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t VALUES (1)")
    release = threading.Timer(0.3, lambda: other.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    try:
        with open_store(f"sqlite:///{path}") as store:
            add_turn(store, "resp_1", ALICE, None, "hi")
    finally:
        release.join()
        other.close()
    assert time.monotonic() - started >= 0.3
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


def test_a_relative_sqlite_path_is_relative_to_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    open_store("sqlite:///here/responses.sqlite3?synchronous=normal").close()
    assert (tmp_path / "here" / "responses.sqlite3").is_file()


@pytest.mark.parametrize(
    "url",
    [
        "mysql://localhost/db",
        "responses.sqlite3",
        "sqlite:/one/slash.db",
        "sqlite:///x.db?journal=off",
        "sqlite:///x.db?synchronous=off",
        "memory://somewhere",
        "postgresql://127.0.0.1/db?pool_size=many",
        "postgresql://127.0.0.1/db?pool_size=0",
    ],
)
def test_urls_naming_no_usable_store_are_refused(url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreURLError):
        open_store(url)


def test_memory_names_a_store_of_its_own() -> None:
    assert isinstance(open_store("memory"), MemoryStore)
    assert open_store("memory") is not open_store("memory")


def test_an_unreachable_postgresql_fails_with_the_servers_reason() -> None:
    started = time.monotonic()
    with pytest.raises(StoreError, match="cannot connect to the PostgreSQL store"):
        open_store(f"postgresql://nobody@127.0.0.1:{free_port()}/nothing")
    assert time.monotonic() - started < 15


def test_an_owner_is_a_digest_of_the_key() -> None:
    assert Owner.of_api_key("sk-1") == Owner.of_api_key("sk-1")
    assert Owner.of_api_key("sk-1") != Owner.of_api_key("sk-2")
    assert Owner.of_api_key(None) not in (Owner.of_api_key(""), Owner.of_api_key("anonymous"))
    assert "sk-1" not in Owner.of_api_key("sk-1").digest and len(Owner.of_api_key("sk-1").digest) == 64


def test_the_api_key_is_never_written_to_disk(tmp_path: Path) -> None:
    key = "sk-this-key-must-stay-secret-4242"
    path = tmp_path / "responses.sqlite3"
    with open_store(f"sqlite:///{path}") as store:
        add_turn(store, "resp_1", Owner.of_api_key(key), None, "hi")
        on_disk = b"".join(p.read_bytes() for p in tmp_path.glob("responses.sqlite3*") if p.is_file())
    assert Owner.of_api_key(key).digest.encode() in on_disk  # the scan reads what was written ...
    assert key.encode() not in on_disk  # ... and the key is not in it


def test_the_async_store_keeps_the_event_loop_running_while_the_database_is_busy(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite3"
    store = AsyncStore(open_store(f"sqlite:///{path}"))
    blocker = sqlite3.connect(path, isolation_level=None)

    async def scenario() -> int:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.01)
                ticks += 1

        blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock for 0.5 s
        asyncio.get_running_loop().call_later(0.5, blocker.execute, "COMMIT")
        tick_task = asyncio.create_task(ticker())
        await store.begin(
            "resp_1", owner=ALICE, resource=resource("resp_1"), input_items=[], input_messages=[user("x")]
        )
        done.set()
        await tick_task
        await store.finish("resp_1", resource=resource("resp_1", "completed"), output_items=[], output_messages=[])
        assert (await store.get("resp_1", ALICE))["status"] == "completed"
        assert [t.response_id for t in (await store.load_history("resp_1", ALICE)).turns] == ["resp_1"]
        assert (await store.list_input_items("resp_1", ALICE)).data == ()
        with pytest.raises(ResponseNotFound):
            await store.get("resp_1", BOB)
        await store.delete("resp_1", ALICE)
        assert await store.recover() == 0
        await store.close()
        return ticks

    try:
        ticks = asyncio.run(scenario())
    finally:
        blocker.close()
    assert ticks >= 20  # the loop ran on while `begin` waited for the lock (it would be ~0 if it blocked)


def test_closing_waits_for_a_transaction_on_another_thread_and_removes_the_lock_file(tmp_path: Path) -> None:
    """Closing a SQLite connection while another thread executes on it crashed the interpreter (SIGTERM with live
    streams: the store closed while a cancelled stream stored its end); close now waits for the write."""
    import threading

    from harmony_responses.store.sqlite import SQLiteDatabase

    path = tmp_path / "r.sqlite3"
    store = open_store(f"sqlite:///{path}")
    writers = tmp_path / "r.sqlite3-writers"
    assert len(list(writers.iterdir())) == 1
    db = store._db  # type: ignore[attr-defined]
    assert isinstance(db, SQLiteDatabase)
    inside, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def slow_read() -> None:  # a read: the close's own write transaction does not wait for it, only the close
        try:
            with db.read() as tx:
                inside.set()
                release.wait(5)
                tx.rows("SELECT count(*) FROM responses")
        except BaseException as exc:  # noqa: B036 - reported below
            failures.append(exc)

    writer = threading.Thread(target=slow_read)
    writer.start()
    assert inside.wait(5)
    closer = threading.Thread(target=store.close)
    closer.start()
    time.sleep(0.2)
    assert closer.is_alive()  # waiting for the transaction, not closing its connection under it
    release.set()
    writer.join(5)
    closer.join(5)
    assert not closer.is_alive() and not failures
    assert list(writers.iterdir()) == []
    with pytest.raises(StoreError, match="closed"):
        with db.read():
            pass
