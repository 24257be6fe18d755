"""Every code block in README.md, docs/*.md and the npm package's README runs, so no snippet can rot.

The convention (CONTRIBUTING.md, "Code blocks in the docs"), by the block's info string:

- `python`: run, in order, in one fresh interpreter per file (a later block may use an earlier one's names);
- `sh`: run by bash (`-e -o pipefail`) with `.venv/bin` first on PATH, in a scratch folder that links the
  repository's top-level folders (so `.venv/bin/...` and `examples/...` work); `sh serve`: each line starts a
  server, which must print its address (`listening on`) and is then stopped;
- `ts`: run by node as an ES module inside the compiled package (`make ts-build`), importing it by its name;
- `json`: parsed; `json request`: also a valid Open Responses request for the bridge;
- `toml`: parsed; `text`: output or a diagram, shown, not run;
- `... no-run` (any language): not run; for the very few that cannot run here (`make test` itself).

A block without an info string fails the test. `http://127.0.0.1:8000` (and `ws://`) in a block is rewritten to
a demo-engine server this test starts, so the docs can show the default address.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "server"))
from serverkit import Proc, Server  # noqa: E402

DEFAULT_URL = "http://127.0.0.1:8000"
RUN = {"python", "sh", "ts", "json", "toml", "text"}
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>[^`\n]*)$")


@dataclass(frozen=True)
class Block:
    file: Path
    line: int
    language: str
    tags: tuple[str, ...]
    code: str

    @property
    def where(self) -> str:
        return f"{self.file.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "runtime" / "typescript" / "README.md"]


def blocks_of(path: Path) -> list[Block]:
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence, info = len(m.group("indent")), m.group("fence"), m.group("info").strip()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != fence:
            body.append(lines[i][indent:] if lines[i].startswith(" " * indent) else lines[i])
            i += 1
        words = info.split()
        out.append(Block(path, start + 1, words[0] if words else "", tuple(words[1:]), "\n".join(body) + "\n"))
        i += 1
    return out


ALL = [b for f in doc_files() if f.exists() for b in blocks_of(f)]


def test_every_block_says_what_it_is() -> None:
    unknown = [f"{b.where}: ```{b.language}" for b in ALL if b.language not in RUN and "no-run" not in b.tags]
    assert not unknown, "blocks without a known info string (see CONTRIBUTING.md):\n" + "\n".join(unknown)
    skipped = [b for b in ALL if "no-run" in b.tags]
    assert len(skipped) <= 3, [b.where for b in skipped]  # rare, by rule


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 250


def test_links_between_the_docs_resolve() -> None:
    missing = []
    for f in doc_files():
        if not f.exists():
            continue
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", f.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            # Pages other engineers are writing now (the lead merges them): linked before they land.
            if (f.parent / target).resolve() in PENDING:
                continue
            if not (f.parent / target).exists():
                missing.append(f"{f.relative_to(ROOT)} -> {target}")
    assert not missing, missing


PENDING = {
    (ROOT / "docs" / name).resolve()
    for name in (
        "operations.md",
        "clients.md",
        "background-and-encryption.md",
        "structured-outputs.md",
        "performance.md",
    )
}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server("--engine", "demo", "--store", "memory")
    try:
        yield s
    finally:
        s.stop()


def _rewrite(code: str, url: str) -> str:
    return code.replace(DEFAULT_URL, url).replace(DEFAULT_URL.replace("http", "ws"), url.replace("http", "ws"))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARMONY_RESPONSES_")}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def _scratch(tmp_path: Path) -> Path:
    for entry in ROOT.iterdir():
        if entry.name not in (".git",):
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


_PYTHON_RUNNER = textwrap.dedent(
    """
    import json, sys, traceback
    blocks = json.load(sys.stdin)
    namespace = {"__name__": "__main__"}
    for where, code in blocks:
        try:
            exec(compile(code, where, "exec"), namespace)
        except BaseException:
            print(f"--- the block at {where} failed:", file=sys.stderr)
            traceback.print_exc()
            sys.exit(1)
    """
)

FILES_WITH = {kind: sorted({b.file for b in ALL if b.language == kind and "no-run" not in b.tags}) for kind in RUN}


def _ids(files: list[Path]) -> list[str]:
    return [str(f.relative_to(ROOT)) for f in files]


@pytest.mark.parametrize("doc", FILES_WITH["python"], ids=_ids(FILES_WITH["python"]))
def test_python_blocks_run(doc: Path, server: Server, tmp_path: Path) -> None:
    mine = [b for b in ALL if b.file == doc and b.language == "python" and "no-run" not in b.tags]
    blocks = [[b.where, _rewrite(b.code, server.url)] for b in mine]
    run = subprocess.run(
        [sys.executable, "-c", _PYTHON_RUNNER],
        input=json.dumps(blocks),
        capture_output=True,
        text=True,
        cwd=_scratch(tmp_path),
        env=_env(),
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]


@pytest.mark.parametrize("doc", FILES_WITH["sh"], ids=_ids(FILES_WITH["sh"]))
def test_sh_blocks_run(doc: Path, server: Server, tmp_path: Path) -> None:
    cwd = _scratch(tmp_path)
    for b in (b for b in ALL if b.file == doc and b.language == "sh" and "no-run" not in b.tags):
        code = _rewrite(b.code, server.url)
        if "serve" in b.tags:
            for line in (line.split("#", 1)[0].strip() for line in code.splitlines()):
                if line:
                    _starts(line, cwd, b)
            continue
        run = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", code],
            capture_output=True,
            text=True,
            cwd=cwd,
            env=_env(),
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert run.returncode == 0, f"{b.where}:\n{code}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"


def _starts(line: str, cwd: Path, b: Block) -> None:
    env = {**_env(), "HARMONY_RESPONSES_PORT": "0", "HARMONY_RESPONSES_STORE": "memory"}
    cwd_before = os.getcwd()
    os.chdir(cwd)
    try:
        proc = Proc(["bash", "-c", f"exec {line}"], r"listening on (http://\S+)", env=env, timeout=120)
    finally:
        os.chdir(cwd_before)
    proc.stop()
    assert proc.match is not None, f"{b.where}: {line!r} did not start a server"


@pytest.mark.parametrize("doc", FILES_WITH["ts"], ids=_ids(FILES_WITH["ts"]))
def test_ts_blocks_run(doc: Path, tmp_path: Path) -> None:
    package = ROOT / "runtime" / "typescript"
    built = package / "dist" / "index.js"
    assert built.exists(), "the TypeScript package is not built: make ts-build (make test does)"
    for b in (b for b in ALL if b.file == doc and b.language == "ts" and "no-run" not in b.tags):
        script = package / f".docs-block-{os.getpid()}-{b.line}.mjs"
        script.write_text(b.code, encoding="utf-8")
        try:
            run = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=120, env=_env())
        finally:
            script.unlink()
        assert run.returncode == 0, f"{b.where}:\n{run.stderr[-3000:]}"


def test_data_blocks_parse() -> None:
    from harmony_responses.bridge import parse_request
    from harmony_responses.prompt import PROMPT_CAPABILITIES

    for b in ALL:
        if "no-run" in b.tags:
            continue
        if b.language == "json":
            value = json.loads(b.code)
            if "request" in b.tags:
                parse_request(value, PROMPT_CAPABILITIES)
        elif b.language == "toml":
            tomllib.loads(b.code)
