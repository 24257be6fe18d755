"""code_interpreter end to end: a real `serve --engine demo --code-interpreter` process, real bubblewrap kernels.

The demo engine calls `python` with the code of a fenced block in the user's message when a code interpreter is
declared, then answers with the tool's output. Through it: the `code_interpreter_call` item and its events
(valid under the schemas and their overrides), the kernel's state kept across a `previous_response_id` chain
and in a container made with `POST /v1/containers`, the files the code wrote listed and read back, a fork
bomb, a runaway loop and a 10 GB allocation each ending as a failed call while `/health` keeps answering
quickly, and the configuration errors that stop the server before it listens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from responses_checker import assert_valid_event, assert_valid_response, check_stream
from services.bubblewrap import ensure_bwrap

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from serverkit import Server, sse_events  # noqa: E402

CI = {"type": "code_interpreter", "container": {"type": "auto"}}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    ensure_bwrap()
    proc = Server(
        "--engine",
        "demo",
        "--code-interpreter",
        "--hosted-timeout",
        "8",
        "--code-interpreter-cpu-seconds",
        "2",
        "--code-interpreter-memory-mb",
        "512",
        "--code-interpreter-processes",
        "32",
    )
    try:
        yield proc
    finally:
        proc.stop()


def ask(code: str) -> str:
    return f"Please run this:\n```python\n{code}\n```"


def create(server: Server, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    reply = httpx.post(server.url + "/v1/responses", json=body, timeout=60)
    assert reply.status_code == status, reply.text
    data: dict[str, Any] = reply.json()
    if status == 200:
        assert_valid_response(data)
    return data


def calls(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in response["output"] if item["type"] == "code_interpreter_call"]


def answer(response: dict[str, Any]) -> str:
    texts = [p["text"] for i in response["output"] if i["type"] == "message" for p in i["content"]]
    return "".join(texts)


def test_a_call_runs_in_the_sandbox_and_streams_its_events(server: Server) -> None:
    body = {
        "model": "gpt-oss",
        "input": ask("x = 6 * 7\nprint('x is', x)\nx + 1"),
        "tools": [CI],
        "include": ["code_interpreter_call.outputs"],
        "stream": True,
    }
    with httpx.stream("POST", server.url + "/v1/responses", json=body, timeout=60) as reply:
        assert reply.status_code == 200
        events = sse_events(reply.read().decode())
    for event in events:
        assert_valid_event(event)
    check_stream(events)
    kinds = [e["type"] for e in events]
    sequence = [
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
    ]
    at = [kinds.index(name) for name in sequence]
    assert at == sorted(at), kinds
    done = next(e for e in events if e["type"] == "response.code_interpreter_call_code.done")
    assert done["code"] == "x = 6 * 7\nprint('x is', x)\nx + 1"
    final = events[-1]["response"]
    assert final["status"] == "completed"
    (call,) = calls(final)
    assert call["status"] == "completed" and call["code"] == done["code"]
    assert call["container_id"].startswith("cntr_")
    assert call["outputs"] == [{"type": "logs", "logs": "x is 42\n43"}]
    assert "x is 42" in answer(final), "the model read the tool's output"


def test_state_is_kept_along_a_chain_and_outputs_only_when_included(server: Server) -> None:
    first = create(server, {"model": "gpt-oss", "input": ask("secret = 1234"), "tools": [CI]})
    (call,) = calls(first)
    assert call["outputs"] is None, "outputs only with include code_interpreter_call.outputs"
    second = create(
        server,
        {"model": "gpt-oss", "input": ask("secret * 2"), "tools": [CI], "previous_response_id": first["id"]},
    )
    (again,) = calls(second)
    assert again["container_id"] == call["container_id"], "auto continues the chain's container"
    assert "2468" in answer(second)
    fresh = create(server, {"model": "gpt-oss", "input": ask("secret"), "tools": [CI]})
    assert calls(fresh)[0]["container_id"] != call["container_id"]
    assert "NameError" in answer(fresh), "a new chain gets a new container"


def test_a_named_container_and_its_files(server: Server) -> None:
    made = httpx.post(server.url + "/v1/containers", json={"name": "mine"}, timeout=30)
    assert made.status_code == 200, made.text
    container = made.json()
    assert container["object"] == "container" and container["name"] == "mine"
    tools = [{"type": "code_interpreter", "container": container["id"]}]
    code = "import csv\nwith open('/mnt/data/table.csv', 'w') as f:\n    f.write('a,b\\n1,2\\n')\n'written'"
    response = create(server, {"model": "gpt-oss", "input": ask(code), "tools": tools})
    assert calls(response)[0]["container_id"] == container["id"]
    listing = httpx.get(f"{server.url}/v1/containers/{container['id']}/files", timeout=30).json()
    assert [f["path"] for f in listing["data"]] == ["/mnt/data/table.csv"]
    (entry,) = listing["data"]
    assert entry["object"] == "container.file" and entry["bytes"] == 8 and entry["container_id"] == container["id"]
    content = httpx.get(f"{server.url}/v1/containers/{container['id']}/files/{entry['id']}/content", timeout=30)
    assert content.status_code == 200 and content.content == b"a,b\n1,2\n"
    mine = httpx.get(server.url + "/v1/containers", timeout=30).json()
    assert container["id"] in [c["id"] for c in mine["data"]]
    deleted = httpx.delete(f"{server.url}/v1/containers/{container['id']}", timeout=30).json()
    assert deleted == {"id": container["id"], "object": "container.deleted", "deleted": True}
    gone = create(server, {"model": "gpt-oss", "input": ask("1"), "tools": tools}, status=400)
    assert gone["error"]["param"] == "tools[0].container"
    assert httpx.get(f"{server.url}/v1/containers/{container['id']}/files", timeout=30).status_code == 404


class HealthWatch:
    """Polls /health from a thread while a request runs; the slowest answer seen."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.slowest = 0.0
        self.count = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        with httpx.Client(timeout=10) as client:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    status = client.get(self.url + "/health").status_code
                    if status != 200:
                        self.failures.append(str(status))
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                self.slowest = max(self.slowest, time.monotonic() - started)
                self.count += 1
                time.sleep(0.05)

    def stop(self, at_least: int = 3) -> None:
        """Stops once `at_least` answers were had: a call the sandbox ends at once (a 10 GB allocation refused in
        milliseconds) still shows the server answering, rather than failing for lack of polls."""
        deadline = time.monotonic() + 10
        while self.count < at_least and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.02)
        self._stop.set()
        self._thread.join(15)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("import os\nwhile True:\n    os.fork()", "Resource temporarily unavailable"),
        ("while True:\n    pass", "CPU time limit"),
        ("b = bytearray(10 * 1024**3)", "MemoryError"),
        ("import time\ntime.sleep(60)", "timed out"),
    ],
    ids=["fork-bomb", "infinite-loop", "10GB", "sleep"],
)
def test_limits_end_as_a_tool_error_and_the_server_keeps_serving(server: Server, code: str, words: str) -> None:
    create(server, {"model": "gpt-oss", "input": ask("'warm'"), "tools": [CI]})  # the server's first response is slow
    watch = HealthWatch(server.url)
    try:
        response = create(
            server,
            {"model": "gpt-oss", "input": ask(code), "tools": [CI], "include": ["code_interpreter_call.outputs"]},
        )
    finally:
        watch.stop()
    assert response["status"] == "completed", "a failed tool call does not fail the response"
    (call,) = calls(response)
    assert call["status"] == "failed", call
    assert words in answer(response), "the model read what happened"
    print(f"{code.splitlines()[-1]!r}: slowest /health {watch.slowest * 1000:.0f} ms of {watch.count}")
    assert not watch.failures and watch.count >= 3
    assert watch.slowest < 1.0, f"/health took {watch.slowest:.2f}s while the sandbox was busy"
    after = create(server, {"model": "gpt-oss", "input": ask("1 + 1"), "tools": [CI]})
    assert calls(after)[0]["status"] == "completed" and "2" in answer(after)


def test_requests_the_sandbox_cannot_honour_are_400s(server: Server) -> None:
    cases = [
        ({"type": "code_interpreter", "container": "cntr_nope"}, "tools[0].container"),
        (
            {"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file_1"]}},
            "tools[0].container.file_ids",
        ),
        (
            {"type": "code_interpreter", "container": {"type": "auto", "memory_limit": "64g"}},
            "tools[0].container.memory_limit",
        ),
        (
            {"type": "code_interpreter", "container": {"type": "auto", "network_policy": {"type": "allowlist"}}},
            "tools[0].container.network_policy",
        ),
        ({"type": "code_interpreter", "container": 7}, "tools[0].container"),
    ]
    for tool, param in cases:
        error = create(server, {"model": "gpt-oss", "input": "hi", "tools": [tool]}, status=400)
        assert error["error"]["param"] == param, (tool, error)


def test_configuration_errors_stop_the_server_before_it_listens() -> None:
    base = [sys.executable, "-m", "harmony_responses.cli", "serve", "--port", "0", "--code-interpreter"]
    for extra, words in (
        (["--workers", "2"], "workers = 1"),
        (["--code-interpreter-python", "/nonexistent/python"], "not an executable file"),
        (["--code-interpreter-memory-mb", "0"], "code_interpreter_memory_mb must be at least 1"),
    ):
        run = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=60)
        assert run.returncode == 2, run
        assert words in run.stderr and "listening" not in run.stdout, run.stderr
        assert len(run.stderr.strip().splitlines()) == 1


def test_without_the_setting_the_tool_is_not_run() -> None:
    proc = Server("--engine", "demo")
    try:
        reply = httpx.post(
            proc.url + "/v1/responses", json={"model": "gpt-oss", "input": ask("1"), "tools": [CI]}, timeout=30
        )
        assert reply.status_code == 200
        data = reply.json()
        assert not calls(data)
        assert [t["type"] for t in data.get("harmony:unavailable_tools", [])] == ["code_interpreter"]
        assert httpx.get(proc.url + "/v1/containers", timeout=30).status_code == 404
    finally:
        proc.stop()


def test_events_are_json_lines(server: Server) -> None:
    """A failed call streams too: its events are valid and the stream ends with response.completed."""
    body = {"model": "gpt-oss", "input": ask("while True:\n    pass"), "tools": [CI], "stream": True}
    with httpx.stream("POST", server.url + "/v1/responses", json=body, timeout=60) as reply:
        events = sse_events(reply.read().decode())
    for event in events:
        assert_valid_event(event)
    check_stream(events)
    done = [e for e in events if e["type"] == "response.output_item.done"]
    failed = [e["item"] for e in done if e["item"]["type"] == "code_interpreter_call"]
    assert [c["status"] for c in failed] == ["failed"]
    assert json.loads(json.dumps(events[-1]))["type"] == "response.completed"


def test_a_container_belongs_to_the_key_that_made_it() -> None:
    proc = Server("--engine", "demo", "--code-interpreter", env={"HARMONY_RESPONSES_API_KEYS": "key-a,key-b"})
    try:
        a = {"Authorization": "Bearer key-a"}
        b = {"Authorization": "Bearer key-b"}
        assert httpx.get(proc.url + "/v1/containers", timeout=30).status_code == 401, "no key, no containers"
        made = httpx.post(proc.url + "/v1/containers", json={"name": "a's"}, headers=a, timeout=30).json()
        where = f"{proc.url}/v1/containers/{made['id']}"
        assert httpx.get(where, headers=a, timeout=30).status_code == 200
        assert httpx.get(where, headers=b, timeout=30).status_code == 404
        assert httpx.get(where + "/files", headers=b, timeout=30).status_code == 404
        assert httpx.delete(where, headers=b, timeout=30).status_code == 404
        assert [c["id"] for c in httpx.get(proc.url + "/v1/containers", headers=b, timeout=30).json()["data"]] == []
        assert [c["id"] for c in httpx.get(proc.url + "/v1/containers", headers=a, timeout=30).json()["data"]] == [
            made["id"]
        ]
    finally:
        proc.stop()


def test_a_background_response_runs_its_code_too(server: Server) -> None:
    queued = create(
        server, {"model": "gpt-oss", "input": ask("sum(range(10))"), "tools": [CI], "background": True, "store": True}
    )
    deadline = time.monotonic() + 60
    polled = queued
    while polled["status"] in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.2)
        polled = httpx.get(f"{server.url}/v1/responses/{queued['id']}", timeout=30).json()
    assert polled["status"] == "completed", polled
    assert_valid_response(polled)
    (call,) = calls(polled)
    assert call["status"] == "completed" and "45" in answer(polled)


def test_output_items_sent_back_as_input_continue_the_container(server: Server) -> None:
    first = create(server, {"model": "gpt-oss", "input": ask("kept = 'across turns'"), "tools": [CI], "store": False})
    (call,) = calls(first)
    turn = [{"role": "user", "content": ask("kept = 'across turns'")}, *first["output"]]
    turn.append({"role": "user", "content": ask("kept.upper()")})
    second = create(server, {"model": "gpt-oss", "input": turn, "tools": [CI], "store": False})
    (again,) = calls(second)
    assert again["container_id"] == call["container_id"], "auto takes the container the conversation sent back"
    assert "ACROSS TURNS" in answer(second)
    bare = [
        {k: v for k, v in item.items() if k != "harmony:hosted"} if isinstance(item, dict) else item for item in turn
    ]
    third = create(server, {"model": "gpt-oss", "input": bare, "tools": [CI], "store": False})
    assert calls(third)[0]["container_id"] == call["container_id"], "without harmony:hosted: from code and id"
