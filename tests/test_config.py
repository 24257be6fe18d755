"""`[tool.harmonygen]` settings: same names as the CLI flags, unknown keys rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from harmonygen.config import find_root, load_config

ROOT = Path(__file__).resolve().parent.parent


def test_reads_pyproject_table() -> None:
    config = load_config(ROOT)
    assert (config.spec, config.grammar, config.templates, config.output) == (
        "spec",
        "grammar",
        "templates",
        "generated",
    )
    assert config.output_dir == ROOT / "generated"
    assert find_root(ROOT / "generator" / "harmonygen") == ROOT


def test_overrides_use_flag_names() -> None:
    config = load_config(ROOT, output="elsewhere", spec=None)
    assert config.output == "elsewhere" and config.spec == "spec"


def test_unknown_key_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.harmonygen]\nspec = "spec"\noutptu = "x"\n')
    with pytest.raises(ValueError, match=r"unknown keys \['outptu'\]"):
        load_config(tmp_path)


def test_missing_table(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"\[tool.harmonygen\]"):
        find_root(tmp_path)
