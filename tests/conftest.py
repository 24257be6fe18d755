"""Shared fixtures: the encoding (built from the shared vocabulary) and the reference fixture files.

The shared folder (vocabulary, reference fixtures, the Open Responses OpenAPI document) is read from
`HARMONY_SHARED`, by default `../shared` next to the project root; `make test SHARED=/path` sets it.
The rule, one for every test: the suite needs that folder. When it is missing the run stops before
collecting anything, with one message naming the folder and the variable, instead of skipping the
tests that read it (a green run with a hundred skips tests nothing and looks like a pass). A file
missing from an existing folder fails the test that reads it, naming the file.
"""

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
SHARED_VARIABLE = "HARMONY_SHARED"
SHARED = Path(os.environ.get(SHARED_VARIABLE) or ROOT.parent / "shared").resolve()
FIXTURES = SHARED / "fixtures" / "harmony"
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(SHARED / "vocab"))

from harmony_responses import HarmonyEncoding, HarmonyEncodingName, load_harmony_encoding  # noqa: E402


def missing_shared_message(folder: Path) -> str:
    source = f"{SHARED_VARIABLE}={os.environ[SHARED_VARIABLE]}" if os.environ.get(SHARED_VARIABLE) else "the default"
    return (
        f"the shared folder {folder} does not exist ({source}); the tests read the vocabulary and the "
        f"reference fixtures from it. Set {SHARED_VARIABLE}=/path/to/shared, or run `make test SHARED=/path/to/shared`."
    )


def pytest_configure(config: pytest.Config) -> None:
    if not SHARED.is_dir():
        raise pytest.UsageError(missing_shared_message(SHARED))


def require(path: Path) -> Path:
    """`path` inside the shared folder; a missing file fails the test that needs it (never a silent skip)."""
    if not path.exists():
        pytest.fail(f"{path} is missing from the shared folder {SHARED} ({SHARED_VARIABLE})", pytrace=False)
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with require(path).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@pytest.fixture(scope="session")
def encoding() -> HarmonyEncoding:
    require(SHARED / "vocab" / "o200k_base.tiktoken")
    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
