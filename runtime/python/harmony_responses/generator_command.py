"""The `harmonygen` console script as the wheel installs it: the generator, or one line saying what it needs.

harmonygen (the generator that writes `generated/`) is a developer's tool: it needs the `gen` extra
(Jinja2, Lark, jsonschema, datamodel-code-generator, ruff) and a clone of the repository (it reads `spec/`,
`grammar/`, `templates/` and the runtime's sources, found from the nearest `pyproject.toml` with a
`[tool.harmonygen]` table). Installed without them, `harmonygen` says so in one line and exits 2 instead of
a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

_GEN_MODULES = ("jinja2", "lark", "jsonschema", "datamodel_code_generator")
_TABLE = "[tool.harmonygen]"  # the table of pyproject.toml that makes a folder harmonygen's project
_NEEDS_NO_PROJECT = ("-h", "--help", "--version")


def _project_root(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, ValueError):
                return None
            return folder if _TABLE in text.splitlines() else None
    return None


def missing_requirement(argv: Sequence[str], cwd: Path) -> str | None:
    """Why harmonygen cannot run here, in one line; None when it can."""
    import importlib.util

    absent = [name for name in _GEN_MODULES if importlib.util.find_spec(name) is None]
    if absent:
        return (
            f"harmonygen needs the gen extra ({absent[0]} is not installed): "
            "pip install 'harmony-responses[gen]' in a clone of the repository"
        )
    wants_project = not any(a in _NEEDS_NO_PROJECT for a in argv) and "--root" not in argv
    if wants_project and _project_root(cwd) is None:
        return (
            "harmonygen runs in a clone of the harmony-responses repository (it reads spec/, grammar/ and "
            "templates/ from the nearest pyproject.toml with [tool.harmonygen]); none was found from here"
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    problem = missing_requirement(args, Path.cwd())
    if problem is not None:
        print(f"harmonygen: {problem}", file=sys.stderr)
        return 2
    from harmonygen.cli import main as generator_main

    return generator_main(args)


if __name__ == "__main__":
    raise SystemExit(main())
