"""Shared fixtures: the encoding (built from ../shared/vocab) and the reference fixture files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# CI runs the property tests derandomized, so a submission's CI is reproducible; local runs keep
# drawing new examples (and keep finding new divergences from the reference).
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("HARMONY_SHARED", ROOT.parent / "shared"))
FIXTURES = SHARED / "fixtures" / "harmony"
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(SHARED / "vocab"))

from harmony_responses import HarmonyEncoding, HarmonyEncodingName, load_harmony_encoding  # noqa: E402


def require(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is missing: these tests read ../shared from the project root")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with require(path).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def encoding() -> HarmonyEncoding:
    require(SHARED / "vocab" / "o200k_base.tiktoken")
    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
