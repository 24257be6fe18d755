"""OpenAI Agents SDK's `HostedMCPTool` against `serve --engine demo --mcp`: the server lists and calls a real MCP
server's tools (built with the MCP SDK, its own process on 127.0.0.1), and a call that needs approval runs once the
SDK's `on_approval_request` hook approves it."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from clientkit import HERE, Recorder, python_clients, responses_of, run
from responses_checker import assert_valid_event, assert_valid_response, check_stream

from serverkit import Server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hosted"))

from test_mcp_backend import TOKEN, McpProcess  # noqa: E402

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpProcess]:
    proc = McpProcess()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def mcp_proxy() -> Iterator[Recorder]:
    proc = Server("--engine", "demo", "--mcp", "--hosted-allow", "127.0.0.1")
    recorder = Recorder(proc.url)
    try:
        yield recorder
        for exchange in recorder.exchanges:
            for event in exchange.events:
                assert_valid_event(event)
            if exchange.events and exchange.events[0].get("type") == "response.created":
                check_stream(exchange.events)
            elif exchange.status == 200 and exchange.method == "POST" and exchange.path == "/v1/responses":
                assert_valid_response(exchange.response)
    finally:
        recorder.close()
        proc.stop()


def test_hosted_mcp_tool_completes_turns(mcp_proxy: Recorder, mcp_server: McpProcess) -> None:
    got = json.loads(
        run([str(python_clients()), str(HERE / "agents_hosted_mcp.py"), mcp_proxy.url, mcp_server.url, TOKEN])
    )
    never = got["never"]
    assert "tenant agents" in never["final"], never  # the MCP tool's answer, read by the model and quoted
    assert "MCPListToolsItem:mcp_list_tools" in never["items"] and "ToolCallItem:mcp_call" in never["items"]
    approved = got["approved"]
    assert approved["approvals"] == ["delete_note"], approved
    assert "deleted note" in approved["final"], approved
    sent = [e.request for e in mcp_proxy.posted()]
    answers = [
        i for body in sent for i in body["input"] if isinstance(i, dict) and i.get("type") == "mcp_approval_response"
    ]
    assert answers and answers[0]["approve"] is True
    assert all(r["status"] == "completed" for r in responses_of(mcp_proxy))
    calls = [c for c in mcp_server.calls() if c["tool"] in ("whoami", "delete_note")]
    assert [c["tool"] for c in calls][-2:] == ["whoami", "delete_note"]
    assert all(c["headers"]["authorization"] == f"Bearer {TOKEN}" for c in calls[-2:])
