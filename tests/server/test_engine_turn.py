"""`engines.reader._Turn`: the listening responses that read something in one loop turn are handed their
payloads together, and what the listeners leave for the turn's end (their client writes) runs after all of
them. Unit tests of that one class, with stand-ins for the responses."""

from __future__ import annotations

import asyncio
from typing import Any

from harmony_responses.server.engines.reader import _Turn


class _Response:
    """Stands in for an `EngineResponse`: records what the turn does to it."""

    def __init__(self, name: str, log: list[str], turn: _Turn, leave: bool = True) -> None:
        self.name = name
        self.log = log
        self.turn = turn
        self.leave = leave  # what its write step returns

    def _hand(self) -> None:
        self.log.append(f"hand {self.name}")
        self.turn.after(self, self.write)  # type: ignore[arg-type]

    def write(self) -> bool:
        self.log.append(f"write {self.name}")
        return self.leave

    def stop_listening(self) -> None:
        self.log.append(f"stop {self.name}")


def _run_turn(build: Any) -> list[str]:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        turn = _Turn(loop)
        log: list[str] = []
        build(turn, log)
        await asyncio.sleep(0)  # one loop turn: the turn's callback, scheduled first, runs
        return log

    return asyncio.run(main())


def test_every_response_of_a_turn_is_handed_its_payloads_before_any_write() -> None:
    def build(turn: _Turn, log: list[str]) -> None:
        for name in "abc":
            turn.add(_Response(name, log, turn))  # type: ignore[arg-type]

    assert _run_turn(build) == ["hand a", "hand b", "hand c", "write a", "write b", "write c"]


def test_a_write_step_that_returns_false_stops_its_response_listening() -> None:
    def build(turn: _Turn, log: list[str]) -> None:
        turn.add(_Response("a", log, turn, leave=False))  # type: ignore[arg-type]
        turn.add(_Response("b", log, turn))  # type: ignore[arg-type]

    assert _run_turn(build) == ["hand a", "hand b", "write a", "stop a", "write b"]


def test_a_turn_runs_once_for_all_that_arrived_and_again_for_what_arrives_later() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        turn = _Turn(loop)
        log: list[str] = []
        turn.add(_Response("a", log, turn))  # type: ignore[arg-type]
        turn.add(_Response("b", log, turn))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        log.append("--")
        turn.add(_Response("c", log, turn))  # type: ignore[arg-type]
        await asyncio.sleep(0)
        return log

    assert asyncio.run(main()) == ["hand a", "hand b", "write a", "write b", "--", "hand c", "write c"]
