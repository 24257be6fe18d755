"""The conformance corpus (conformance/): write its expected outputs from the current Python behaviour.

Run by a person, never by the tests (the runners only compare):

    .venv/bin/python tests/conformance_tool.py bootstrap   # rewrite every case's expected files; review `git diff`
    .venv/bin/python tests/conformance_tool.py bootstrap events/rule-extra-stop-lenient   # only these
    .venv/bin/python tests/conformance_tool.py import      # (re)write the inputs from the repository's sources

`import` collected the inputs once from tests/corpus, tests/peers, tests/realworld, tests/bridge, examples/,
the reference's render fixtures (../shared), the CLI and bad-request tables (tests/conformance_sources.py); the
inputs are data from then on (a case is added by writing its input.json and running `bootstrap` on it). `import`
never overwrites a case folder unless given --force; on an empty corpus it writes the same inputs again, but for
the conversations hypothesis draws, which may differ from one import to the next. Every lenient recovery rule
must be the rule of some case's `recovered` event or response repair: both commands name the rules no case
reaches, and fail.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
SHARED = Path(os.environ.get("HARMONY_SHARED", HERE.parent.parent / "shared"))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(SHARED / "vocab"))

import conformance_ops as ops  # noqa: E402

from harmony_responses import HarmonyEncoding  # noqa: E402
from harmony_responses.stream import RECOVERY_RULES  # noqa: E402

ROOT = HERE.parent


def _encoding() -> HarmonyEncoding:
    return ops.load_encoding()


# -- bootstrap ----------------------------------------------------------------------------------------------


def bootstrap(encoding: HarmonyEncoding, folders: list[Path]) -> None:
    for folder in folders:
        case = json.loads((folder / ops.INPUT).read_text(encoding="utf-8"))
        for old in folder.iterdir():
            if old.name != ops.INPUT:
                old.unlink()
        for key, value in ops.run(encoding, case).items():
            ops.write_value(folder / ops.file_name(key, value), value)
    print(f"wrote the expected outputs of {len(folders)} cases", file=sys.stderr)


def _rules(value: Any) -> Iterator[str]:
    """The `rule` of every recovered event and every repair a response reports."""
    if isinstance(value, dict):
        if isinstance(value.get("rule"), str):
            yield value["rule"]
        for inner in value.values():
            yield from _rules(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _rules(inner)


def unreached_rules() -> list[str]:
    """The lenient recovery rules (spec/harmony/parsing.json) that no case's events or response shows."""
    reached: set[str] = set()
    for folder in ops.cases():
        for name in ("events.jsonl", "response.json"):
            if (folder / name).is_file():
                reached |= set(_rules(ops.read_value(folder / name)))
    return sorted(set(RECOVERY_RULES) - reached)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("bootstrap", "import", "rules"):
        print(__doc__, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    if command == "import":
        import conformance_sources  # noqa: PLC0415

        written = conformance_sources.write_inputs(force="--force" in rest)
        bootstrap(_encoding(), written)
    elif command == "bootstrap":
        folders = [ops.CORPUS / name for name in rest] if rest else ops.cases()
        bootstrap(_encoding(), folders)
    missing = unreached_rules()
    if missing:
        print(f"no case reaches the recovery rules: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
