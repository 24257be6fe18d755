"""Set-up (issue 9, item 19): what `make run` installs, where the tests find ../shared, the license metadata."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make") or "make"  # the project's two entry points are make targets
OUTSIDE = ("HARMONY_SHARED", "TIKTOKEN_ENCODINGS_BASE", "MAKEFLAGS", "MAKELEVEL")


def _make(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in OUTSIDE}
    done = subprocess.run([MAKE, "-s", *args], cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_run_installs_only_the_package_and_its_demo() -> None:
    # the server and the openai SDK its scripted session uses: no generator, no test tools, no Node
    plan = _make("-n", "-B", "run")  # every step make would take on a fresh machine, none taken
    installs = [line for line in plan.splitlines() if "pip install" in line and " -e " in line]
    assert installs == [f"{ROOT.joinpath('.venv/bin/python').relative_to(ROOT)} -m pip install -q -e '.[demo]'"]
    assert "npm" not in plan and "harmonygen" not in plan


def test_make_passes_shared_to_the_tests() -> None:
    probe = ["--eval", "probe: ; @echo $$HARMONY_SHARED $$TIKTOKEN_ENCODINGS_BASE", "probe"]
    assert _make(*probe, "SHARED=/some/where").split() == ["/some/where", "/some/where/vocab"]
    assert _make(*probe).split()[0] == str(ROOT.parent.resolve() / "shared")


def test_a_missing_shared_folder_stops_the_run_with_one_message(tmp_path: Path) -> None:
    missing = tmp_path / "no-shared"
    env = {**os.environ, "HARMONY_SHARED": str(missing)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests" / "test_config.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert f"the shared folder {missing} does not exist" in done.stderr
    assert "HARMONY_SHARED" in done.stderr and "make test SHARED=" in done.stderr
    assert "passed" not in done.stdout and "skipped" not in done.stdout


def test_the_license_is_an_spdx_string() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["project"]["license"] == "Apache-2.0"  # a table is deprecated by setuptools 77+
    assert "setuptools>=77" in project["build-system"]["requires"][0]
