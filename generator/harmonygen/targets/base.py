from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Output:
    path: str  # relative to the output folder, POSIX separators
    text: str  # without the header line, which the engine adds
    sources: tuple[str, ...]  # spec / grammar files the content comes from
    template: str  # the template it was rendered from
