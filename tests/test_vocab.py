"""Finding the o200k_base ranks: the env folder first, a checked hash, a clear error offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import SHARED, require

SCRIPT = (
    "from harmony_responses import load_harmony_encoding\n"
    "try:\n"
    "    enc = load_harmony_encoding('HarmonyGptOss')\n"
    "    print('ok', enc.encode('hello world'))\n"
    "except Exception as exc:\n"
    "    print(type(exc).__name__, exc)\n"
)


def _run(tmp_path: Path, base: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_ENCODINGS_BASE"}
    env["TIKTOKEN_CACHE_DIR"] = str(tmp_path / "empty-cache")
    if base is not None:
        env["TIKTOKEN_ENCODINGS_BASE"] = base
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_loads_from_env_folder(tmp_path: Path) -> None:
    require(SHARED / "vocab" / "o200k_base.tiktoken")
    assert _run(tmp_path, str(SHARED / "vocab")) == "ok [24912, 2375]"


def test_wrong_file_is_rejected_by_hash(tmp_path: Path) -> None:
    (tmp_path / "o200k_base.tiktoken").write_bytes(b"aGVsbG8= 0\n")
    out = _run(tmp_path, str(tmp_path))
    assert out.startswith("HarmonyError ")
    assert "o200k_base.tiktoken: sha256 is" in out and "446a9538cb6c348e" in out


def test_env_folder_without_file(tmp_path: Path) -> None:
    out = _run(tmp_path, str(tmp_path / "nowhere"))
    assert out.startswith("HarmonyError TIKTOKEN_ENCODINGS_BASE=")
    assert "does not exist" in out


def test_offline_without_file_says_what_to_set(tmp_path: Path) -> None:
    out = _run(tmp_path, None)
    assert out.startswith("HarmonyError cannot load o200k_base.tiktoken")
    assert "Set TIKTOKEN_ENCODINGS_BASE=<folder holding o200k_base.tiktoken>" in out
