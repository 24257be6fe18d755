"""Every line of the TypeScript runtime fits in 140 columns.

The runtime's size is one of issue 19's measures (bench/runtime_lines.py counts lines). With no formatter
holding the layout, a count of lines could be lowered by joining statements; this width limit keeps the
count honest and the source readable. Generated modules are not checked (harmonygen lays them out).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "runtime" / "typescript" / "src"
WIDTH = 140


def _wide_lines() -> list[str]:
    found: list[str] = []
    for path in sorted(SOURCE.rglob("*.ts")):
        relative = path.relative_to(SOURCE).as_posix()
        if relative.startswith("generated/"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if len(line) > WIDTH:
                found.append(f"{relative}:{number}: {len(line)} columns")
    return found


def test_runtime_sources_exist() -> None:
    assert len([p for p in SOURCE.rglob("*.ts") if "generated" not in p.parts]) > 10


def test_no_typescript_runtime_line_is_wider_than_the_limit() -> None:
    assert _wide_lines() == []
