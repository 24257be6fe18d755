"""`replay`: plays recorded completions, paced like an inference server (for tests and benchmarks).

A recording file holds JSON Lines (or one JSON list) of objects with either `completion` (Harmony
text, control tokens spelled out) or `tokens` (ids), and optionally `match`: a request whose prompt
text contains `match` gets that recording; other requests get the recordings without `match` in turn.
Tokens come `chunk` at a time at `tokens_per_second` on a fixed schedule (a late chunk does not delay
the next ones), after `first_token_s`; a budget smaller than the recording ends it with `length`.
With `lockstep` (the default) every stream's schedule sits on one shared clock of decode steps, as in an
inference server's continuous batching, where each step gives every running sequence its next token
at the same moment; without it each stream keeps its own clock.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...encoding import HarmonyEncoding
from .base import Engine, EngineInfo, EngineOutput, EngineRequest, Finished, FinishReason, Tokens


class RecordingError(ValueError):
    """A recording file the replay engine cannot use: names the file and the line."""


@dataclass(frozen=True)
class Recording:
    """One recorded completion."""

    tokens: tuple[int, ...]
    match: str | None = None


def load_recordings(path: str | Path, encoding: HarmonyEncoding) -> list[Recording]:
    """The recordings of a JSON Lines (or JSON list) file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read the recordings ({exc.strerror})") from None
    stripped = text.lstrip()
    rows: list[tuple[int, Any]] = []
    try:
        if stripped.startswith("["):
            rows = list(enumerate(json.loads(text), start=1))
        else:
            rows = [(n, json.loads(line)) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    except ValueError as exc:
        raise RecordingError(f"{path}: not JSON Lines or a JSON list: {exc}") from None
    out = []
    for n, row in rows:
        where = f"{path}: record {n}"
        if not isinstance(row, dict):
            raise RecordingError(f"{where}: expected an object with 'completion' or 'tokens'")
        match = row.get("match")
        if match is not None and not isinstance(match, str):
            raise RecordingError(f"{where}: 'match' must be a string")
        if isinstance(row.get("completion"), str):
            tokens = encoding.encode(row["completion"], allowed_special="all")
        elif isinstance(row.get("tokens"), list) and all(isinstance(t, int) for t in row["tokens"]):
            tokens = list(row["tokens"])
        else:
            raise RecordingError(f"{where}: expected 'completion' (a string) or 'tokens' (a list of ids)")
        out.append(Recording(tuple(tokens), match))
    if not out:
        raise RecordingError(f"{path}: no recordings")
    return out


class ReplayEngine(Engine):
    """Plays `recordings`; see the module docstring for the choice and the pacing."""

    def __init__(
        self,
        recordings: Sequence[Recording],
        encoding: HarmonyEncoding,
        *,
        tokens_per_second: float = 100.0,
        first_token_s: float = 0.0,
        chunk: int = 1,
        lockstep: bool = True,
        source: str = "",
    ) -> None:
        super().__init__()
        if not recordings:
            raise RecordingError("no recordings")
        if tokens_per_second < 0 or first_token_s < 0 or chunk < 1:
            raise RecordingError("tokens_per_second and first_token_s must be >= 0, chunk >= 1")
        self.encoding = encoding
        self.matched = [r for r in recordings if r.match is not None]
        unmatched = [r for r in recordings if r.match is None] or list(recordings)
        self._turns = itertools.cycle(unmatched)
        self.tokens_per_second = tokens_per_second
        self.first_token_s = first_token_s
        self.chunk = chunk
        self.lockstep = lockstep
        self.info = EngineInfo(kind="replay", target=source, output="tokens", json_constraint=False)

    def pick(self, prompt: Sequence[int]) -> Recording:
        """The recording for a prompt: the first whose `match` the prompt text contains, else the next in turn."""
        if self.matched:
            text = self.encoding.decode(prompt)
            for recording in self.matched:
                assert recording.match is not None
                if recording.match in text:
                    return recording
        return next(self._turns)

    async def produce(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        tokens = self.pick(request.prompt).tokens
        played = tokens[: request.max_tokens]
        loop = asyncio.get_running_loop()
        start = loop.time() + self.first_token_s
        interval = self.chunk / self.tokens_per_second if self.tokens_per_second else 0.0
        if self.lockstep and interval:
            start = math.ceil(start / interval) * interval  # the next step of the shared decode clock
        for k, i in enumerate(range(0, len(played), self.chunk)):
            delay = start + k * interval - loop.time()
            await asyncio.sleep(delay if delay > 0 else 0)
            yield Tokens(list(played[i : i + self.chunk]))
        if len(tokens) > len(played):
            yield Finished(FinishReason.LENGTH)
        else:
            last = played[-1] if played else None
            yield Finished(FinishReason.STOP, last if last in request.stop_token_ids else None)
