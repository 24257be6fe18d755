"""The grammar corpus (tests/corpus/*.txt), tree-sitter style: read, run, and rewrite it.

A case is a ruler, its name and `:key=value` options (role, mode, tools), a ruler, the input, a
`---` line, and the expected messages as JSON Lines (or one `ERROR: text` line).

    python tests/corpus_tool.py --update   # re-record expected messages from the current parser

`--update` never records an error: a case whose input now fails keeps its text and the command
fails, unless the case already expects an error.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
RULER = "=" * 80
ERROR = "ERROR: "


@dataclass(frozen=True)
class CorpusCase:
    file: str
    name: str
    options: tuple[tuple[str, str], ...]
    input: str
    expected: tuple[str, ...]  # JSON lines of messages, or one "ERROR: ..." line

    def option(self, key: str, default: str) -> str:
        return dict(self.options).get(key, default)

    def parse_args(self) -> dict[str, Any]:
        role = self.option("role", "assistant")
        tools = self.option("tools", "")
        return {
            "role": None if role == "none" else role,
            "mode": self.option("mode", "strict"),
            "tools": tools.split(",") if tools else None,
        }

    @property
    def expects_error(self) -> bool:
        return bool(self.expected) and self.expected[0].startswith(ERROR)


def load_corpus(path: Path) -> list[CorpusCase]:
    cases = []
    blocks = path.read_text(encoding="utf-8").split(RULER + "\n")
    if blocks[0].strip():
        raise ValueError(f"{path.name}: text before the first case")
    for head, body in zip(blocks[1::2], blocks[2::2], strict=True):
        lines = head.strip().splitlines()
        options = tuple((k, v) for k, v in (line[1:].split("=", 1) for line in lines[1:]))
        source, sep, expected = body.partition("\n---\n")
        if not sep:
            raise ValueError(f"{path.name}: case {lines[0]!r} has no --- line")
        cases.append(
            CorpusCase(path.name, lines[0], options, source, tuple(x for x in expected.strip().splitlines() if x))
        )
    return cases


def dump_corpus(cases: list[CorpusCase]) -> str:
    out = []
    for case in cases:
        head = [case.name, *(f":{k}={v}" for k, v in case.options)]
        block = f"{RULER}\n" + "\n".join(head) + f"\n{RULER}\n{case.input}\n---\n"
        out.append(block + "".join(line + "\n" for line in case.expected))
    return "\n".join(out)


def load_all() -> list[CorpusCase]:
    return [case for path in sorted(CORPUS.glob("*.txt")) for case in load_corpus(path)]


def update(folder: Path = CORPUS) -> int:
    os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(ROOT.parent / "shared" / "vocab"))
    from harmony_responses import HarmonyParseError, load_harmony_encoding, parse_text

    encoding = load_harmony_encoding("HarmonyGptOss")
    refused = 0
    for path in sorted(folder.glob("*.txt")):
        cases = []
        for case in load_corpus(path):
            try:
                messages = parse_text(encoding, case.input, **case.parse_args())
            except HarmonyParseError as exc:
                if not case.expects_error:
                    print(f"{path.name}: {case.name}: refusing to record an error ({exc})", file=sys.stderr)
                    refused += 1
                cases.append(case)
                continue
            lines = tuple(json.dumps(m.to_dict(), ensure_ascii=False) for m in messages)
            cases.append(replace(case, expected=lines))
        path.write_text(dump_corpus(cases), encoding="utf-8")
    return 1 if refused else 0


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(update())
