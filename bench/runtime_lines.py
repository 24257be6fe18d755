"""The lines a third language would have to write: each runtime's lines, and how many only interpret tables.

Run: `.venv/bin/python bench/runtime_lines.py` (add `--json` for a machine-readable form). Counts `wc -l`
lines (and code lines: not blank, not only a comment) of the portable runtime per language:
`runtime/typescript/src/**/*.ts`, and the Python package without what the TypeScript port has no twin of (the
HTTP server, the store, the demo, the generator command). Generated modules are not counted: a new language gets
them from harmonygen. `INTERPRETERS` names the modules that only read generated tables and act on them (a
third language writes these as small, mechanical drivers); each entry says why it belongs there.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUNTIMES: dict[str, tuple[Path, str, tuple[str, ...]]] = {
    "typescript": (ROOT / "runtime" / "typescript" / "src", "*.ts", ("generated/",)),
    "python": (
        ROOT / "runtime" / "python" / "harmony_responses",
        "*.py",
        ("server/", "store/", "_generated/", "demo.py", "generator_command.py"),
    ),
}

INTERPRETERS: dict[str, dict[str, str]] = {
    "typescript": {
        "lalr.ts": "drives the generated LALR action/goto tables (grammar.ACTIONS, RULES); no Harmony knowledge",
        "texts.ts": "fills the spec's text templates under the placeholder rule written in format.json",
        "tables.ts": "checks the generated tables' format version and re-exports them",
    },
    "python": {
        "lalr.py": "drives the generated LALR action/goto tables (grammar.ACTIONS, RULES); no Harmony knowledge",
        "texts.py": "fills the spec's text templates under the placeholder rule written in format.json",
        "_tables.py": "checks the generated tables' format version and re-exports them",
    },
}


@dataclass(frozen=True)
class Count:
    """Lines of one module: all of them (`wc -l`) and the code lines."""

    path: str
    lines: int
    code: int


def _is_comment(line: str, suffix: str) -> bool:
    text = line.strip()
    if suffix == "*.ts":
        return text.startswith(("//", "/*", "*", "*/"))
    return text.startswith("#")


def count(path: Path, base: Path, suffix: str) -> Count:
    """One module's counts; Python docstrings count as code lines (they are the API reference)."""
    text = path.read_text(encoding="utf-8").splitlines()
    code = sum(1 for line in text if line.strip() and not _is_comment(line, suffix))
    return Count(path.relative_to(base).as_posix(), len(text), code)


def runtime(language: str) -> list[Count]:
    """Every counted module of one language's runtime, sorted by path."""
    base, suffix, skipped = RUNTIMES[language]
    found = [count(p, base, suffix) for p in sorted(base.rglob(suffix))]
    return [c for c in found if not any(c.path.startswith(s) or c.path == s for s in skipped)]


def summary(language: str) -> dict[str, int]:
    """Totals for one language: all modules, and the table interpreters among them."""
    modules = runtime(language)
    interp = [m for m in modules if m.path in INTERPRETERS[language]]
    missing = set(INTERPRETERS[language]) - {m.path for m in modules}
    if missing:
        raise SystemExit(f"runtime_lines: {language} has no module {sorted(missing)}: update INTERPRETERS")
    return {
        "modules": len(modules),
        "lines": sum(m.lines for m in modules),
        "code_lines": sum(m.code for m in modules),
        "interpreter_modules": len(interp),
        "interpreter_lines": sum(m.lines for m in interp),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print the totals as JSON")
    args = parser.parse_args(argv)
    totals = {language: summary(language) for language in RUNTIMES}
    if args.json:
        sys.stdout.write(json.dumps(totals, indent=2, sort_keys=True) + "\n")
        return 0
    for language, t in totals.items():
        sys.stdout.write(
            f"{language:<11} {t['modules']:>3} modules {t['lines']:>6} lines ({t['code_lines']} code); "
            f"table interpreters: {t['interpreter_modules']} modules, {t['interpreter_lines']} lines\n"
        )
        for name, why in INTERPRETERS[language].items():
            lines = next(m.lines for m in runtime(language) if m.path == name)
            sys.stdout.write(f"  {name:<12} {lines:>4}  {why}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
