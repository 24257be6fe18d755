"""The MCP backend (server/hosted/mcp.py) against a real MCP server built with the MCP SDK, in its own process.

The server (tests/services/mcp_server.py) serves streamable HTTP (and SSE) on 127.0.0.1; the backend reaches it
only because each test's fetch policy allows 127.0.0.1 (`--hosted-allow`), and one test shows the default
policy refusing it before a byte is sent.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harmony_responses.bridge.request import RequestError
from harmony_responses.server.hosted.base import HostedCall, HostedContext
from harmony_responses.server.hosted.mcp import McpBackend, McpServerTool, McpSession, redacted
from harmony_responses.server.hosted.policy import FetchPolicy

SERVER = Path(__file__).resolve().parents[1] / "services" / "mcp_server.py"
TOKEN = "tok-7f3a9c"


class McpProcess:
    def __init__(self, *args: str) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, str(SERVER), "--token", TOKEN, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                self.url = found.group(1)
                break
        else:
            raise RuntimeError("the MCP server did not start")
        self.base = self.url.rsplit("/", 1)[0]

    def calls(self) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = httpx.get(self.base + "/_calls", timeout=10).json()
        return data

    def stop(self) -> None:
        self.popen.terminate()
        self.popen.wait(10)


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[McpProcess]:
    proc = McpProcess()
    try:
        yield proc
    finally:
        proc.stop()


ALLOW_LOCAL = FetchPolicy(allow=("127.0.0.1",))


def context(policy: FetchPolicy = ALLOW_LOCAL, timeout: float = 10.0, chain: list[Any] | None = None) -> HostedContext:
    return HostedContext(policy=policy, timeout=timeout, chain=chain or ())


def declared(url: str, **fields: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": "notes", "server_url": url, "require_approval": "never", **fields}


async def opened(tool: dict[str, Any], **kw: Any) -> McpSession:
    return await McpBackend().open([tool], context(**kw))


def test_list_filter_and_namespace(mcp_server: McpProcess) -> None:
    async def run() -> tuple[Any, Any]:
        session = await opened(declared(mcp_server.url, allowed_tools=["add", "whoami"], server_description="Notes."))
        try:
            return session.items(), session.namespaces()
        finally:
            await session.aclose()

    items, namespaces = asyncio.run(run())
    (listing,) = items
    assert listing["type"] == "mcp_list_tools" and listing["server_label"] == "notes" and listing["error"] is None
    assert [t["name"] for t in listing["tools"]] == ["add", "whoami"]  # allowed_tools: explode & co. left out
    assert listing["tools"][0]["input_schema"]["required"] == ["a", "b"]
    (ns,) = namespaces
    assert ns.name == "notes" and ns.description == "Notes." and [t.name for t in ns.tools] == ["add", "whoami"]


def test_call_output_error_and_secrets(mcp_server: McpProcess) -> None:
    tool = declared(mcp_server.url, authorization=TOKEN, headers={"X-Tenant": "acme"})

    async def run() -> list[Any]:
        session = await opened(tool)
        try:
            return [
                await session.call(HostedCall("notes.add", json.dumps({"a": 2, "b": 40}), "mcp_1"), timeout=10),
                await session.call(HostedCall("notes.whoami", "{}", "mcp_2"), timeout=10),
                await session.call(HostedCall("notes.explode", '{"reason": "on purpose"}', "mcp_3"), timeout=10),
                await session.call(HostedCall("notes.missing", "{}", "mcp_4"), timeout=10),
                await session.call(HostedCall("notes.add", "{not json", "mcp_5"), timeout=10),
            ]
        finally:
            await session.aclose()

    add, who, boom, missing, bad = asyncio.run(run())
    assert add.error is None and add.text == "42" and add.item["output"] == "42"
    assert who.error is None and who.text == "you are the holder of the token, tenant acme"
    assert boom.error is not None and "exploded: on purpose" in boom.text
    assert boom.item["error"]["type"] == "mcp_tool_execution_error"
    assert missing.error is not None and "no tool 'missing'" in missing.text
    assert bad.error is not None and "not JSON" in bad.text
    seen = [c for c in mcp_server.calls() if c["tool"] == "whoami"][-1]
    assert seen["headers"]["authorization"] == f"Bearer {TOKEN}" and seen["headers"]["x-tenant"] == "acme"
    assert "missing" not in [c["tool"] for c in mcp_server.calls()]  # refused here, never sent
    config = McpServerTool.parse(tool, "tools[0]")
    assert TOKEN not in repr(config) and "acme" not in repr(config)
    assert redacted(tool) == {k: v for k, v in tool.items() if k not in ("authorization", "headers")}


def test_wrong_token_is_a_tool_error(mcp_server: McpProcess) -> None:
    async def run() -> Any:
        session = await opened(declared(mcp_server.url, authorization="wrong"))
        try:
            return await session.call(HostedCall("notes.whoami", "{}", "mcp_1"), timeout=10)
        finally:
            await session.aclose()

    result = asyncio.run(run())
    assert result.error is not None and "not authorized" in result.text


def test_loopback_refused_by_default(mcp_server: McpProcess) -> None:
    before = len(mcp_server.calls())

    async def run() -> McpSession:
        return await opened(declared(mcp_server.url), policy=FetchPolicy())

    session = asyncio.run(run())
    (listing,) = session.items()
    assert listing["tools"] == [] and "127.0.0.1 is a loopback address" in listing["error"]
    assert session.namespaces() == []
    assert len(mcp_server.calls()) == before


def test_a_name_resolving_to_loopback_is_refused_at_connect_unless_allowed(mcp_server: McpProcess) -> None:
    """`localhost` passes the URL check (a name is judged by its addresses): the MCP SDK's connection itself is
    refused by default, and made when the operator allowed 127.0.0.1 (`--hosted-allow`)."""
    url = mcp_server.url.replace("127.0.0.1", "localhost")
    before = len(mcp_server.calls())

    async def run(policy: FetchPolicy) -> list[Any]:
        session = await opened(declared(url, allowed_tools=["add"]), policy=policy)
        try:
            return list(session.items())
        finally:
            await session.aclose()

    (refused,) = asyncio.run(run(FetchPolicy()))
    assert refused["tools"] == [] and "127.0.0.1 is a loopback address" in refused["error"]
    assert len(mcp_server.calls()) == before
    (allowed,) = asyncio.run(run(ALLOW_LOCAL))
    assert allowed["error"] is None and [t["name"] for t in allowed["tools"]] == ["add"]


def test_cached_listing_is_reused(mcp_server: McpProcess) -> None:
    cached = {
        "type": "mcp_list_tools",
        "id": "mcpl_1",
        "server_label": "notes",
        "tools": [{"name": "add", "description": "Add.", "input_schema": {"type": "object"}, "annotations": None}],
        "error": None,
    }

    async def run() -> tuple[Any, Any]:
        session = await McpBackend().open(
            [declared("http://127.0.0.1:9/unreachable")], context(chain=[cached])
        )  # no connection: the listing is the chain's
        return session.items(), [t.name for t in session.namespaces()[0].tools]

    items, names = asyncio.run(run())
    assert items == [] and names == ["add"]


def test_approval_policies(mcp_server: McpProcess) -> None:
    async def run(require: Any) -> list[bool]:
        session = await opened(declared(mcp_server.url, require_approval=require))
        try:
            return [session.needs_approval(HostedCall(f"notes.{n}", "{}", "x")) for n in ("add", "delete_note")]
        finally:
            await session.aclose()

    assert asyncio.run(run("never")) == [False, False]
    assert asyncio.run(run("always")) == [True, True]
    assert asyncio.run(run(None)) == [True, True]  # OpenAI's default
    assert asyncio.run(run({"never": {"tool_names": ["add"]}})) == [False, True]
    assert asyncio.run(run({"always": {"tool_names": ["delete_note"]}})) == [False, True]


def test_sse_transport() -> None:
    proc = McpProcess("--sse")
    try:

        async def run() -> Any:
            session = await opened(declared(proc.url))
            try:
                return await session.call(HostedCall("notes.add", '{"a": 1, "b": 2}', "mcp_1"), timeout=10)
            finally:
                await session.aclose()

        assert asyncio.run(run()).text == "3"
    finally:
        proc.stop()


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"server_label": "functions"}, "tools[0].server_label"),
        ({"server_label": "a.b"}, "tools[0].server_label"),
        ({"server_url": "ftp://x"}, "tools[0].server_url"),
        ({"connector_id": "connector_gmail"}, "tools[0].connector_id"),
        ({"require_approval": "sometimes"}, "tools[0].require_approval"),
        ({"allowed_tools": {"names": ["x"]}}, "tools[0].allowed_tools.names"),
        ({"headers": {"X": 1}}, "tools[0].headers"),
        ({"colour": "red"}, "tools[0].colour"),
    ],
)
def test_bad_declarations(fields: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestError) as caught:
        McpBackend().check(declared("http://mcp.example/mcp", **fields), "tools[0]")
    assert caught.value.param == param


def test_timeout_and_output_limit(mcp_server: McpProcess) -> None:
    async def run() -> list[Any]:
        session = await McpBackend(max_output_bytes=1).open([declared(mcp_server.url)], context(timeout=1.0))
        try:
            return [
                await session.call(HostedCall("notes.slow", '{"seconds": 5}', "mcp_1"), timeout=1.0),
                await session.call(HostedCall("notes.add", '{"a": 20, "b": 22}', "mcp_2"), timeout=5.0),
            ]
        finally:
            await session.aclose()

    slow, cut = asyncio.run(run())
    assert slow.error is not None and slow.item["error"] == {
        "type": "mcp_protocol_error",
        "code": -32001,
        "message": "the MCP server did not answer in time",
    }
    assert cut.text.startswith("4\n[output cut at 1 bytes]")


def test_mcp_settings() -> None:
    from harmony_responses.server.settings import Settings, SettingsError

    assert Settings.from_env({}).mcp is False  # off unless configured
    on = Settings.from_env({"HARMONY_RESPONSES_MCP": "true", "HARMONY_RESPONSES_MCP_MAX_OUTPUT_BYTES": "100"})
    assert on.mcp is True and on.mcp_max_output_bytes == 100
    assert Settings.from_env(on.to_env()) == on
    with pytest.raises(SettingsError, match="HARMONY_RESPONSES_MCP"):
        Settings.from_env({"HARMONY_RESPONSES_MCP": "maybe"})
    with pytest.raises(SettingsError, match="mcp_max_tools"):
        Settings(mcp_max_tools=0).validate()
