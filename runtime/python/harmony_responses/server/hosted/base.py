"""The interface between the server's hosted-tool loop and the backends that run the tools.

gpt-oss was trained with built-in tools (`browser`, `python`); a Responses request asks for them as hosted tools
(`{"type": "web_search"}`, `{"type": "code_interpreter"}`, `{"type": "mcp", ...}`), which the server runs itself.
Each kind of hosted tool has one `HostedBackend`, built at start-up only when the operator configured it
(`--web-search URL`, the sandbox, MCP): a kind with no backend is never run (the client issue's hosted-tools policy
then applies: left out and listed in `harmony:unavailable_tools`, or a 400).

How the loop (`hosted.loop`) uses a backend, for one response:

1. **Parsing the request.** For each declared tool of its kind, `backend.check(tool, where)` refuses (a
   `RequestError` naming `where` + the field, e.g. `tools[2].user_location`) what it cannot honour; never silently
   drops a field that would change what the model sees or what the tool does.
2. **Before the engine runs.** `await backend.open(tools, context)` gives the response's `HostedSession` (one per
   kind, holding the declared tools of that kind: a browser's page stack, an MCP server's connection and tool list,
   a python container). `session.namespaces()` are rendered in the system message, as Harmony declares built-in
   tools (`## browser`, `## python`, an MCP server's own namespace); `session.items()` are output items the
   response starts with (`mcp_list_tools`), emitted before the model's first token.
3. **A call.** When the model ends a message to a recipient `session.claims(recipient)` (`browser.search`,
   `python`, `<label>.<tool>`), the loop emits the call's output item (`output_item.added` with
   `session.started(call)`'s fields, the kind's `before` events), then `await session.call(HostedCall(...),
   timeout=...)` (the per-call timeout is the loop's; a call that overruns is cancelled and becomes a
   `HostedResult` with `error`). The result becomes:
   - the output item: the kind's item (`web_search_call`, `code_interpreter_call`, `mcp_call`) with `id`, `status`
     (`completed`, or `failed` when `error` is set), and `result.item`'s fields merged on top (`action`, `outputs`,
     `output`, `error`...), then the kind's "completed" event and `output_item.done`;
   - the tool message the model reads: author `result.author or call.recipient`, to `assistant`, on the channel
     the model used, its content `result.text` (a failure's text says what failed, so the model can recover);
   and the loop continues the completion with that message appended (the engine's prefix cache keeps it cheap).
   `result.citations` are the pages the answer may cite (`【{cursor}†L{n}】`): the loop turns them into
   `url_citation` annotations on the answer's `output_text`. `result.stop` ends the response after the item
   (no tool message, no continuation). `session.pending()` calls run first, before the model's first token.
4. **The end of the response.** `await session.aclose()` (whatever happened: completed, failed, cancelled).
   `await backend.aclose()` at shutdown, after the drain.

Backends never fetch anything themselves without `hosted.policy.FetchPolicy`: every URL a backend was configured
with or the model chose goes through `policy.client()` (an httpx client whose connections are checked against the
allow/deny policy at the address actually connected to).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable

from ...models import ToolNamespaceConfig
from .policy import FetchPolicy

__all__ = [
    "Citation",
    "HostedBackend",
    "HostedCall",
    "HostedContext",
    "HostedKind",
    "HostedResult",
    "HostedSession",
]


class HostedKind(str, Enum):
    """A kind of hosted tool, by the `type` a request declares it with."""

    WEB_SEARCH = "web_search"
    MCP = "mcp"
    CODE_INTERPRETER = "code_interpreter"


@dataclass(frozen=True)
class HostedCall:
    """One call the model made to a hosted tool, as the loop hands it to the session."""

    recipient: str  # as the model wrote it: `browser.search`, `python`, `<mcp label>.<tool>`
    arguments: str  # the call's body as text: JSON for browser and MCP, source code for python
    call_id: str  # the output item's id (`ws_...`, `ci_...`, `mcp_...`): a backend may key its own state by it
    container: str | None = None  # the container the request names (code_interpreter), else None
    channel: str | None = None  # the channel the call was written on (for `pending` calls: the tool message's)
    response_id: str | None = None  # the response the call is made in (a later `previous_response_id` names it)


@dataclass(frozen=True)
class Citation:
    """A page the answer may cite: the model writes `【{cursor}†L{start}(-L{end})?】` for lines of page `cursor`."""

    cursor: int
    url: str
    title: str


@dataclass(frozen=True)
class HostedResult:
    """What a call gave: the tool message's text for the model, and the output item's fields for the client."""

    text: str  # the tool message content the model reads
    error: str | None = None  # a tool failure (timeout, limit, refused URL): the item is `failed`; `text` says it too
    item: Mapping[str, Any] = field(default_factory=dict)  # the output item's fields (action, outputs, output, ...)
    author: str | None = None  # the tool message's author, when not the call's recipient
    citations: Sequence[Citation] = ()  # pages shown by this call that the answer may cite
    stop: bool = False  # end the response after this call's item (an MCP approval request): no tool message


@dataclass(frozen=True)
class HostedContext:
    """What a session may know of the response it serves (never the client's credentials beyond its own tools)."""

    policy: FetchPolicy  # every fetch goes through it
    timeout: float  # seconds per call (`--hosted-timeout`)
    include: frozenset[str] = frozenset()  # the request's `include` values (`web_search_call.action.sources`)
    previous_response_id: str | None = None  # the chain a session may cache by (MCP tool lists)
    history: Sequence[Any] = ()  # the request's `input` items as sent (JSON), e.g. an `mcp_approval_response`
    chain: Sequence[Any] = ()  # the output items of the stored responses `previous_response_id` continues, oldest first


@runtime_checkable
class HostedSession(Protocol):
    """The hosted tools of one kind for one response."""

    def namespaces(self) -> Sequence[ToolNamespaceConfig]:
        """The Harmony tool namespaces the system message declares for this session."""
        ...

    def items(self) -> Sequence[Mapping[str, Any]]:
        """Output items the response starts with (before any token), such as `mcp_list_tools`; usually none."""
        ...

    def claims(self, recipient: str) -> bool:
        """Whether a message to `recipient` is a call this session runs."""
        ...

    def pending(self) -> Sequence[HostedCall]:
        """Calls to run before the model's first token (an approved MCP call), in order; usually none. Each is run
        as a call the model made (its item, events and tool message, which the prompt then ends with)."""
        ...

    def started(self, call: HostedCall) -> Mapping[str, Any]:
        """The output item's fields while `call` runs (`action`, `code`, `name`/`arguments`/`server_label`...);
        the loop sets `type`, `id` and `status` unless they are given (a `type` other than the kind's item type
        sends none of the kind's events: an `mcp_approval_request`)."""
        ...

    async def call(self, call: HostedCall, *, timeout: float) -> HostedResult:
        """Run one call. Tool failures are a `HostedResult` with `error`, not an exception."""
        ...

    async def aclose(self) -> None:
        """The response ended: release what the session holds."""
        ...


@runtime_checkable
class HostedBackend(Protocol):
    """One kind of hosted tool, configured by the operator (one per server process)."""

    kind: HostedKind

    def check(self, tool: Mapping[str, Any], where: str) -> None:
        """Refuse a declared tool's field this backend cannot honour: `RequestError` naming `where.<field>`."""
        ...

    async def open(self, tools: Sequence[Mapping[str, Any]], context: HostedContext) -> HostedSession:
        """The session for one response's declared tools of this kind (in request order)."""
        ...

    async def aclose(self) -> None:
        """The server is shutting down."""
        ...
