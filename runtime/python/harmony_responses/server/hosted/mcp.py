"""Remote MCP servers as hosted tools: `{"type": "mcp", "server_label", "server_url", ...}`, run with the MCP SDK.

A request declares an MCP server; the server (this module) connects to it with the MCP Python SDK's streamable
HTTP client (the SSE client when the URL's path ends in `/sse`), lists its tools, keeps those `allowed_tools`
admits, and declares them to the model as a Harmony namespace of their own, named by `server_label`
(`namespace docs { type search = (_: {...}) => any; }`), each tool's `inputSchema` as its parameters. A message the
model addresses to `docs.search` is a call: its body is the JSON arguments, the tool's content comes back as the
tool message's text.

Per response chain the listing is made once: the response that first declares a server starts with an
`mcp_list_tools` item (the listing, as OpenAI's API shows it); a continuation (`previous_response_id`, or the items
sent back as input) finds that item in its history and reuses it, connecting only when a tool is called.

`require_approval` ("always", the default as in OpenAI's API; "never"; or `{"always"|"never": {"tool_names": [...],
"read_only": bool}}`) decides which calls wait for the client: such a call ends the response (completed) with an
`mcp_approval_request` item instead of running. The client's next request carries an `mcp_approval_response`
(`approve`, `approval_request_id`): approved, the call runs first and its `mcp_call` item (with
`approval_request_id`) opens the next response; denied, the model is told it was denied.

`headers` and `authorization` go to the MCP server and nowhere else: they are held by the connection only, never
logged, never in a repr, and not kept in the store (`redacted`): a continuation sends them again, as OpenAI's API
asks. Every connection goes through the hosted fetch policy (`policy.FetchPolicy`): an MCP server on loopback or
a private address is refused unless the operator allowed it (`--hosted-allow`).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import ssl
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import anyio
import httpcore2
import httpx2
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult

from ..._tables import spec as _spec
from ...bridge.request import RequestError, Verbatim
from ...models import ToolDescription, ToolNamespaceConfig
from .base import HostedCall, HostedContext, HostedKind, HostedResult
from .policy import UNIX_SOCKETS_REFUSED, FetchPolicy, FetchRefused

__all__ = [
    "Approval",
    "ApprovalPolicy",
    "ListedTool",
    "McpBackend",
    "McpServerTool",
    "McpSession",
    "ToolFilter",
    "redacted",
]

log = logging.getLogger("harmony_responses.server.hosted.mcp")

LIST_ITEM = "mcp_list_tools"
CALL_ITEM = "mcp_call"
APPROVAL_REQUEST = "mcp_approval_request"
APPROVAL_RESPONSE = "mcp_approval_response"
SECRET_FIELDS = ("headers", "authorization")  # never stored, never logged
_LABEL = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # a Harmony namespace name (as a namespace tool's `name`)
_RESERVED_LABELS = frozenset({_spec.HEADER_FUNCTION_NAMESPACE, *_spec.BUILTIN_NAMESPACES})  # taken by the format
_FIELDS = frozenset(
    {
        "type",
        "server_label",
        "server_url",
        "headers",
        "authorization",
        "allowed_tools",
        "require_approval",
        "server_description",
        "allowed_callers",
        "defer_loading",
        "connector_id",
        "tunnel_id",
    }
)
# MCP's JSON-RPC codes the `mcp_call` item's `error` names (as the openai SDK's McpToolCallError reads them).
_TIMEOUT_CODE = -32001
_INVALID_PARAMS = -32602
_DENIED_CODE = -32600  # JSON-RPC's "invalid request": the client refused the call, it was never sent


def _invalid(where: str, reason: str) -> RequestError:
    return RequestError.of(_spec.REQUEST_ERROR_INVALID, where, reason=Verbatim(reason))


# -- what a request declares -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListedTool:
    """One tool an MCP server lists."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any] | None = None

    @property
    def read_only(self) -> bool:
        return bool((self.annotations or {}).get("readOnlyHint"))

    def as_item(self) -> dict[str, Any]:
        """The tool as an `mcp_list_tools` item lists it."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": dict(self.input_schema),
            "annotations": dict(self.annotations) if self.annotations is not None else None,
        }

    @classmethod
    def from_item(cls, data: Mapping[str, Any]) -> ListedTool:
        schema = data.get("input_schema")
        notes = data.get("annotations")
        return cls(
            name=str(data.get("name")),
            description=str(data.get("description") or ""),
            input_schema=schema if isinstance(schema, Mapping) else {"type": "object"},
            annotations=notes if isinstance(notes, Mapping) else None,
        )


@dataclass(frozen=True)
class ToolFilter:
    """`{"tool_names": [...], "read_only": bool}` (or a bare list of names): a tool matches every condition given."""

    names: frozenset[str] | None = None
    read_only: bool | None = None

    def matches(self, tool: ListedTool) -> bool:
        if self.names is not None and tool.name not in self.names:
            return False
        return self.read_only is None or tool.read_only == self.read_only

    @classmethod
    def parse(cls, value: Any, where: str) -> ToolFilter:
        if isinstance(value, list):
            if not all(isinstance(n, str) for n in value):
                raise _invalid(where, "expected a list of tool names (strings)")
            return cls(names=frozenset(value))
        if not isinstance(value, Mapping):
            raise _invalid(where, "expected a list of tool names or an object with tool_names and/or read_only")
        unknown = sorted(set(value) - {"tool_names", "read_only"})
        if unknown:
            raise _invalid(f"{where}.{unknown[0]}", "not a field of an MCP tool filter (tool_names, read_only)")
        names = value.get("tool_names")
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise _invalid(f"{where}.tool_names", "expected a list of tool names (strings)")
        read_only = value.get("read_only")
        if read_only is not None and not isinstance(read_only, bool):
            raise _invalid(f"{where}.read_only", "expected true or false")
        return cls(frozenset(names) if names is not None else None, read_only)


class Approval(str, Enum):
    ALWAYS = "always"
    NEVER = "never"


@dataclass(frozen=True)
class ApprovalPolicy:
    """`require_approval`: which calls wait for the client's `mcp_approval_response`.

    "always" (the default, as in OpenAI's API) and "never" are for every tool. With filters, a tool the `never`
    filter matches runs at once, one the `always` filter matches waits; any other tool waits when only `never` was
    given (or both), and runs when only `always` was given."""

    default: Approval = Approval.ALWAYS
    always: ToolFilter | None = None
    never: ToolFilter | None = None

    def needs(self, tool: ListedTool) -> bool:
        if self.never is not None and self.never.matches(tool):
            return False
        if self.always is not None and self.always.matches(tool):
            return True
        return self.default is Approval.ALWAYS

    @classmethod
    def parse(cls, value: Any, where: str) -> ApprovalPolicy:
        if value is None:
            return cls()
        if isinstance(value, str):
            try:
                return cls(Approval(value))
            except ValueError:
                raise _invalid(where, 'expected "always", "never" or an object with always/never filters') from None
        if not isinstance(value, Mapping):
            raise _invalid(where, 'expected "always", "never" or an object with always/never filters')
        unknown = sorted(set(value) - {"always", "never"})
        if unknown:
            raise _invalid(f"{where}.{unknown[0]}", "not a field of require_approval (always, never)")
        always = ToolFilter.parse(value["always"], f"{where}.always") if value.get("always") is not None else None
        never = ToolFilter.parse(value["never"], f"{where}.never") if value.get("never") is not None else None
        default = Approval.NEVER if always is not None and never is None else Approval.ALWAYS
        return cls(default, always, never)


@dataclass(frozen=True)
class McpServerTool:
    """One declared `mcp` tool, checked. `headers` (with `authorization` as its Bearer token) never shows in a repr."""

    label: str
    url: str
    where: str
    description: str | None = None
    allowed: ToolFilter | None = None
    approval: ApprovalPolicy = field(default_factory=ApprovalPolicy)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def sse(self) -> bool:
        return httpx2.URL(self.url).path.rstrip("/").endswith("/sse")

    def admits(self, tool: ListedTool) -> bool:
        return self.allowed is None or self.allowed.matches(tool)

    @classmethod
    def parse(cls, tool: Mapping[str, Any], where: str) -> McpServerTool:
        """The tool checked: a `RequestError` naming `where.<field>` for what cannot be honoured."""
        for key in tool:
            if key not in _FIELDS:
                raise RequestError.of(_spec.REQUEST_ERROR_UNKNOWN_FIELD, f"{where}.{key}")
        label = tool.get("server_label")
        if not isinstance(label, str):
            raise RequestError.of(_spec.REQUEST_ERROR_MISSING, f"{where}.server_label")
        if not _LABEL.match(label):
            raise _invalid(
                f"{where}.server_label", "expected 1 to 64 letters, digits, '_' or '-' (it names a namespace)"
            )
        if label in _RESERVED_LABELS:
            raise _invalid(f"{where}.server_label", f"{label!r} names a namespace of the format itself")
        for key in ("connector_id", "tunnel_id"):
            if tool.get(key) is not None:
                raise _invalid(f"{where}.{key}", "only MCP servers named by server_url are run here")
        url = tool.get("server_url")
        if not isinstance(url, str):
            raise RequestError.of(_spec.REQUEST_ERROR_MISSING, f"{where}.server_url")
        try:
            parsed = httpx2.URL(url)
        except Exception:  # httpx2's URL errors are several
            raise _invalid(f"{where}.server_url", "not a URL") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise _invalid(f"{where}.server_url", "expected an http:// or https:// URL with a host")
        if tool.get("defer_loading") not in (None, False):
            raise _invalid(f"{where}.defer_loading", "tool search is not run here: every listed tool is declared")
        callers = tool.get("allowed_callers")
        if callers is not None and callers != ["direct"]:
            raise _invalid(f"{where}.allowed_callers", 'only the model calls tools here: ["direct"]')
        description = tool.get("server_description")
        if description is not None and not isinstance(description, str):
            raise _invalid(f"{where}.server_description", "expected a string")
        headers = _headers(tool.get("headers"), f"{where}.headers")
        authorization = tool.get("authorization")
        if authorization is not None:
            if not isinstance(authorization, str) or not authorization:
                raise _invalid(f"{where}.authorization", "expected a token (a non-empty string)")
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
            headers["Authorization"] = f"Bearer {authorization}"
        allowed = tool.get("allowed_tools")
        return cls(
            label=label,
            url=url,
            where=where,
            description=description,
            allowed=ToolFilter.parse(allowed, f"{where}.allowed_tools") if allowed is not None else None,
            approval=ApprovalPolicy.parse(tool.get("require_approval"), f"{where}.require_approval"),
            headers=headers,
        )


def _headers(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise _invalid(where, "expected an object of header names to string values")
    for name, text in value.items():
        if not name or any(c in name for c in ":\r\n ") or any(c in text for c in "\r\n"):
            raise _invalid(f"{where}.{name}", "not a valid HTTP header")
    return dict(value)


def redacted(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A declared `mcp` tool as it may be stored, echoed or logged: without `headers` and `authorization`."""
    return {k: v for k, v in tool.items() if k not in SECRET_FIELDS}


# -- connecting under the fetch policy ----------------------------------------------------------------------------


class _CheckedNetwork(httpcore2.AsyncNetworkBackend):
    """httpcore2's network backend (the MCP SDK's HTTP stack), every TCP connection made by `FetchPolicy.connect`
    as `policy.client()`'s are: the rule is policy.py's, this only opens httpcore2 streams."""

    def __init__(self, policy: FetchPolicy) -> None:
        self.policy = policy
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        async def open_(address: str) -> httpcore2.AsyncNetworkStream:
            return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)

        return await self.policy.connect(
            host, port, open_, errors=(httpcore2.ConnectError, httpcore2.ConnectTimeout), failed=httpcore2.ConnectError
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise FetchRefused(path, UNIX_SOCKETS_REFUSED)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _CheckedTransport(httpx2.AsyncHTTPTransport):
    def __init__(self, policy: FetchPolicy) -> None:
        super().__init__(trust_env=False)
        self.policy = policy
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl.create_default_context(),
            max_connections=8,
            max_keepalive_connections=4,
            keepalive_expiry=5.0,
            network_backend=_CheckedNetwork(policy),
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.policy.check_url(str(request.url))
        return await super().handle_async_request(request)


def _http_client(policy: FetchPolicy, headers: Mapping[str, str], timeout: float) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        transport=_CheckedTransport(policy),
        headers=dict(headers),
        timeout=httpx2.Timeout(timeout, read=max(timeout, 30.0)),
        trust_env=False,
    )


def _failure(exc: BaseException) -> str:
    """What went wrong, in words for the model and the client (never a header's value: those are not in errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, FetchRefused):
        return f"the MCP server's address is refused: {exc.reason}"
    if isinstance(exc, MCPError):
        return f"the MCP server answered an error: {exc.error.message}"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"the MCP server answered HTTP {exc.response.status_code}"
    if isinstance(exc, (TimeoutError, httpx2.TimeoutException)):
        return "the MCP server did not answer in time"
    if isinstance(exc, (httpx2.TransportError, httpcore2.NetworkError, OSError)):
        return f"could not reach the MCP server: {exc or type(exc).__name__}"
    return f"the MCP server could not be used: {type(exc).__name__}: {exc}"


def _error_item(exc: BaseException, message: str) -> dict[str, Any]:
    """The `mcp_call` item's `error` for a failure outside the tool (the openai SDK's McpToolCallError shapes)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, httpx2.HTTPStatusError):
        return {"type": "http_error", "code": exc.response.status_code, "message": message}
    if isinstance(exc, MCPError):
        return {"type": "mcp_protocol_error", "code": exc.error.code, "message": message}
    if isinstance(exc, (TimeoutError, httpx2.TimeoutException)):
        return {"type": "mcp_protocol_error", "code": _TIMEOUT_CODE, "message": message}
    return {"type": "http_error", "code": 0, "message": message}


class _Connection:
    """How to reach one MCP server. Each use is one MCP client session, opened and closed within one task (the
    SDK's task groups must be left by the task that entered them; a response's calls are few, the handshake cheap)."""

    def __init__(self, server: McpServerTool, policy: FetchPolicy, timeout: float) -> None:
        self.server = server
        self.policy = policy
        self.timeout = timeout

    @asynccontextmanager
    async def client(self) -> AsyncIterator[Client]:
        self.policy.check_url(self.server.url)
        async with AsyncExitStack() as stack:
            if self.server.sse:
                policy, seconds = self.policy, self.timeout

                def factory(
                    headers: dict[str, str] | None = None,
                    timeout: httpx2.Timeout | None = None,
                    auth: httpx2.Auth | None = None,
                ) -> httpx2.AsyncClient:
                    return _http_client(policy, headers or {}, seconds)

                transport: Any = sse_client(
                    self.server.url, headers=dict(self.server.headers), timeout=seconds, httpx_client_factory=factory
                )
            else:
                http = await stack.enter_async_context(_http_client(self.policy, self.server.headers, self.timeout))
                transport = streamable_http_client(self.server.url, http_client=http)
            yield await stack.enter_async_context(Client(transport, read_timeout_seconds=self.timeout))

    async def list_tools(self, limit: int) -> list[ListedTool]:
        tools: list[ListedTool] = []
        cursor: str | None = None
        async with self.client() as client:
            while True:
                page = await client.list_tools(cursor=cursor)
                for tool in page.tools:
                    notes = tool.annotations.model_dump(by_alias=True, exclude_none=True) if tool.annotations else None
                    tools.append(ListedTool(tool.name, tool.description or "", dict(tool.input_schema), notes))
                cursor = page.next_cursor
                if cursor is None or len(tools) >= limit:
                    return tools[:limit]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        async with self.client() as client:
            return await client.call_tool(name, arguments, read_timeout_seconds=self.timeout)


def _content_text(blocks: Sequence[Any]) -> str:
    """A tool result's content as the text the model reads: text as it is, other blocks as JSON."""
    parts = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append(block.resource.text)
        else:
            data = block.model_dump(mode="json", by_alias=True, exclude_none=True)
            if kind in ("image", "audio") or (kind == "resource" and "blob" in data.get("resource", {})):
                data.pop("data", None)
                data.get("resource", {}).pop("blob", None)
                data["omitted"] = "binary content is not shown to the model"
            parts.append(json.dumps(data, ensure_ascii=False))
    return "\n".join(parts)


def _clip(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore") + f"\n[output cut at {limit} bytes]"


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


# -- the session of one response -------------------------------------------------------------------------------


@dataclass
class _Server:
    config: McpServerTool
    connection: _Connection
    tools: dict[str, ListedTool]  # the admitted tools, by name
    listing: dict[str, Any] | None = None  # the `mcp_list_tools` item this response starts with (None: cached)


@dataclass(frozen=True)
class Pending:
    """A call the client answered with an `mcp_approval_response`: it runs (approved) or is reported denied before
    the model goes on."""

    recipient: str
    arguments: str
    approval_request_id: str
    approved: bool
    reason: str | None = None


class McpSession:
    """The MCP servers one response declares (`HostedSession`)."""

    def __init__(
        self,
        servers: Sequence[_Server],
        max_output_bytes: int,
        pending: Sequence[Pending] = (),
        channel: str | None = None,
    ) -> None:
        self._servers = {s.config.label: s for s in servers}
        self._order = list(servers)
        self.max_output_bytes = max_output_bytes
        self._pending = list(pending)
        self._channel = channel
        self._queue: list[Pending] = []  # the answered calls handed to the loop and not yet started
        self._answered: dict[str, Pending] = {}  # an answered call's id (the loop's) → the client's answer
        self._waiting: dict[str, str] = {}  # a call held for approval: its call id → its approval request's id

    def namespaces(self) -> Sequence[ToolNamespaceConfig]:
        out = []
        for server in self._order:
            if server.listing is not None and server.listing.get("error"):
                continue  # a server that could not list its tools offers none
            tools = [
                ToolDescription(name=t.name, description=t.description, parameters=dict(t.input_schema))
                for t in server.tools.values()
            ]
            out.append(
                ToolNamespaceConfig(name=server.config.label, description=server.config.description, tools=tools)
            )
        return out

    def items(self) -> Sequence[Mapping[str, Any]]:
        return [s.listing for s in self._order if s.listing is not None]

    def pending(self) -> Sequence[HostedCall]:
        """The calls the client approved or denied in this request, in the order it answered them."""
        self._queue = list(self._pending)  # the loop runs them first, in this order (`started` takes them back)
        return [HostedCall(a.recipient, a.arguments, _new_id("mcp_"), None, self._channel) for a in self._pending]

    def _split(self, recipient: str) -> tuple[_Server, str] | None:
        label, sep, name = recipient.partition(_spec.HEADER_NAMESPACE_SEPARATOR)
        server = self._servers.get(label)
        return (server, name) if sep and server is not None else None

    def claims(self, recipient: str) -> bool:
        return self._split(recipient) is not None

    def needs_approval(self, call: HostedCall) -> bool:
        """Whether `call`, made by the model, waits for the client (an `mcp_approval_request` ends the response)."""
        found = self._split(call.recipient)
        if found is None or call.call_id in self._answered:
            return False
        server, name = found
        tool = server.tools.get(name)
        return tool is not None and server.config.approval.needs(tool)

    def started(self, call: HostedCall) -> Mapping[str, Any]:
        """The item's fields while `call` runs: an `mcp_call`, or the `mcp_approval_request` a waiting call becomes."""
        label, _, name = call.recipient.partition(_spec.HEADER_NAMESPACE_SEPARATOR)
        fields: dict[str, Any] = {"server_label": label, "name": name, "arguments": call.arguments}
        queued = self._queue[0] if self._queue else None
        if queued is not None and (queued.recipient, queued.arguments) == (call.recipient, call.arguments):
            self._answered[call.call_id] = self._queue.pop(0)  # a call the client answered: it runs (or is denied)
        if self.needs_approval(call):
            request_id = _new_id("mcpr_")
            self._waiting[call.call_id] = request_id
            return {"type": APPROVAL_REQUEST, "id": request_id, **fields}
        answer = self._answered.get(call.call_id)
        if answer is not None:
            fields["approval_request_id"] = answer.approval_request_id
        return {"type": CALL_ITEM, **fields, "output": None, "error": None}

    async def call(self, call: HostedCall, *, timeout: float) -> HostedResult:
        if call.call_id in self._waiting:
            return HostedResult("", stop=True)  # the approval request ends the response; nothing ran
        answer = self._answered.get(call.call_id)
        if answer is not None and not answer.approved:
            message = "the user denied this call" + (f": {answer.reason}" if answer.reason else "")
            return HostedResult(message, error=message, item={"error": _protocol(_DENIED_CODE, message)})
        found = self._split(call.recipient)
        if found is None:
            message = f"no MCP server is declared for {call.recipient}"
            return HostedResult(message, error=message, item={"error": _protocol(_INVALID_PARAMS, message)})
        server, name = found
        if name not in server.tools:
            known = ", ".join(sorted(server.tools)) or "none"
            message = f"{server.config.label} has no tool {name!r} that may be called (its tools: {known})"
            return HostedResult(message, error=message, item={"error": _protocol(_INVALID_PARAMS, message)})
        try:
            arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        except json.JSONDecodeError as exc:
            message = f"the arguments are not JSON: {exc}"
            return HostedResult(message, error=message, item={"error": _protocol(_INVALID_PARAMS, message)})
        if not isinstance(arguments, dict):
            message = "the arguments must be a JSON object"
            return HostedResult(message, error=message, item={"error": _protocol(_INVALID_PARAMS, message)})
        try:
            with anyio.fail_after(timeout):
                result = await server.connection.call_tool(name, arguments)
        except Exception as exc:
            message = _failure(exc)
            log.info("MCP call %s.%s failed: %s", server.config.label, name, message)
            return HostedResult(message, error=message, item={"error": _error_item(exc, message)})
        text = _clip(_content_text(result.content), self.max_output_bytes)
        if result.is_error:
            blocks = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content]
            error = {"type": "mcp_tool_execution_error", "content": blocks}
            return HostedResult(text or "the tool failed", error=text or "the tool failed", item={"error": error})
        return HostedResult(text, item={"output": text, "error": None})

    async def aclose(self) -> None:
        return None  # every connection closes with the call that opened it


def _protocol(code: int, message: str) -> dict[str, Any]:
    return {"type": "mcp_protocol_error", "code": code, "message": message}


# -- the backend ---------------------------------------------------------------------------------------------------


def _cached_listing(history: Sequence[Mapping[str, Any]], label: str) -> list[ListedTool] | None:
    """The tools of the chain's latest good `mcp_list_tools` item for `label` (None: none)."""
    for item in reversed(history):
        if item.get("type") == LIST_ITEM and item.get("server_label") == label and not item.get("error"):
            tools = item.get("tools")
            if isinstance(tools, list):
                return [ListedTool.from_item(t) for t in tools if isinstance(t, Mapping)]
    return None


def approvals(chain: Sequence[Mapping[str, Any]], new: Sequence[Any], where: str) -> list[Pending]:
    """The `mcp_approval_response` items of this request's input (`new`), each matched to its request in the
    chain's items (`chain`, then `new`): a `RequestError` for an answer to no request, or to one answered already
    (an `mcp_call` names it)."""
    items = [i for i in [*chain, *new] if isinstance(i, Mapping)]
    requests = {i.get("id"): i for i in items if i.get("type") == APPROVAL_REQUEST and i.get("id")}
    settled = {i.get("approval_request_id") for i in items if i.get("type") == CALL_ITEM}
    out: list[Pending] = []
    for i, item in enumerate(new):
        if not isinstance(item, Mapping) or item.get("type") != APPROVAL_RESPONSE:
            continue
        request_id = item.get("approval_request_id")
        request = requests.get(request_id)
        if request is None:
            raise RequestError.of(
                _spec.REQUEST_ERROR_UNKNOWN_TOOL_CALL,
                f"{where}[{i}].approval_request_id",
                types=Verbatim(APPROVAL_REQUEST),
                call_id=request_id,
            )
        if request_id in settled or any(p.approval_request_id == request_id for p in out):
            raise _invalid(
                f"{where}[{i}].approval_request_id", f"the approval request {request_id} was answered already"
            )
        reason = item.get("reason")
        out.append(
            Pending(
                recipient=str(request.get("server_label"))
                + _spec.HEADER_NAMESPACE_SEPARATOR
                + str(request.get("name")),
                arguments=str(request.get("arguments") or ""),
                approval_request_id=str(request_id),
                approved=item.get("approve") is True,
                reason=reason if isinstance(reason, str) else None,
            )
        )
    return out


class McpBackend:
    """MCP servers as hosted tools (`HostedBackend`), on when the operator says `--mcp`."""

    kind = HostedKind.MCP

    def __init__(self, *, max_output_bytes: int = 64 * 1024, max_tools: int = 128) -> None:
        self.max_output_bytes = max_output_bytes
        self.max_tools = max_tools

    def check(self, tool: Mapping[str, Any], where: str) -> None:
        McpServerTool.parse(tool, where)

    async def open(self, tools: Sequence[Mapping[str, Any]], context: HostedContext) -> McpSession:
        """The session for one response's `mcp` tools. The chain's stored items (`context.chain`) and this request's
        input items (`context.history`) hold the cached listings and the approval requests the input answers."""
        new = [i for i in context.history if isinstance(i, Mapping)]
        history = [i for i in context.chain if isinstance(i, Mapping)]
        where = "input"
        configs = [McpServerTool.parse(t, f"tools[{i}]") for i, t in enumerate(tools)]
        labels = [c.label for c in configs]
        if len(set(labels)) != len(labels):
            dup = next(label for label in labels if labels.count(label) > 1)
            raise _invalid(
                configs[labels.index(dup, labels.index(dup) + 1)].where + ".server_label", f"{dup!r} is declared twice"
            )
        pending = approvals(history, new, where)
        servers: list[_Server] = []
        seen = [*history, *new]
        for config in configs:
            connection = _Connection(config, context.policy, context.timeout)
            cached = _cached_listing(seen, config.label)
            if cached is not None and (config.allowed is None or config.allowed.names is None or
                                       config.allowed.names <= {t.name for t in cached}):  # fmt: skip
                admitted = {t.name: t for t in cached if config.admits(t)}
                servers.append(_Server(config, connection, admitted))
                continue
            listing: dict[str, Any] = {"type": LIST_ITEM, "id": _new_id("mcpl_"), "server_label": config.label}
            try:
                with anyio.fail_after(context.timeout):
                    listed = await connection.list_tools(self.max_tools)
            except Exception as exc:
                message = _failure(exc)
                log.info("listing the tools of MCP server %s failed: %s", config.label, message)
                servers.append(_Server(config, connection, {}, {**listing, "tools": [], "error": message}))
                continue
            admitted = {t.name: t for t in listed if config.admits(t)}
            listing["tools"] = [t.as_item() for t in admitted.values()]
            listing["error"] = None
            servers.append(_Server(config, connection, admitted, listing))
        return McpSession(servers, self.max_output_bytes, pending, _spec.CHANNEL_TOOL_CALLS)

    async def aclose(self) -> None:
        return None
