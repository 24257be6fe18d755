"""The hosted backends of one server process, built from its settings (each off unless configured).

`HostedService.from_settings` builds one `HostedBackend` per configured kind: `--web-search URL` gives web search
through the browser tool; the other kinds add theirs here. The service tells the bridge which tool types the server
runs (`capabilities`), opens a request's `HostedRun` (`open`), and closes the backends at shutdown (`aclose`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...bridge import Capabilities
from .base import HostedBackend, HostedKind
from .loop import HostedRun, open_hosted, tool_types
from .policy import FetchPolicy

if TYPE_CHECKING:
    from ..metrics import Metrics
    from ..settings import Settings

__all__ = ["HostedService"]


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
        return cls(
            backends, policy, settings.hosted_timeout, settings.hosted_max_calls, settings.context_window, metrics
        )

    def capabilities(self, capabilities: Capabilities) -> Capabilities:
        """`capabilities` with the tool types the server runs, and the `include` values they honour."""
        if not self.backends:
            return capabilities
        return dataclasses.replace(
            capabilities, runs_tools=tool_types(self.backends), web_search=HostedKind.WEB_SEARCH in self.backends
        )

    async def open(self, raw: Mapping[str, Any]) -> HostedRun | None:
        """The hosted run of a request body (validated already), or None when it declares no tool the server runs."""
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
        )

    async def aclose(self) -> None:
        for backend in self.backends.values():
            await backend.aclose()
