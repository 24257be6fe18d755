"""The packages install clean: the wheel, installed into a fresh venv with only the `server` extra, has a
LICENSE and the page's files, and none of its console scripts prints a traceback; the npm tarball carries
the LICENSE and its README."""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import ROOT

SCRIPTS_ARGS: list[list[str]] = [
    ["harmony-responses", "--version"],
    ["harmony-responses", "--help"],
    ["harmony-responses", "serve", "--help"],
    ["harmony-responses", "demo", "--help"],
    ["harmony-responses", "parse", "--help"],
    ["harmonygen", "--version"],
    ["harmonygen", "--help"],
    ["harmonygen", "generate"],
    ["harmony-responses", "demo"],
]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (found,) = out.glob("harmony_responses-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, f"{wheel}[server]"], check=True, capture_output=True, timeout=900)
    yield venv / "bin"


def test_the_wheel_holds_the_license_the_page_and_the_types(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    licenses = [n for n in names if ".dist-info/licenses/" in n]
    assert any(n.endswith("/LICENSE") for n in licenses), licenses
    text = zipfile.ZipFile(wheel).read(next(n for n in licenses if n.endswith("/LICENSE"))).decode()
    assert "Apache License" in text and "Version 2.0" in text
    for part in ("index.html", "page.js", "page.css", "icon.svg"):
        assert f"harmony_responses/server/static/{part}" in names
    assert "harmony_responses/py.typed" in names
    metadata = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata
    server_extra = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: jsonschema")]
    assert any('extra == "server"' in line for line in server_extra), server_extra


def test_no_console_script_prints_a_traceback_with_only_the_server_extra(installed: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARMONY_RESPONSES_", "VIRTUAL_ENV"))}
    for argv in SCRIPTS_ARGS:
        run = subprocess.run(
            [str(installed / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            cwd=tmp_path,  # outside the repository
            env=env,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        both = run.stdout + run.stderr
        assert "Traceback" not in both, (argv, both)
        if argv[-1] in ("--help", "--version") and argv[0] != "harmonygen":
            assert run.returncode == 0, (argv, both)
        else:  # the generator without its extra (whatever it is asked), the demo without the openai SDK: one line
            assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, (argv, both)
            assert "pip install 'harmony-responses[" in run.stderr, (argv, both)
    version = subprocess.run([str(installed / "harmony-responses"), "--version"], capture_output=True, text=True)
    assert version.stdout.strip() == "harmony-responses 0.1.0"
    check = subprocess.run(
        [str(installed / "python"), "-c", "import jsonschema, harmony_responses.server.app"], capture_output=True
    )
    assert check.returncode == 0, check.stderr


def test_the_npm_tarball_holds_the_license_and_its_readme_under_its_own_root() -> None:
    """`npm pack` of runtime/typescript: the package's own paths (dist/index.js), no repository layout, no tests."""
    package = ROOT / "runtime" / "typescript"
    run = subprocess.run(
        ["npm", "pack", "--dry-run", "--json", "--ignore-scripts"],
        cwd=package,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "npm_config_update_notifier": "false"},
    )
    assert run.returncode == 0, run.stderr
    files = {f["path"] for f in json.loads(run.stdout)[0]["files"]}
    assert {"LICENSE", "README.md", "package.json"} <= files
    assert {"dist/index.js", "dist/index.d.ts", "dist/bin.js", "dist/bridge/index.js"} <= files, sorted(files)
    assert {"dist/generated/types/index.d.ts", "dist/generated/_generated/spec.js"} <= files, sorted(files)
    manifest = json.loads((package / "package.json").read_text(encoding="utf-8"))
    targets = [manifest["bin"]["harmony-responses"], *manifest["imports"].values()]
    targets += [path for entry in manifest["exports"].values() for path in entry.values()]
    for target in targets:  # every entry point the manifest names is in the tarball
        pattern = target.removeprefix("./")
        assert any(fnmatch.fnmatchcase(f, pattern) for f in files), (target, sorted(files))
    repository_layout = ("dist/runtime/", "dist/generated/typescript/", "build/", "dist/test/")
    outside = [f for f in files if f.startswith(repository_layout)]
    assert not outside, outside  # no repository layout and no compiled tests
    assert not [f for f in files if "/test/" in f or f.startswith(("src/", "node_modules/"))]
    assert "Apache License" in (package / "LICENSE").read_text(encoding="utf-8")
