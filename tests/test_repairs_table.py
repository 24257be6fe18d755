"""The repairs as data (issue 19, item 3): spec/harmony/parsing.json's `repairs` table gives each rule its detail
text and what it sets aside, both parsers read it, and its texts are filled by the neutral placeholder rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harmony_responses import Role, load_harmony_encoding
from harmony_responses._tables import spec
from harmony_responses.stream import HarmonyStreamParser, Recovered
from harmony_responses.stream.events import described
from harmony_responses.texts import fill
from harmonygen.config import load_config
from harmonygen.loader import SpecError, load_project

ROOT = Path(__file__).resolve().parent.parent
ENC = load_harmony_encoding("HarmonyGptOss")


def test_fill_follows_the_neutral_rule() -> None:
    assert fill("{a} {a:json} {{}} {n}", {"a": 'say "hi"', "n": 3}) == 'say "hi" "say \\"hi\\"" {} 3'
    assert fill("{v:json} {v}", {"v": None}) == "null null"
    assert fill("{w:json}", {"w": "é\n"}) == '"é\\n"'  # not ASCII-escaped: JSON.stringify writes the same
    with pytest.raises(KeyError):
        fill("{missing}", {})


def test_no_spec_text_of_the_parser_uses_python_format_syntax() -> None:
    texts = [*spec.REPAIRS.values()]
    raw = json.loads((ROOT / "spec/harmony/parsing.json").read_text())
    for section in ("details", "errors"):
        for text in raw[section].values():
            assert "!r" not in text and "!s" not in text, text
    assert all("!r" not in row["detail"] for row in texts)


def test_the_table_says_what_a_repair_sets_aside() -> None:
    """`doubled_role` sets its word aside by the table alone; the detail is the table's text, filled."""
    parser = HarmonyStreamParser(ENC, Role.ASSISTANT, "lenient")
    events = parser.feed_text("assistant<|channel|>final<|message|>Hi<|return|>") + parser.close()
    (repair,) = [e for e in events if isinstance(e, Recovered)]
    assert (repair.rule, repair.text) == (spec.RECOVERY_DOUBLED_ROLE, "assistant")
    assert repair.detail == fill(spec.REPAIRS[spec.RECOVERY_DOUBLED_ROLE]["detail"], {"word": "assistant"})
    assert described(spec.RECOVERY_EXTRA_STOP, {"token": "<|end|>"}) == ("<|end|> outside a message", "")
    assert described(spec.RECOVERY_STRAY_HEADER_WORD, {"word": "x"}, "given") == (
        '"x" has no place in the header',
        "given",
    )


@pytest.fixture()
def spec_copy(tmp_path: Path) -> Path:
    for name in ("spec", "grammar"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _with_repair(root: Path, rule: str, row: dict[str, Any]) -> None:
    path = root / "spec/harmony/parsing.json"
    data = json.loads(path.read_text())
    data["repairs"][rule] = row
    path.write_text(json.dumps(data))


@pytest.mark.parametrize(
    ("rule", "row", "message"),
    [
        ("no_such_rule", {}, r"\['repairs'\]\['no_such_rule'\] is not a rule of recovery_rules"),
        ("extra_stop", {"detail": "no_such_detail"}, r"names 'no_such_detail', which is not a key of details"),
        ("doubled_role", {"sets_aside": "channel"}, r"names 'channel', which is no placeholder of its detail"),
    ],
)
def test_the_generator_refuses_a_table_row_that_names_nothing(
    spec_copy: Path, rule: str, row: dict[str, Any], message: str
) -> None:
    load_project(load_config(spec_copy))  # the copy loads as it is
    _with_repair(spec_copy, rule, row)
    with pytest.raises(SpecError, match=message):
        load_project(load_config(spec_copy))


def test_near_miss_spellings_are_the_generators(spec_copy: Path) -> None:
    """The spelling map both parsers read is generated from the spec's `near_miss_spellings` rule."""
    from harmony_responses._tables import grammar

    assert grammar.NEAR_MISS_SPELLINGS["<message|>"] == grammar.NEAR_MISS_SPELLINGS["<message>"]
    assert len(grammar.NEAR_MISS_SPELLINGS) == 3 * len(grammar.CONTROL_TERMINALS)
    path = spec_copy / "spec/harmony/parsing.json"
    data = json.loads(path.read_text())
    data["near_miss_spellings"]["bars_left_out"] = ["open", "open"]
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match=r"\['bars_left_out'\]\[1\] should be one of"):
        load_project(load_config(spec_copy))
