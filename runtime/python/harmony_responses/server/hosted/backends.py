"""The hosted backends of one server process, built from its settings (each off unless configured).

`HostedService.from_settings` builds one `HostedBackend` per configured kind: `--web-search URL` gives web search
through the browser tool, `--code-interpreter` code_interpreter through the python tool in sandboxed kernels; the
other kinds add theirs here. The service tells the bridge which tool types the server
runs (`capabilities`), opens a request's `HostedRun` (`open`), and closes the backends at shutdown (`aclose`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..._tables import spec as _spec
from ...bridge import Capabilities
from ...bridge.request import hosted_tools_declared
from .base import HostedBackend, HostedKind
from .loop import HostedRun, open_hosted, tool_types
from .policy import FetchPolicy

if TYPE_CHECKING:
    from ...store import Owner
    from ...store.aio import AsyncStore
    from ..metrics import Metrics
    from ..settings import Settings

__all__ = ["HostedService", "chain_items"]

CHAIN_LIMIT = 64  # the stored responses a continuation's hosted tools look back through


async def chain_items(store: AsyncStore, response_id: str, owner: Owner) -> list[dict[str, Any]]:
    """The output items of the stored chain that ends at `response_id` (following `previous_response_id`, at most
    `CHAIN_LIMIT` responses), oldest first. The chain was loaded already (`load_previous`): a response gone since
    ends the walk."""
    resources: list[dict[str, Any]] = []
    current: str | None = response_id
    while current is not None and len(resources) < CHAIN_LIMIT:
        try:
            resource = await store.get(current, owner)
        except Exception:  # gone meanwhile, or the store failed: what was read is what there is
            break
        resources.append(resource)
        previous = resource.get("previous_response_id")
        current = previous if isinstance(previous, str) else None
    return [item for resource in reversed(resources) for item in resource.get("output") or [] if isinstance(item, dict)]


@dataclass
class HostedService:
    """The configured hosted backends, the fetch policy and the per-response limits."""

    backends: dict[HostedKind, HostedBackend] = field(default_factory=dict)
    policy: FetchPolicy = field(default_factory=FetchPolicy)
    timeout: float = 30.0
    max_calls: int = 16
    window: int = 131072
    metrics: Metrics | None = None

    @classmethod
    def from_settings(cls, settings: Settings, metrics: Metrics | None = None) -> HostedService:
        policy = FetchPolicy(settings.hosted_allow, settings.hosted_deny)
        backends: dict[HostedKind, HostedBackend] = {}
        if settings.web_search:
            from .browser import WebSearchBackend
            from .search import SearxngProvider

            provider = SearxngProvider(
                settings.web_search, policy, max_bytes=settings.hosted_max_bytes, timeout=settings.hosted_timeout
            )
            backends[HostedKind.WEB_SEARCH] = WebSearchBackend(provider, max_bytes=settings.hosted_max_bytes)
        if settings.code_interpreter:
            from .code_interpreter import CodeInterpreterBackend, sandbox_config

            backends[HostedKind.CODE_INTERPRETER] = CodeInterpreterBackend(sandbox_config(settings))
        if settings.mcp:
            from .mcp import McpBackend  # the MCP SDK is imported only when MCP is on (the `mcp` extra)

            backends[HostedKind.MCP] = McpBackend(
                max_output_bytes=settings.mcp_max_output_bytes, max_tools=settings.mcp_max_tools
            )
        return cls(
            backends, policy, settings.hosted_timeout, settings.hosted_max_calls, settings.context_window, metrics
        )

    def capabilities(self, capabilities: Capabilities) -> Capabilities:
        """`capabilities` with the tool types the server runs, and the `include` values they honour."""
        if not self.backends:
            return capabilities
        return dataclasses.replace(
            capabilities,
            runs_tools=tool_types(self.backends),
            web_search=HostedKind.WEB_SEARCH in self.backends,
            code_interpreter=HostedKind.CODE_INTERPRETER in self.backends,
        )

    def wants_chain(self, raw: Mapping[str, Any]) -> bool:
        """Whether opening `raw`'s hosted run reads the stored chain it continues (`chain_items`): a continuation
        that declares an MCP server (its cached tool list, the approval requests its input answers)."""
        if HostedKind.MCP not in self.backends or not isinstance(raw.get("previous_response_id"), str):
            return False
        return bool(hosted_tools_declared(raw, frozenset(_spec.HOSTED_KINDS[HostedKind.MCP.value]["tool_types"])))

    async def open(self, raw: Mapping[str, Any], chain: Sequence[Any] = ()) -> HostedRun | None:
        """The hosted run of a request body (validated already), or None when it declares no tool the server runs;
        `chain` the stored output items it continues, when `wants_chain`."""
        if not self.backends:
            return None
        include = raw.get("include")
        previous = raw.get("previous_response_id")
        return await open_hosted(
            raw,
            self.backends,
            policy=self.policy,
            timeout=self.timeout,
            max_calls=self.max_calls,
            window=self.window,
            include=[v for v in include if isinstance(v, str)] if isinstance(include, list) else (),
            previous_response_id=previous if isinstance(previous, str) else None,
            metrics=self.metrics,
            chain=chain,
        )

    async def aclose(self) -> None:
        for backend in self.backends.values():
            await backend.aclose()
