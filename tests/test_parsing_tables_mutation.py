"""Both stream parsers read the parsing tables: change a row of spec/harmony/parsing.json, and both change.

A copy of the project gets two changed rows: `control_triggers` makes a `<|channel|>` outside a message a stray
control token (`stray_control`) instead of the start of a message whose `<|start|>` was lost (`missing_start`),
and `header_rules` loses its `repeats_role` row, so a repeated role is no longer dropped (`doubled_role`) but set
aside as a word with no place in the header (`stray_header_word`). `harmonygen generate` rebuilds the copy's
generated/ folder; a fresh Python interpreter and a node process (the copy's TypeScript package, compiled) parse
the same completions leniently, and both report the changed repairs, while this repository's runtime, on the
unchanged tables, reports the original ones (in the same shape, in the same test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harmony_responses import HarmonyEncodingName, HarmonyStreamParser, Recovered, load_harmony_encoding

from conftest import ROOT, SHARED

TS_PACKAGE = ROOT / "runtime" / "typescript"
COMPLETIONS = [
    "<|channel|>final<|message|>Hi.<|end|>",  # no <|start|>: read from outside a message
    "<|start|>assistant assistant<|channel|>final<|message|>Hi.<|end|>",
]

SCRIPT = r"""
import json, sys
from harmony_responses import HarmonyEncodingName, HarmonyStreamParser, Recovered, load_harmony_encoding
enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
out = []
for text in json.loads(sys.argv[1]):
    parser = HarmonyStreamParser(enc, None, "lenient")
    events = parser.feed_text(text) + parser.close()
    out.append([e.rule for e in events if isinstance(e, Recovered)])
print(json.dumps(out))
"""

TS_SCRIPT = r"""
const [dist, texts] = process.argv.slice(2);
const H = await import(dist + "/index.js");
const enc = H.loadHarmonyEncoding("HarmonyGptOss");
const out = JSON.parse(texts).map((text) => {
  const parser = new H.HarmonyStreamParser(enc, null, "lenient");
  const events = [...parser.feedText(text), ...parser.close()];
  return events.filter((e) => e instanceof H.Recovered).map((e) => e.rule);
});
console.log(JSON.stringify(out));
"""


def _rules(texts: list[str]) -> list[list[str]]:
    enc = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    out = []
    for text in texts:
        parser = HarmonyStreamParser(enc, None, "lenient")
        events = parser.feed_text(text) + parser.close()
        out.append([e.rule for e in events if isinstance(e, Recovered)])
    return out


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the project with the two rows changed, its generated/ folder rebuilt."""
    project = tmp_path_factory.mktemp("tables") / "project"
    ignore = shutil.ignore_patterns("__pycache__", "node_modules", "generated", "dist", "build")
    for name in ("spec", "grammar", "templates", "runtime"):
        shutil.copytree(ROOT / name, project / name, ignore=ignore)
    for name in ("pyproject.toml", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    path = project / "spec/harmony/parsing.json"
    parsing = json.loads(path.read_text(encoding="utf-8"))
    outside = parsing["control_triggers"]["lenient"]["outside"]
    assert outside["channel"] == "channel_opens_message"
    outside["channel"] = "stray_control"
    rows = parsing["header_rules"]["word"]
    parsing["header_rules"]["word"] = [row for row in rows if row["when"] != ["repeats_role"]]
    assert len(parsing["header_rules"]["word"]) == len(rows) - 1
    path.write_text(json.dumps(parsing, indent=2, ensure_ascii=False), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "harmonygen", "generate", "--root", str(project)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return project


def test_the_unchanged_tables_give_the_original_repairs() -> None:
    first, second = _rules(COMPLETIONS)
    assert first[0] == "missing_start" and "stray_control" not in first
    assert "doubled_role" in second and "stray_header_word" not in second


def test_the_python_parser_follows_the_changed_rows(project: Path) -> None:
    site = project.parent / "site"
    package = site / "harmony_responses"
    shutil.copytree(project / "runtime/python/harmony_responses", package)
    for sub in ("_generated", "types"):
        shutil.copytree(project / "generated/python/harmony_responses" / sub, package / sub)
    env = {**os.environ, "PYTHONPATH": str(site), "TIKTOKEN_ENCODINGS_BASE": str(SHARED / "vocab")}
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(COMPLETIONS)], capture_output=True, text=True, env=env, cwd=site
    )
    assert run.returncode == 0, run.stderr
    first, second = json.loads(run.stdout)
    assert first[0] == "stray_control"  # then `final<|message|>` reads as a header whose start was lost
    assert "stray_header_word" in second and "doubled_role" not in second


def test_the_typescript_parser_follows_the_changed_rows(project: Path) -> None:
    package = project / "runtime" / "typescript"
    modules = TS_PACKAGE / "node_modules"
    if not (modules / ".bin" / "tsc").is_file():
        raise RuntimeError(f"{modules} is not installed: run `make ts-deps` (make test does)")
    (package / "node_modules").symlink_to(modules, target_is_directory=True)
    shutil.copytree(project / "generated" / "typescript" / "src", package / "src" / "generated")  # as make ts-build
    build = subprocess.run([str(modules / ".bin" / "tsc"), "-p", str(package)], capture_output=True, text=True)
    assert build.returncode == 0, build.stdout + build.stderr
    script = project.parent / "tables.mjs"
    script.write_text(TS_SCRIPT, encoding="utf-8")
    env = {**os.environ, "TIKTOKEN_ENCODINGS_BASE": str(SHARED / "vocab")}
    run = subprocess.run(
        ["node", str(script), (package / "dist").as_uri(), json.dumps(COMPLETIONS)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    first, second = json.loads(run.stdout)
    assert first[0] == "stray_control"  # then `final<|message|>` reads as a header whose start was lost
    assert "stray_header_word" in second and "doubled_role" not in second
