"""Restarts, crashes and several processes on one database (SQLite file and PostgreSQL)."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import time

import psycopg
import pytest
from store_builders import ALICE, add_turn, resource, run_worker, user, worker

from harmony_responses.store import (
    INTERRUPTED_ERROR,
    ItemNotFound,
    Owner,
    ResponseNotFound,
    ResponseNotInProgress,
    ResponseStatus,
    Store,
    open_store,
)
from harmony_responses.store.postgres import WRITER_APPLICATION

pytest_plugins = ["store_fixtures"]

HOLDER = Owner.of_api_key("holder")


def _recover_until(store: Store, expected: int, timeout: float = 15.0) -> int:
    """Recover until `expected` responses were marked failed: PostgreSQL notices a killed client's
    closed socket (and drops its locks) a moment after the kill, not at once."""
    total, deadline = 0, time.monotonic() + timeout
    while True:
        total += store.recover()
        if total >= expected or time.monotonic() > deadline:
            return total
        time.sleep(0.05)


def _settled(store: Store, response_id: str, owner: Owner) -> dict[str, object]:
    stored = store.get(response_id, owner)
    if stored["status"] == "in_progress":  # its killed writer's lock may take a moment to be released
        _recover_until(store, 1)
        stored = store.get(response_id, owner)
    return stored


def _hold(url: str, response_id: str) -> subprocess.Popen[str]:
    process = worker("hold", url, response_id, "holder", stdin=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "started", process.stderr.read() if process.stderr else ""
    return process


def test_a_restart_loses_nothing_that_was_committed(persistent_url: str) -> None:
    with open_store(persistent_url) as store:
        add_turn(store, "resp_1", ALICE, None, "one")
        add_turn(store, "resp_2", ALICE, "resp_1", "two")
    with open_store(persistent_url) as store:
        assert store.migrations_applied == ()
        assert [t.response_id for t in store.load_history("resp_2", ALICE).turns] == ["resp_1", "resp_2"]
        assert store.get("resp_2", ALICE)["status"] == "completed"


def test_a_secret_is_shared_by_processes_and_survives_a_restart(persistent_url: str) -> None:
    with open_store(persistent_url) as store:
        key = store.secret("compaction")
    out = run_worker("secret", persistent_url, "compaction")
    assert bytes.fromhex(out.strip()) == key
    with open_store(persistent_url) as store:
        assert store.secret("compaction") == key


def test_a_writer_killed_mid_response_leaves_it_failed_after_the_next_open(persistent_url: str) -> None:
    holder = _hold(persistent_url, "resp_killed")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with open_store(persistent_url) as store:
        stored = _settled(store, "resp_killed", HOLDER)
        assert stored["status"] == "failed" and stored["error"] == INTERRUPTED_ERROR
        assert [i["id"] for i in store.list_input_items("resp_killed", HOLDER).data] == ["in_resp_killed"]
        history = store.load_history("resp_killed", HOLDER)  # a failed turn keeps its input
        assert history.turns[0].status is ResponseStatus.FAILED
        assert [m.to_dict() for m in history.messages()] == [user("hold on").to_dict()]
        assert store.recover() == 0  # once


def test_a_live_writers_response_is_not_recovered_by_another_process(persistent_url: str) -> None:
    holder = _hold(persistent_url, "resp_live")
    try:
        with open_store(persistent_url) as store:
            assert store.recover() == 0
            assert store.get("resp_live", HOLDER)["status"] == "in_progress"
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write("finish\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "finished"
        assert holder.wait(timeout=60) == 0
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    with open_store(persistent_url) as store:
        assert store.get("resp_live", HOLDER)["status"] == "completed"


def test_a_clean_close_marks_its_own_unfinished_responses_failed(persistent_url: str) -> None:
    with open_store(persistent_url) as store:
        store.begin("resp_open", owner=ALICE, resource=resource("resp_open"), input_items=[], input_messages=[])
    with open_store(persistent_url) as store:
        assert store.get("resp_open", ALICE)["status"] == "failed"


def test_a_kill_during_a_stream_of_writes_leaves_no_half_written_response(persistent_url: str) -> None:
    churn = worker("churn", persistent_url, "c")
    assert churn.stdout is not None
    acknowledged = [churn.stdout.readline().strip() for _ in range(15)]  # each printed after its commit
    time.sleep(0.03)
    churn.send_signal(signal.SIGKILL)
    churn.wait()
    owner = Owner.of_api_key("churn")
    statuses = []
    with open_store(persistent_url) as store:
        for i in itertools.count():
            try:
                stored = _settled(store, f"c_{i}", owner)
            except ResponseNotFound:
                break
            statuses.append(stored["status"])
            outputs = i % 7
            if stored["status"] == "completed":  # everything of its end ...
                assert stored["metadata"] == {"outputs": str(outputs)}
                assert [store.get_item(f"out_c_{i}_{j}", owner)["id"] for j in range(outputs)] == [
                    f"out_c_{i}_{j}" for j in range(outputs)
                ]
                assert len(store.load_history(f"c_{i}", owner).turns[0].output_messages) == outputs
            else:  # ... or nothing of it
                assert stored["status"] == "failed" and "metadata" not in stored
                assert store.load_history(f"c_{i}", owner).turns[0].output_messages == ()
                with pytest.raises(ItemNotFound):
                    store.get_item(f"out_c_{i}_{outputs - 1}", owner)
    assert statuses[: len(acknowledged)] == ["completed"] * len(acknowledged)
    assert statuses.count("failed") <= 1 and statuses[-1:] != ["in_progress"]


def test_two_processes_on_one_database_see_and_continue_each_others_responses(persistent_url: str) -> None:
    with open_store(persistent_url) as store:
        add_turn(store, "root", ALICE, None, "hello from the parent")
        made = json.loads(run_worker("extend", persistent_url, "root", "sk-alice-0123456789", "2", "child"))
        assert made == ["child_0", "child_1"]
        # The parent reads what the other process wrote, and continues it.
        add_turn(store, "parent_2", ALICE, "child_1", "back in the parent")
        seen = json.loads(run_worker("history", persistent_url, "parent_2", "sk-alice-0123456789"))
        assert seen["turns"] == ["root", "child_0", "child_1", "parent_2"]
        assert seen["messages"] == [m.to_dict() for m in store.load_history("parent_2", ALICE).messages()]


def test_concurrent_continuations_from_two_processes_form_branches(persistent_url: str) -> None:
    with open_store(persistent_url) as store:
        add_turn(store, "root", ALICE, None, "start")
    workers = [worker("extend", persistent_url, "root", "sk-alice-0123456789", "8", tag) for tag in ("p", "q")]
    outputs = [w.communicate(timeout=120) for w in workers]
    assert [w.returncode for w in workers] == [0, 0], [err for _, err in outputs]
    with open_store(persistent_url) as store:
        for tag in ("p", "q"):
            history = store.load_history(f"{tag}_7", ALICE)
            assert [t.response_id for t in history.turns] == ["root"] + [f"{tag}_{i}" for i in range(8)]


def test_a_writer_that_lost_its_postgresql_session_registers_again(postgres_url: str) -> None:
    first = open_store(postgres_url)
    try:
        first.begin("resp_1", owner=ALICE, resource=resource("resp_1"), input_items=[], input_messages=[])
        with psycopg.connect(postgres_url, autocommit=True) as admin:  # the server drops the lock holder
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                (WRITER_APPLICATION,),
            ).fetchall()
        assert killed == [(True,)]
        with open_store(postgres_url) as second:
            assert _settled(second, "resp_1", ALICE)["status"] == "failed"  # its lock was gone: taken for dead
            first.recover()  # notices, and registers anew
            first.begin("resp_2", owner=ALICE, resource=resource("resp_2"), input_items=[], input_messages=[])
            assert second.recover() == 0  # the new registration's responses are not taken for dead
            first.finish("resp_2", resource=resource("resp_2", "completed"), output_items=[], output_messages=[])
            with pytest.raises(ResponseNotInProgress):
                first.finish("resp_1", resource=resource("resp_1", "completed"), output_items=[], output_messages=[])
            assert second.get("resp_2", ALICE)["status"] == "completed"
    finally:
        first.close()
