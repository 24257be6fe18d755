"""spec/overrides/responses.json: departures from the synced Open Responses schemas, applied when the IR is built.

The synced copy in spec/responses/ stays as `harmonygen sync-openapi` wrote it; the IR (and so every target's
models and the docs) carries the overrides, each with its reason; an override written against upstream text that
a re-sync changed fails generation instead of silently replacing the new text.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harmony_responses import types
from harmonygen.config import load_config
from harmonygen.loader import SpecError, load_project

from conftest import ROOT

OVERRIDES = "spec/overrides/responses.json"
MAPPING = "spec/mapping/harmony_responses.json"


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    """A copy of what the IR is read from."""
    for name in ("spec", "grammar"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(ROOT / "LICENSE", tmp_path / "LICENSE")  # the npm package ships it
    return tmp_path


def _edit(project: Path, rel: str, change: Callable[[Any], None]) -> None:
    path = project / rel
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_the_ir_carries_the_overrides_and_the_synced_copy_is_untouched() -> None:
    ir = load_project(load_config(ROOT))
    synced = json.loads((ROOT / "spec/responses/schemas/ReasoningItemParam.json").read_text(encoding="utf-8"))
    assert synced["properties"]["content"] == {"type": "null"}  # as the sync wrote it
    content = ir.responses.schemas["ReasoningItemParam"]["properties"]["content"]
    assert content["anyOf"][0] == {"type": "array", "items": {"$ref": "ReasoningTextContent.json"}}
    assert {o.schema for o in ir.responses.overrides} >= {"ReasoningItemParam", "FunctionCallItemParam"}
    assert all(o.reason for o in ir.responses.overrides)
    assert "spec/overrides/responses.json" in ir.sources["responses"]
    # the generated models hold them
    assert types.ReasoningItemParam.model_validate(
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "x"}]}
    ).content
    assert "harmony:channel" in {f.alias for f in types.FunctionCallItemParam.model_fields.values()}


def test_an_override_of_changed_upstream_text_fails(project: Path) -> None:
    _edit(project, OVERRIDES, lambda d: d["properties"][0].update(synced={"type": "string"}))
    with pytest.raises(SpecError, match=r"overrides ReasoningItemParam.content as synced .*re-read the upstream"):
        load_project(load_config(project))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["properties"][0].update(schema="Nope"), "no schema 'Nope'"),
        (lambda d: d["properties"][0].pop("reason"), "exactly the keys"),
        (lambda d: d["properties"][0].update(reason=""), "non-empty string"),
        (lambda d: d["properties"][0].update(replacement=[]), "should be an object"),
        (lambda d: d["schemas"][0].update(schema="Message"), "adds the schema 'Message', which spec/responses"),
        (lambda d: d["schemas"][0]["definition"]["properties"].update(x={"$ref": "Gone.json"}), "refers to Gone.json"),
    ],
)
def test_bad_overrides_name_what_is_wrong(project: Path, change: Callable[[Any], None], words: str) -> None:
    _edit(project, OVERRIDES, change)
    with pytest.raises(SpecError, match=words):
        load_project(load_config(project))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["input"].update(call_schema="Nope"), r"\['input'\]\['call_schema'\] names 'Nope'"),
        (lambda d: d["input"].update(tool_output_type="tool_output"), "should be vendor-prefixed"),
        (lambda d: d["input"].update(tool_output_type="harmony:browser_call"), "no output item's type"),
        (lambda d: d["response"].update(channel_field="harmony:chan"), "FunctionCallItemParam lacks"),
    ],
)
def test_the_mapping_s_input_table_is_checked(project: Path, change: Callable[[Any], None], words: str) -> None:
    _edit(project, MAPPING, change)
    with pytest.raises(SpecError, match=words):
        load_project(load_config(project))


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        ("AssistantMessageItemParam", "harmony:channel"),
        ("AssistantMessageItemParam", "harmony:content_type"),
        ("ReasoningItemParam", "harmony:content_type"),
    ],
)
def test_an_item_that_reads_a_header_field_back_must_declare_it(project: Path, schema: str, field: str) -> None:
    """A message or reasoning item keeps the header the model wrote in the same vendor fields as a function call;
    the input item that reads it back without declaring the field would refuse the bridge's own output."""

    def drop(data: Any) -> None:
        data["properties"] = [o for o in data["properties"] if (o["schema"], o["property"]) != (schema, field)]

    _edit(project, OVERRIDES, drop)
    with pytest.raises(SpecError, match=f"names '{field}', which {schema} lacks"):
        load_project(load_config(project))
