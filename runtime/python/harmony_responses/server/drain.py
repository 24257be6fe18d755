"""Graceful shutdown of one worker: stop taking requests, let live responses finish, then end the rest.

`Drain.begin` (the first SIGTERM or SIGINT) turns new requests away with 503 `server_shutting_down` and
`Retry-After`, and gives the responses already running `--shutdown-timeout` seconds. `Drain.expire` (the
deadline, or a second signal) interrupts each one still running: a stream ends with `error`,
`response.failed` and `[DONE]` (Chat: an error chunk and `[DONE]`), a whole response with a 503 naming
its id, and a stored one (a background one too, `background`) is stored failed. The server closes the
store only once they are all done.
"""

from __future__ import annotations

import asyncio
import logging
from enum import Enum
from typing import Protocol

log = logging.getLogger("harmony_responses.server")


class Phase(Enum):
    """Where a worker is in its life."""

    SERVING = "serving"
    DRAINING = "draining"  # no new requests; live responses may finish
    EXPIRED = "expired"  # the deadline passed: live responses are ended now


class Interruptible(Protocol):
    def interrupt(self) -> None: ...


class Drain:
    """The worker's phase and the responses it is running (each registers while it runs)."""

    def __init__(self) -> None:
        self.phase = Phase.SERVING
        self.calls: set[Interruptible] = set()
        self.timeout = 0.0
        self._timer: asyncio.TimerHandle | None = None

    @property
    def draining(self) -> bool:
        return self.phase is not Phase.SERVING

    @property
    def expired(self) -> bool:
        return self.phase is Phase.EXPIRED

    def begin(self, timeout: float) -> None:
        """Stop taking requests; `expire` in `timeout` seconds (at once when nothing runs)."""
        if self.phase is not Phase.SERVING:
            return
        self.phase = Phase.DRAINING
        self.timeout = timeout
        log.info("draining: %d responses running get up to %g s to finish", len(self.calls), timeout)
        self._timer = asyncio.get_running_loop().call_later(timeout, self.expire)

    def expire(self) -> None:
        """End every response still running (each ends itself with its terminal events)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.phase is Phase.EXPIRED:
            return
        self.phase = Phase.EXPIRED
        if self.calls:
            log.warning("shutdown: ending %d responses still running", len(self.calls))
        for call in list(self.calls):
            call.interrupt()
