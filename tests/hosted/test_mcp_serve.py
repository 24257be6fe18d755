"""`serve --mcp` end to end: a real `serve --engine demo` process, a real MCP server (MCP SDK) process, on 127.0.0.1.

The demo engine calls the MCP tool the user's message names (`notes.add`); the server lists the MCP server's
tools, runs the call, and the model's answer quotes the tool's output. Every event and response is checked against
the schemas and their overrides (tests/responses_checker.py). The credentials a request carries reach the MCP
server and appear neither in the server's output nor in its store.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from responses_checker import assert_valid_event, assert_valid_response, check_stream  # noqa: E402
from test_mcp_backend import TOKEN, McpProcess  # noqa: E402

from serverkit import Server, sse_events  # noqa: E402

TENANT = "tenant-4b1d7e"


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpProcess]:
    proc = McpProcess()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    proc = Server("--engine", "demo", "--mcp", "--hosted-allow", "127.0.0.1")
    try:
        yield proc
    finally:
        proc.stop()


def mcp_tool(url: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "mcp",
        "server_label": "notes",
        "server_url": url,
        "authorization": TOKEN,
        "headers": {"X-Tenant": TENANT},
        "require_approval": "never",
        **fields,
    }


def post(server: Server, body: dict[str, Any]) -> dict[str, Any]:
    reply = httpx.post(server.url + "/v1/responses", json={"model": "gpt-oss", **body}, timeout=60)
    assert reply.status_code == 200, reply.text
    data: dict[str, Any] = reply.json()
    assert_valid_response(data)
    return data


def stream(server: Server, body: dict[str, Any]) -> list[dict[str, Any]]:
    reply = httpx.post(server.url + "/v1/responses", json={"model": "gpt-oss", "stream": True, **body}, timeout=60)
    assert reply.status_code == 200, reply.text
    events = sse_events(reply.text)
    for event in events:
        assert_valid_event(event)
    check_stream(events)
    return events


def types(response: dict[str, Any]) -> list[str]:
    return [item["type"] for item in response["output"]]


def answer(response: dict[str, Any]) -> str:
    return "".join(part["text"] for item in response["output"] if item["type"] == "message" for part in item["content"])


def test_list_call_and_answer_streamed(server: Server, mcp_server: McpProcess) -> None:
    events = stream(server, {"input": "Add with notes.add, please.", "tools": [mcp_tool(mcp_server.url)]})
    names = [e["type"] for e in events]
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert types(final)[0] == "mcp_list_tools" and "mcp_call" in types(final)
    listing = final["output"][0]
    assert {t["name"] for t in listing["tools"]} >= {"add", "whoami", "explode"}
    call = next(i for i in final["output"] if i["type"] == "mcp_call")
    assert call["server_label"] == "notes" and call["name"] == "add" and call["status"] == "completed"
    assert call["output"] is not None and call["output"] in answer(final)  # the model read it and quoted it
    for kind in (
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.completed",
    ):
        assert kind in names, kind
    assert names.index("response.mcp_call.in_progress") < names.index("response.mcp_call.completed")
    seen = [c for c in mcp_server.calls() if c["tool"] == "add"][-1]
    assert seen["headers"]["authorization"] == f"Bearer {TOKEN}" and seen["headers"]["x-tenant"] == TENANT


def test_tool_error_reaches_the_model(server: Server, mcp_server: McpProcess) -> None:
    data = post(server, {"input": "Try notes.explode.", "tools": [mcp_tool(mcp_server.url)]})
    call = next(i for i in data["output"] if i["type"] == "mcp_call")
    assert call["name"] == "explode" and call["status"] == "failed"
    assert call["error"]["type"] == "mcp_tool_execution_error"
    assert "exploded" in answer(data)


def test_header_checked_by_the_tool(server: Server, mcp_server: McpProcess) -> None:
    good = post(server, {"input": "Use notes.whoami.", "tools": [mcp_tool(mcp_server.url)]})
    assert f"tenant {TENANT}" in answer(good)
    bad = post(server, {"input": "Use notes.whoami.", "tools": [mcp_tool(mcp_server.url, authorization="nope")]})
    call = next(i for i in bad["output"] if i["type"] == "mcp_call")
    assert call["status"] == "failed" and "not authorized" in answer(bad)


def test_allowed_tools_filter(server: Server, mcp_server: McpProcess) -> None:
    data = post(
        server,
        {"input": "Use notes.explode.", "tools": [mcp_tool(mcp_server.url, allowed_tools=["add", "whoami"])]},
    )
    listing = data["output"][0]
    assert [t["name"] for t in listing["tools"]] == ["add", "whoami"]
    calls = [i for i in data["output"] if i["type"] == "mcp_call"]
    assert all(c["name"] in ("add", "whoami") for c in calls)  # explode was never offered


def test_listing_cached_across_the_chain(server: Server, mcp_server: McpProcess) -> None:
    first = post(server, {"input": "Use notes.add.", "tools": [mcp_tool(mcp_server.url)]})
    assert types(first)[0] == "mcp_list_tools"
    second = post(
        server,
        {"input": "Again, notes.add.", "previous_response_id": first["id"], "tools": [mcp_tool(mcp_server.url)]},
    )
    assert "mcp_list_tools" not in types(second) and "mcp_call" in types(second)


def test_approval_round_trip(server: Server, mcp_server: McpProcess) -> None:
    tool = mcp_tool(mcp_server.url, require_approval={"never": {"tool_names": ["add"]}})
    events = stream(server, {"input": "Remove it: notes.delete_note.", "tools": [tool]})  # streamed: checked in order
    assert events[-1]["type"] == "response.completed"
    first = events[-1]["response"]
    assert first["status"] == "completed" and types(first)[-1] == "mcp_approval_request"
    assert not any(e["type"].startswith("response.mcp_call") for e in events)  # nothing ran
    request = first["output"][-1]
    assert request["name"] == "delete_note"
    before = [c for c in mcp_server.calls() if c["tool"] == "delete_note"]
    approved = post(
        server,
        {
            "previous_response_id": first["id"],
            "input": [{"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}],
            "tools": [tool],
        },
    )
    call = approved["output"][0]
    assert call["type"] == "mcp_call" and call["approval_request_id"] == request["id"] and call["name"] == "delete_note"
    assert call["status"] == "completed" and "deleted note" in answer(approved)
    assert len([c for c in mcp_server.calls() if c["tool"] == "delete_note"]) == len(before) + 1
    again = httpx.post(
        server.url + "/v1/responses",
        json={
            "model": "gpt-oss",
            "previous_response_id": approved["id"],
            "input": [{"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}],
            "tools": [tool],
        },
        timeout=60,
    )
    assert again.status_code == 400 and "answered already" in again.json()["error"]["message"]


def test_denied_call_never_runs(server: Server, mcp_server: McpProcess) -> None:
    tool = mcp_tool(mcp_server.url, require_approval="always")
    first = post(server, {"input": "Remove it: notes.delete_note.", "tools": [tool]})
    request = first["output"][-1]
    assert request["type"] == "mcp_approval_request"
    before = len([c for c in mcp_server.calls() if c["tool"] == "delete_note"])
    # The whole conversation as input this time (no previous_response_id), as a client without server state sends it.
    denied = post(
        server,
        {
            "input": [
                {"role": "user", "content": "Remove it: notes.delete_note."},
                *first["output"],
                {
                    "type": "mcp_approval_response",
                    "approval_request_id": request["id"],
                    "approve": False,
                    "reason": "not today",
                },
            ],
            "tools": [tool],
        },
    )
    assert "mcp_list_tools" not in types(denied)  # the listing came back with the input: not listed again
    call = denied["output"][0]  # the denied call, reported failed; the tool never ran
    assert call["type"] == "mcp_call" and call["status"] == "failed" and call["approval_request_id"] == request["id"]
    assert call["error"]["type"] == "mcp_protocol_error" and "denied" in call["error"]["message"]
    assert "denied" in answer(denied) and "not today" in answer(denied)
    assert len([c for c in mcp_server.calls() if c["tool"] == "delete_note"]) == before


def test_loopback_refused_without_the_allow_list(mcp_server: McpProcess) -> None:
    before = len(mcp_server.calls())
    plain = Server("--engine", "demo", "--mcp")
    try:
        data = post(plain, {"input": "Use notes.add.", "tools": [mcp_tool(mcp_server.url)]})
    finally:
        plain.stop()
    listing = data["output"][0]
    assert listing["type"] == "mcp_list_tools" and "loopback" in listing["error"]
    assert "mcp_call" not in types(data)
    assert len(mcp_server.calls()) == before


def test_secrets_not_in_store_or_log(server: Server, mcp_server: McpProcess) -> None:
    tenant = "tenant-only-in-a-header-9e2c"  # whoami echoes its X-Tenant: add does not, and no other test sends this
    tool = mcp_tool(mcp_server.url, headers={"X-Tenant": tenant})
    data = post(server, {"input": "Use notes.add.", "tools": [tool]})
    seen = [c for c in mcp_server.calls() if c["tool"] == "add"][-1]
    assert seen["headers"]["authorization"] == f"Bearer {TOKEN}" and seen["headers"]["x-tenant"] == tenant
    again = post(server, {"input": "Again notes.add.", "previous_response_id": data["id"], "tools": [tool]})
    assert TOKEN not in json.dumps([data, again]) and tenant not in json.dumps([data, again])
    stored = httpx.get(f"{server.url}/v1/responses/{data['id']}", timeout=10).json()
    items = httpx.get(f"{server.url}/v1/responses/{data['id']}/input_items", timeout=10).json()
    assert TOKEN not in json.dumps(stored) + json.dumps(items)
    assert server.data_home is not None
    for path in Path(server.data_home).rglob("*"):
        if path.is_file():
            raw = path.read_bytes()
            assert TOKEN.encode() not in raw and tenant.encode() not in raw, path
    assert TOKEN not in server.output() and tenant not in server.output()
