"""Background responses through the official `openai` SDK against real `serve` processes.

`background=True` answers `queued` at once and is polled to its end; a cancel mid-run gives `cancelled` (and a
second cancel the same); `stream=True` with `background=True` is dropped after a few events and resumed with
`starting_after`, giving exactly the missing events in order, ending with the terminal event. On one PostgreSQL
database a second process serves the poll, the resume and the cancel, and a process killed mid-run leaves its
response failed by the other's sweep, its resumed stream ending with `response.failed`. Every event and every
polled response is checked against the Open Responses schema.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import BadRequestError, OpenAI
from responses_checker import assert_valid_event, assert_valid_response, check_stream

from serverkit import Server, sse_events

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
pytest_plugins = ["store_fixtures"]

MODEL = "gpt-oss"
KEY = "none"  # no keys are configured, but what is stored belongs to the key presented: the raw reads present it too
AUTH = {"Authorization": f"Bearer {KEY}"}


def client(server: Server) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)


def poll(sdk: OpenAI, response_id: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        response = sdk.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress") or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def poll_until(sdk: OpenAI, response_id: str, status: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while (response := sdk.responses.retrieve(response_id)).status != status and time.monotonic() < deadline:
        time.sleep(0.02)
    return response


def raw_events(server: Server, response_id: str, starting_after: int | None = None) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"stream": "true"}
    if starting_after is not None:
        params["starting_after"] = starting_after
    answer = httpx.get(f"{server.url}/v1/responses/{response_id}", params=params, headers=AUTH, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.text.endswith("data: [DONE]\n\n")
    return sse_events(answer.text)


def raw_response(server: Server, response_id: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{server.url}/v1/responses/{response_id}", headers=AUTH, timeout=30).json()
    assert_valid_response(data)
    return data


@pytest.fixture(scope="module")
def fast(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    store = tmp_path_factory.mktemp("background") / "responses.sqlite3"
    server = Server("--engine", "demo?tps=200", "--store", f"sqlite:///{store}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def slow() -> Iterator[Server]:
    server = Server("--engine", "demo?tps=10&chunk=1", "--store", "memory")
    try:
        yield server
    finally:
        server.stop()


def test_a_background_response_is_queued_at_once_and_polled_to_its_end(fast: Server) -> None:
    sdk = client(fast)
    created = sdk.responses.create(model=MODEL, input="Say hello.", background=True)
    assert created.status == "queued" and created.background is True
    assert raw_response(fast, created.id)["status"] in ("queued", "in_progress", "completed")
    done = poll(sdk, created.id)
    assert done.status == "completed", done
    assert done.background is True and "Say hello." in done.output_text
    assert [item.type for item in done.output] == ["reasoning", "message"]
    assert_valid_response(raw_response(fast, created.id))
    with pytest.raises(BadRequestError) as refused:  # it has no events: it was not streamed
        list(sdk.responses.retrieve(created.id, stream=True))
    assert "stream" in str(refused.value)


def test_background_needs_the_store_and_only_background_responses_cancel(fast: Server) -> None:
    sdk = client(fast)
    with pytest.raises(BadRequestError) as refused:
        sdk.responses.create(model=MODEL, input="hi", background=True, store=False)
    assert refused.value.body["param"] == "background"  # type: ignore[index]
    foreground = sdk.responses.create(model=MODEL, input="hi")
    with pytest.raises(BadRequestError):
        sdk.responses.cancel(foreground.id)
    with pytest.raises(BadRequestError):
        list(sdk.responses.retrieve(foreground.id, stream=True))


def test_cancel_mid_run_gives_cancelled_and_a_second_cancel_the_same(slow: Server) -> None:
    sdk = client(slow)
    created = sdk.responses.create(model=MODEL, input="Tell me something long.", background=True)
    deadline = time.monotonic() + 20
    while sdk.responses.retrieve(created.id).status == "queued" and time.monotonic() < deadline:
        time.sleep(0.05)
    cancelled = sdk.responses.cancel(created.id)
    assert cancelled.status == "cancelled" and cancelled.error is None
    assert_valid_response(raw_response(slow, created.id))
    assert sdk.responses.retrieve(created.id).status == "cancelled"
    time.sleep(0.3)
    assert sdk.responses.cancel(created.id).status == "cancelled"  # idempotent, as OpenAI's API
    finished = sdk.responses.create(model=MODEL, input="x", background=True)
    done = poll(sdk, finished.id)
    assert done.status == "completed"
    assert sdk.responses.cancel(finished.id).status == "completed"  # a finished response comes back unchanged


def test_a_cancelled_stream_ends_with_its_terminal_event(slow: Server) -> None:
    sdk = client(slow)
    stream = sdk.responses.create(model=MODEL, input="Long please.", background=True, stream=True)
    first = [next(iter(stream)) for _ in range(4)]
    stream.close()
    response_id = first[0].response.id  # type: ignore[union-attr]
    assert sdk.responses.cancel(response_id).status == "cancelled"
    events = raw_events(slow, response_id)
    check_stream(events)
    assert [e["type"] for e in events[-2:]] == ["error", "response.failed"]
    assert events[-2]["error"]["code"] == "response_cancelled"
    assert events[-1]["response"]["error"]["code"] == "response_cancelled"


def _drop_and_resume(sdk: OpenAI, resumer: OpenAI, keep: int) -> tuple[str, list[int], list[Any]]:
    stream = sdk.responses.create(model=MODEL, input="Stream it, then again.", background=True, stream=True)
    seen: list[Any] = []
    for event in stream:
        seen.append(event)
        if len(seen) == keep:
            break
    stream.close()  # the client leaves: the response runs on
    response_id: str = seen[0].response.id
    last = seen[-1].sequence_number
    resumed = list(resumer.responses.retrieve(response_id, stream=True, starting_after=last))
    return response_id, [e.sequence_number for e in seen], resumed


def test_a_dropped_stream_resumes_with_exactly_the_missing_events(slow: Server) -> None:
    sdk = client(slow)
    response_id, seen, resumed = _drop_and_resume(sdk, sdk, keep=7)
    assert seen == list(range(7))
    numbers = [e.sequence_number for e in resumed]
    assert numbers == list(range(7, 7 + len(numbers))), numbers
    assert resumed[-1].type == "response.completed"
    whole = raw_events(slow, response_id)
    check_stream(whole)  # the stored stream is the spec's, in order, one terminal event
    assert [e["sequence_number"] for e in whole] == list(range(len(whole)))
    assert [e.type for e in resumed] == [e["type"] for e in whole[7:]]
    assert raw_events(slow, response_id, starting_after=len(whole) - 3) == whole[-2:]
    assert raw_response(slow, response_id)["status"] == "completed"
    final: Any = resumed[-1]
    assert sdk.responses.retrieve(response_id).output_text == final.response.output_text


# -- two processes on one PostgreSQL database -------------------------------------------------------------------


@pytest.fixture
def pair(postgres_server: Any) -> Iterator[tuple[Server, Server, str]]:
    url = postgres_server.create_database()
    first = Server("--engine", "demo?tps=12&chunk=1", "--store", url, "--store-recover-interval", "0.3")
    try:
        second = Server("--engine", "demo?tps=12&chunk=1", "--store", url, "--store-recover-interval", "0.3")
        try:
            yield first, second, url
        finally:
            second.stop()
    finally:
        first.stop()
        postgres_server.drop_database(url)


def test_postgresql_a_second_process_polls_resumes_and_cancels(pair: tuple[Server, Server, str]) -> None:
    one, two, _url = pair
    sdk_one, sdk_two = client(one), client(two)
    response_id, seen, resumed = _drop_and_resume(sdk_one, sdk_two, keep=5)
    assert seen == list(range(5))
    assert [e.sequence_number for e in resumed] == list(range(5, 5 + len(resumed)))
    assert resumed[-1].type == "response.completed"
    assert poll(sdk_two, response_id).status == "completed"
    whole = raw_events(two, response_id)
    check_stream(whole)

    running = sdk_one.responses.create(model=MODEL, input="A long one to cancel elsewhere.", background=True)
    assert sdk_two.responses.retrieve(running.id).status in ("queued", "in_progress")
    time.sleep(0.5)
    cancelled = sdk_two.responses.cancel(running.id)  # served by the process that does not run it
    assert cancelled.status == "cancelled", cancelled.status
    assert sdk_one.responses.retrieve(running.id).status == "cancelled"
    assert_valid_response(raw_response(one, running.id))


def test_postgresql_a_killed_process_leaves_its_background_response_failed(
    postgres_server: Any,
) -> None:
    url = postgres_server.create_database()
    try:
        doomed = Server("--engine", "demo?tps=5&chunk=1", "--store", url)
        survivor = Server("--engine", "demo", "--store", url, "--store-recover-interval", "0.3")
        try:
            stream = client(doomed).responses.create(model=MODEL, input="Never finished.", background=True, stream=True)
            first = next(iter(stream))
            stream.close()
            response_id = first.response.id  # type: ignore[union-attr]
            time.sleep(0.3)
            doomed.popen.send_signal(signal.SIGKILL)
            doomed.popen.wait(10)
            failed = poll(client(survivor), response_id, timeout=20)
            assert failed.status == "failed", failed.status
            events = raw_events(survivor, response_id, starting_after=0)
            assert events[-1]["type"] == "response.failed" and events[0]["sequence_number"] == 1
            assert [e["sequence_number"] for e in events] == list(range(1, 1 + len(events)))
            for event in events:
                assert_valid_event(event)
        finally:
            survivor.stop()
            doomed.stop()
    finally:
        postgres_server.drop_database(url)


def test_background_responses_get_the_drain_grace_then_fail_shutting_down(tmp_path: Any) -> None:
    """SIGTERM with two background responses running: each gets `--shutdown-timeout` as a stream would. The
    short one finishes within it; the long one is failed at the deadline with `server_shutting_down`, settled by
    the stopping process itself (what it wrote is kept), not by the next open's recovery."""
    grace = 2.0
    store = f"sqlite:///{tmp_path / 'responses.sqlite3'}"
    server = Server("--engine", "demo?tps=40&chunk=1", "--store", store, "--shutdown-timeout", str(grace))
    try:
        sdk = client(server)
        short = sdk.responses.create(model=MODEL, input="Short.", max_output_tokens=40, background=True)  # ~1 s
        long = sdk.responses.create(
            model=MODEL, input="Please quote all of this back. " * 40, max_output_tokens=4000, background=True
        )
        assert poll_until(sdk, long.id, "in_progress").status == "in_progress"
        signalled = time.monotonic()
        server.popen.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        late = httpx.post(f"{server.url}/v1/responses", json={"input": "late"}, timeout=10)
        assert late.status_code == 503 and late.json()["error"]["code"] == "server_shutting_down"
        assert server.popen.wait(grace + 20) == 0
        assert time.monotonic() - signalled >= grace - 0.2  # the worker stayed for the grace
        assert "Traceback" not in server.output(), server.output()[-3000:]
    finally:
        server.stop()
    again = Server("--engine", "demo", "--store", store)
    try:
        finished = raw_response(again, short.id)
        assert finished["status"] in ("completed", "incomplete") and finished["error"] is None, json.dumps(finished)
        cut = raw_response(again, long.id)
        assert cut["status"] == "failed", json.dumps(cut)[:300]
        assert cut["error"]["code"] == "server_shutting_down"
        assert "server stopped before this background response finished" in cut["error"]["message"]
        assert cut["output"] and cut["usage"] is not None
    finally:
        again.stop()
