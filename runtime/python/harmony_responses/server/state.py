"""What the handlers of one server process share: settings, the encoding, the engine, the response store,
the compaction seal, the reasoning seal, the turn renderer, the background runs, metrics, the drain (shutdown)
and the count of engine calls in flight."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..bridge.encrypted import ReasoningSeal
from ..encoding import HarmonyEncoding
from ..store import AsyncStore
from .auth import KeyCheck
from .background import BackgroundRuns
from .compaction import CompactionSeal
from .drain import Drain
from .engines.base import Engine
from .errors import ErrorKind, ServerError
from .hosted.backends import HostedService
from .metrics import Metrics
from .settings import Settings
from .stored import TurnRenderer


@dataclass
class ServerState:
    """The state of one server process (one worker)."""

    settings: Settings
    encoding: HarmonyEncoding
    engine: Engine
    keys: KeyCheck
    store: AsyncStore
    seal: CompactionSeal
    renderer: TurnRenderer
    reasoning: ReasoningSeal  # seals reasoning items' `encrypted_content` and opens them again
    metrics: Metrics = field(default_factory=Metrics)
    drain: Drain = field(default_factory=Drain)
    background: BackgroundRuns = field(default_factory=BackgroundRuns)  # this process's background responses
    hosted: HostedService = field(default_factory=HostedService)  # the hosted tools' backends (off unless configured)
    in_flight: int = 0
    started_at: int = field(default_factory=lambda: int(time.time()))

    def acquire(self) -> None:
        """Take a slot for an engine call, or 429."""
        limit = self.settings.max_concurrency
        if self.in_flight >= limit:
            raise ServerError(
                ErrorKind.TOO_MANY_REQUESTS,
                f"the server is at its limit of {limit} concurrent requests; retry shortly",
                headers={"Retry-After": "1"},
            )
        self.in_flight += 1

    def release(self) -> None:
        self.in_flight -= 1
