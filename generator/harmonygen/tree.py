"""Replacing a folder of generated files: write what changed, delete what is no longer produced."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path


def sync_tree(out_dir: Path, files: Mapping[str, str], existing: Mapping[str, Path]) -> list[str]:
    """Make `out_dir` hold exactly `files` (relative POSIX path → text) among `existing`."""
    changed: list[str] = []
    for rel, path in sorted(existing.items()):
        if rel not in files:
            path.unlink()
            changed.append(f"removed {rel}")
    for rel, text in files.items():
        target = out_dir / rel
        data = text.encode("utf-8")
        if target.is_file() and target.read_bytes() == data:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        changed.append(f"wrote {rel}")
    return changed
