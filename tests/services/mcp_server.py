"""A real MCP server for the tests, built with the MCP Python SDK: `python tests/services/mcp_server.py [--sse]`.

It binds 127.0.0.1 on a free port, prints `mcp server listening on http://127.0.0.1:PORT/mcp` (or `/sse` with
`--sse`) once it accepts connections, and runs until killed. Its tools:

- `add(a, b)`: the sum, as text;
- `whoami()`: who the `Authorization` header says the caller is (`Bearer TOKEN` with `--token TOKEN`), and the
  `X-Tenant` header; a tool error when the token is missing or wrong;
- `explode(reason)`: always a tool error (the result's `isError`), with `reason` in its text;
- `delete_note(title)`: a tool the tests declare with `require_approval` (the server itself runs whatever it
  is asked; approval is the Responses server's business);
- `slow(seconds)`: sleeps, for the per-call timeout.

Every call is recorded, with the headers it came with; `GET /_calls` answers the record (JSON), so a test can say
that a denied call never ran and that the credentials reached the MCP server (and only it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
from typing import Any

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.requests import Request
from starlette.responses import JSONResponse

CALLS: list[dict[str, Any]] = []


def build(token: str) -> MCPServer:
    server = MCPServer("harmony-test-tools", instructions="Test tools for harmony-responses.")

    def record(ctx: Context, tool: str, arguments: dict[str, Any]) -> dict[str, str]:
        headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
        CALLS.append({"tool": tool, "arguments": arguments, "headers": headers})
        return headers

    @server.tool(description="Add two integers and return the sum.")
    def add(a: int, b: int, ctx: Context) -> str:
        record(ctx, "add", {"a": a, "b": b})
        return str(a + b)

    @server.tool(description="Say who the caller is, from the credentials the request carried.")
    def whoami(ctx: Context) -> str:
        headers = record(ctx, "whoami", {})
        if headers.get("authorization") != f"Bearer {token}":
            raise ToolError("not authorized: the Authorization header is missing or wrong")
        return f"you are the holder of the token, tenant {headers.get('x-tenant', '(none)')}"

    @server.tool(description="Always fails, saying why.")
    def explode(reason: str, ctx: Context) -> str:
        record(ctx, "explode", {"reason": reason})
        raise ToolError(f"exploded: {reason}")

    @server.tool(description="Delete the note with this title.")
    def delete_note(title: str, ctx: Context) -> str:
        record(ctx, "delete_note", {"title": title})
        return f"deleted note {title!r}"

    @server.tool(description="Sleep for a while, then answer.")
    async def slow(seconds: float, ctx: Context) -> str:
        record(ctx, "slow", {"seconds": seconds})
        await asyncio.sleep(seconds)
        return "awake"

    async def calls(request: Request) -> JSONResponse:
        return JSONResponse(CALLS)

    server.custom_route("/_calls", methods=["GET"])(calls)

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--token", default="s3cret-token")
    parser.add_argument("--sse", action="store_true", help="serve the SSE transport instead of streamable HTTP")
    args = parser.parse_args()
    server = build(args.token)
    app = server.sse_app() if args.sse else server.streamable_http_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    logging.getLogger("mcp").setLevel(logging.CRITICAL)  # a tool's error is the test's point, not a traceback
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)

    async def run() -> None:
        task = asyncio.create_task(userver.serve(sockets=[sock]))
        while not userver.started:
            await asyncio.sleep(0.02)
        path = "/sse" if args.sse else "/mcp"
        print(f"mcp server listening on http://127.0.0.1:{port}{path}", flush=True)
        await task

    asyncio.run(run())
    print(json.dumps({"calls": len(CALLS)}), flush=True)


if __name__ == "__main__":
    main()
