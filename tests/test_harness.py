"""The setup the corpus's Python operations and the TypeScript property tests share (tests/harness.py)."""

from __future__ import annotations

import os

import pytest
from harness import COLUMNS, built, fixed, flag_columns


@pytest.mark.parametrize("before", [None, "132"])
def test_flag_columns_holds_the_width_then_gives_back_what_was(
    monkeypatch: pytest.MonkeyPatch, before: str | None
) -> None:
    if before is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", before)
    with flag_columns():
        assert os.environ["COLUMNS"] == COLUMNS
    assert os.environ.get("COLUMNS") == before


def test_a_missing_build_names_the_make_target() -> None:
    with pytest.raises(RuntimeError, match="make ts-build"):
        built("test/no-such-script.js")


def test_each_fixed_clock_counts_its_ids_from_the_start() -> None:
    first, second = fixed(True), fixed(False)
    assert first["ids"]("msg") == second["ids"]("msg") and first["strict"] and not second["strict"]
    assert first["clock"]() == 0.0 and first["created_at"] == 0 and first["input_tokens"] == 7
