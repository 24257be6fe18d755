"""Reliability through real server processes: a kill -9 mid-stream, two servers on one PostgreSQL, and
concurrent continuations of one response.

Longer runs: `HARMONY_KILL_ROUNDS=N` repeats the kill test N times, `HARMONY_KILL_STREAMS=N` sets its
number of concurrent streams (default 50), `HARMONY_CONTINUATIONS=N` the concurrent continuations (12).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from responses_checker import check_stream
from websockets.sync.client import connect

from serverkit import Server, sse_events

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))
pytest_plugins = ["store_fixtures"]

from store_builders import worker  # noqa: E402

KILL_ROUNDS = int(os.environ.get("HARMONY_KILL_ROUNDS", "1"))
STREAMS = int(os.environ.get("HARMONY_KILL_STREAMS", "50"))
CONTINUATIONS = int(os.environ.get("HARMONY_CONTINUATIONS", "12"))
KEY = {"Authorization": "Bearer sk-reliable"}
WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


def post(url: str, body: dict[str, Any], path: str = "/v1/responses") -> dict[str, Any]:
    response = httpx.post(url + path, json={"model": "gpt-oss", **body}, headers=KEY, timeout=60)
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()
    return data


def get(url: str, response_id: str) -> httpx.Response:
    return httpx.get(f"{url}/v1/responses/{response_id}", headers=KEY, timeout=30)


# -- kill -9 in the middle of concurrent streams --------------------------------------------------------------


@dataclass
class Stream:
    """What one client saw of its streamed response."""

    text: str
    events: list[dict[str, Any]] = field(default_factory=list)
    broken: bool = False

    @property
    def response_id(self) -> str | None:
        return self.events[0]["response"]["id"] if self.events else None

    @property
    def terminal(self) -> dict[str, Any] | None:
        last = self.events[-1] if self.events else None
        return last if last is not None and last["type"].startswith("response.") and "response" in last and (
            last["response"]["status"] != "in_progress"
        ) else None  # fmt: skip


def _read(url: str, stream: Stream, started: threading.Event) -> None:
    body = {"model": "gpt-oss", "input": stream.text, "stream": True}
    buffer = ""
    try:
        with httpx.stream("POST", url + "/v1/responses", json=body, headers=KEY, timeout=60) as response:
            for chunk in response.iter_text():
                buffer += chunk
                frames, _, buffer = buffer.rpartition("\n\n")
                if frames:
                    stream.events += sse_events(frames + "\n\n")
                    started.set()
    except httpx.HTTPError:
        stream.broken = True


def _kill_mid_stream(tmp_path: Path, round_: int) -> None:
    store = f"sqlite:///{tmp_path / f'kill-{round_}.sqlite3'}"
    server = Server("--engine", "demo:?tps=150", "--store", store)
    # Answers of different lengths (the demo quotes the message back): some end before the kill, most do not.
    streams = [Stream(f"Message {i}: " + "lorem ipsum " * (i * 4 % 90)) for i in range(STREAMS)]
    events = [threading.Event() for _ in streams]
    threads = [threading.Thread(target=_read, args=(server.url, s, e)) for s, e in zip(streams, events, strict=True)]
    try:
        for t in threads:
            t.start()
        for e in events:
            assert e.wait(30), "a stream did not start"
        target = max(3, STREAMS * (round_ % 4 + 1) // 8)  # kill after 1/8, 2/8, 3/8 or 4/8 of them ended
        deadline = time.monotonic() + 30
        while sum(s.terminal is not None for s in streams) < target and time.monotonic() < deadline:
            time.sleep(0.01)
        server.popen.kill()  # SIGKILL: no shutdown, no close, the store is left as the kill found it
        server.popen.wait(10)
    finally:
        for t in threads:
            t.join(60)
        server.stop()
    completed = [s for s in streams if s.terminal is not None]
    cut = [s for s in streams if s.terminal is None]
    assert completed and cut, f"the kill must land mid-way: {len(completed)} ended, {len(cut)} cut"

    restarted = Server("--engine", "demo", "--store", store)
    try:
        statuses: dict[str, int] = {}
        for s in streams:
            assert s.response_id is not None
            found = get(restarted.url, s.response_id)
            if found.status_code == 404:
                assert s.terminal is None, "a response the client saw end was lost"
                statuses["absent"] = statuses.get("absent", 0) + 1
                continue
            stored = found.json()
            seen = stored["status"] + ("" if s.terminal is not None or stored["status"] == "failed" else " unseen")
            statuses[seen] = statuses.get(seen, 0) + 1
            assert stored["status"] in ("completed", "incomplete", "failed"), "half-written: still in progress"
            if s.terminal is not None:  # acknowledged: stored exactly as the client saw it end
                assert stored == s.terminal["response"]
                check_stream(s.events)
            # (stored whole but not acknowledged is possible too: the kill fell between the commit and the send)
            if stored["status"] == "failed":
                assert stored["error"]["code"] == "server_error" and stored["output"] == []
                continue
            items = httpx.get(f"{restarted.url}/v1/responses/{s.response_id}/input_items", headers=KEY).json()
            # input_items lists a message's content as typed parts, as OpenAI does
            assert [i["content"] for i in items["data"]] == [[{"type": "input_text", "text": s.text}]]
            follow = post(restarted.url, {"input": "And then?", "previous_response_id": s.response_id})
            assert follow["status"] == "completed" and follow["usage"]["input_tokens"] > len(s.text) // 8
    finally:
        restarted.stop()
    print(f"kill round {round_}: {len(completed)} ended before the kill, {len(cut)} cut; after restart {statuses}")


@pytest.mark.parametrize("round_", range(KILL_ROUNDS))
def test_a_kill_9_mid_stream_leaves_every_response_absent_complete_or_failed(tmp_path: Path, round_: int) -> None:
    _kill_mid_stream(tmp_path, round_)


def test_a_running_server_sweeps_up_the_responses_of_a_process_that_died(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    server = Server("--engine", "demo", "--store", store, "--store-recover-interval", "0.2")
    try:
        holder = worker("hold", store, "resp_held", "sk-holder", stdin=subprocess.PIPE)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "started"
        headers = {"Authorization": "Bearer sk-holder"}
        url = f"{server.url}/v1/responses/resp_held"
        assert httpx.get(url, headers=headers).json()["status"] == "in_progress"  # its writer is alive
        holder.kill()
        holder.wait(10)
        deadline = time.monotonic() + 10
        while (stored := httpx.get(url, headers=headers).json())["status"] == "in_progress":
            assert time.monotonic() < deadline, "the sweep did not mark the dead process's response failed"
            time.sleep(0.05)
        assert stored["status"] == "failed" and stored["error"]["code"] == "server_error"
    finally:
        server.stop()


# -- two servers on one PostgreSQL ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair(postgres_server: Any) -> Iterator[tuple[Server, Server]]:
    url = postgres_server.create_database()
    first = Server("--engine", "demo", "--store", url)
    try:
        second = Server("--engine", "demo", "--store", url)
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()
        postgres_server.drop_database(url)


def test_a_response_made_on_one_server_is_continued_on_the_other(pair: tuple[Server, Server]) -> None:
    one, two = pair
    called = post(one.url, {"input": "Weather in Oslo?", "tools": [WEATHER]})
    call = next(item for item in called["output"] if item["type"] == "function_call")
    assert get(two.url, called["id"]).json() == called
    answered = post(
        two.url,
        {"previous_response_id": called["id"], "tools": [WEATHER],
         "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": '{"temp_c": -3}'}]},
    )  # fmt: skip
    assert "received from get_weather" in answered["output"][-1]["content"][0]["text"]
    back = post(one.url, {"input": "Thanks!", "previous_response_id": answered["id"]})
    assert back["status"] == "completed"

    compacted = post(one.url, {"previous_response_id": back["id"]}, path="/v1/responses/compact")
    follow = [*compacted["output"], {"type": "message", "role": "user", "content": "Go on."}]
    assert post(two.url, {"input": follow})["status"] == "completed"  # signed with the key both share

    with connect(two.url.replace("http://", "ws://") + "/v1/responses", additional_headers=KEY) as ws:
        ws.send(json.dumps({"type": "response.create", "model": "gpt-oss", "input": "On a socket.",
                            "previous_response_id": back["id"]}))  # fmt: skip
        while (event := json.loads(ws.recv(timeout=30)))["type"] not in ("response.completed", "error"):
            pass
    assert event["type"] == "response.completed" and event["response"]["previous_response_id"] == back["id"]


def test_concurrent_continuations_of_one_response_each_get_their_own_branch(pair: tuple[Server, Server]) -> None:
    servers = [s.url for s in pair]
    root = post(servers[0], {"input": "The root of many branches."})

    def branch(n: int) -> tuple[dict[str, Any], dict[str, Any]]:
        url = servers[n % 2]
        first = post(url, {"input": f"Branch {n:03d}.", "previous_response_id": root["id"]})
        second = post(servers[(n + 1) % 2], {"input": "Deeper.", "previous_response_id": first["id"]})
        return first, second

    with ThreadPoolExecutor(CONTINUATIONS) as pool:
        results = list(pool.map(branch, range(CONTINUATIONS)))
    ids = {r["id"] for pair_ in results for r in pair_}
    assert len(ids) == 2 * CONTINUATIONS  # nothing merged, nothing lost
    for n, (first, second) in enumerate(results):
        assert first["previous_response_id"] == root["id"] and second["previous_response_id"] == first["id"]
        assert f"Branch {n:03d}." in first["output"][-1]["content"][0]["text"]
        items = httpx.get(f"{servers[0]}/v1/responses/{first['id']}/input_items", headers=KEY).json()["data"]
        assert [i["content"] for i in items] == [[{"type": "input_text", "text": f"Branch {n:03d}."}]]
    # Every branch's prompt is the root turn, its own turn and "Deeper.": the same length, none holds another's.
    assert len({second["usage"]["input_tokens"] for _, second in results}) == 1
