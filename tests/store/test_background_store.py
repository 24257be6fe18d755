"""The store's side of background responses, on every backend: queued → in_progress → an end (cancelled
included), stored stream events read after a sequence number, and the cancel flag another process sets."""

from __future__ import annotations

import pytest
from store_builders import ALICE, BOB, input_item, resource, user

from harmony_responses.store import ResponseNotFound, ResponseNotInProgress, ResponseStatus, Store
from harmony_responses.store.model import InvalidArgument

pytest_plugins = ["store_fixtures"]


def _queued(store: Store, response_id: str) -> None:
    store.begin(
        response_id,
        owner=ALICE,
        resource=resource(response_id, "queued", background=True),
        input_items=[input_item(f"in_{response_id}", "hi")],
        input_messages=[user("hi")],
    )


def test_a_background_response_goes_queued_in_progress_then_cancelled(store: Store) -> None:
    _queued(store, "resp_bg")
    assert store.get("resp_bg", ALICE)["status"] == "queued"
    store.progress("resp_bg", resource("resp_bg", "in_progress", background=True))
    assert store.get("resp_bg", ALICE)["status"] == "in_progress"
    with pytest.raises(InvalidArgument):
        store.progress("resp_bg", resource("resp_bg", "completed"))
    store.finish("resp_bg", resource=resource("resp_bg", "cancelled"), output_items=[], output_messages=[])
    assert store.get("resp_bg", ALICE)["status"] == ResponseStatus.CANCELLED.value
    with pytest.raises(ResponseNotInProgress):
        store.progress("resp_bg", resource("resp_bg", "in_progress"))
    assert store.load_history("resp_bg", ALICE).turns[-1].status is ResponseStatus.CANCELLED  # it can be continued


def test_stored_events_are_read_after_a_sequence_number_in_order(store: Store) -> None:
    _queued(store, "resp_ev")
    assert store.append_events("resp_ev", [(0, "event: a\n\n"), (1, "event: b\n\n")]) is False
    assert store.append_events("resp_ev", [(2, "event: c\n\n")]) is False
    page = store.events_after("resp_ev", ALICE, 0)
    assert page.events == ((1, "event: b\n\n"), (2, "event: c\n\n")) and not page.finished
    assert store.events_after("resp_ev", ALICE, -1).events[0] == (0, "event: a\n\n")
    assert store.events_after("resp_ev", ALICE, 2).events == ()
    with pytest.raises(ResponseNotFound):
        store.events_after("resp_ev", BOB, -1)
    store.finish("resp_ev", resource=resource("resp_ev", "completed"), output_items=[], output_messages=[])
    assert store.events_after("resp_ev", ALICE, 1).finished
    with pytest.raises(ResponseNotInProgress):  # nothing is appended to an ended response
        store.append_events("resp_ev", [(3, "event: d\n\n")])
    store.delete("resp_ev", ALICE)  # its events go with it
    with pytest.raises(ResponseNotFound):
        store.events_after("resp_ev", ALICE, -1)


def test_a_cancel_request_is_a_flag_the_runner_reads(store: Store) -> None:
    _queued(store, "resp_cx")
    assert store.append_events("resp_cx", []) is False
    with pytest.raises(ResponseNotFound):
        store.request_cancel("resp_cx", BOB)
    assert store.request_cancel("resp_cx", ALICE)["status"] == "queued"
    assert store.append_events("resp_cx", []) is True
    assert store.events_after("resp_cx", ALICE, -1).cancel_requested
    store.finish("resp_cx", resource=resource("resp_cx", "cancelled"), output_items=[], output_messages=[])
    assert store.request_cancel("resp_cx", ALICE)["status"] == "cancelled"  # an ended response is left as it is


def test_recovery_fails_a_queued_response_of_a_closed_store(persistent_url: str) -> None:
    from harmony_responses.store import open_store

    first = open_store(persistent_url)
    _queued(first, "resp_lost")
    first.close()  # its unfinished responses are marked failed
    again = open_store(persistent_url)
    try:
        assert again.get("resp_lost", ALICE)["status"] == "failed"
    finally:
        again.close()
