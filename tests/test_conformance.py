"""The conformance corpus (conformance/), run by the Python runtime: one test per case, comparing only.

The expected files are written by a person with `tests/conformance_tool.py bootstrap` and reviewed; a behaviour
change is a corpus change in the same commit. runtime/typescript/test/conformance.test.ts runs the same cases.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conformance_ops import CORPUS, INPUT, KINDS, cases, expected, run, same_output, unportable
from conformance_tool import unreached_rules

from harmony_responses import HarmonyEncoding

CASES = cases()


def _id(folder: Path) -> str:
    return folder.relative_to(CORPUS).as_posix()


def test_the_corpus_is_large_and_covers_every_kind_and_rule() -> None:
    assert len(CASES) >= 300
    for kind in KINDS:
        assert any(folder.parent.name == kind for folder in CASES), kind
    assert unreached_rules() == []


def test_every_input_reads_alike_in_every_json_reader() -> None:
    """A document inside input.json is read by each runner's own JSON reader; what readers disagree on goes in as
    JSON text (a request's `body`, the CLI's files)."""
    problems = [
        f"{_id(folder)}: {problem}"
        for folder in CASES
        for problem in unportable(json.loads((folder / INPUT).read_text(encoding="utf-8")))
    ]
    assert problems == []


@pytest.mark.parametrize("folder", CASES, ids=_id)
def test_case(encoding: HarmonyEncoding, folder: Path) -> None:
    case: dict[str, Any] = json.loads((folder / INPUT).read_text(encoding="utf-8"))
    want = expected(folder)
    assert want, f"{_id(folder)} has no expected outputs: run tests/conformance_tool.py bootstrap {_id(folder)}"
    got = json.loads(json.dumps(run(encoding, case)))
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        assert same_output(key, got[key], value), key
