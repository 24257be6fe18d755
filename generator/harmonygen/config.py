"""Settings: `[tool.harmonygen]` in pyproject.toml, keys named like the CLI flags."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Config:
    root: Path
    spec: str = "spec"
    grammar: str = "grammar"
    templates: str = "templates"
    runtime: str = "runtime"
    output: str = "generated"

    def path(self, rel: str) -> Path:
        return self.root / rel

    @property
    def spec_dir(self) -> Path:
        return self.root / self.spec

    @property
    def grammar_dir(self) -> Path:
        return self.root / self.grammar

    @property
    def templates_dir(self) -> Path:
        return self.root / self.templates

    @property
    def runtime_dir(self) -> Path:
        return self.root / self.runtime

    @property
    def output_dir(self) -> Path:
        return self.root / self.output


def find_root(start: Path) -> Path:
    """The nearest folder upwards holding a pyproject.toml with a [tool.harmonygen] table."""
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and "[tool.harmonygen]" in candidate.read_text(encoding="utf-8"):
            return folder
    raise FileNotFoundError(f"no pyproject.toml with [tool.harmonygen] at or above {start}")


def load_config(root: Path | None = None, **overrides: Any) -> Config:
    root = find_root(Path.cwd()) if root is None else root
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    table = data.get("tool", {}).get("harmonygen", {})
    known = {"spec", "grammar", "templates", "runtime", "output"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"pyproject.toml [tool.harmonygen]: unknown keys {unknown}; known: {sorted(known)}")
    config = Config(root=root, **table)
    clean = {k: v for k, v in overrides.items() if v is not None}
    return replace(config, **clean) if clean else config
