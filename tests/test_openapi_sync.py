"""`harmonygen sync-openapi`: spec/responses/ is a faithful, prose-free, stable copy of the OpenAPI document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from harmonygen.openapi_sync import PROSE_KEYS, SyncError, sync, write_sync

from conftest import ROOT, SHARED, require

OPENAPI = SHARED / "openresponses" / "openapi.json"
SPEC = ROOT / "spec" / "responses"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(require(OPENAPI).read_text(encoding="utf-8"))
    return data


def test_committed_spec_is_the_sync_of_the_shared_document(document: dict[str, Any]) -> None:
    result = sync(document, "openresponses/openapi.json")
    on_disk = {p.relative_to(SPEC).as_posix(): p.read_text(encoding="utf-8") for p in SPEC.rglob("*.json")}
    assert sorted(on_disk) == sorted(result.files)
    stale = [rel for rel, text in result.files.items() if on_disk[rel] != text]
    assert stale == [], "spec/responses/ is stale: run `harmonygen sync-openapi ../shared/openresponses/openapi.json`"


def test_rerunning_changes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "responses"
    first = write_sync(require(OPENAPI), out, source="openresponses/openapi.json")
    assert "wrote index.json" in first
    (out / "schemas" / "Obsolete.json").write_text("{}\n", encoding="utf-8")
    assert write_sync(OPENAPI, out, source="openresponses/openapi.json") == ["removed schemas/Obsolete.json"]
    assert write_sync(OPENAPI, out, source="openresponses/openapi.json") == []


def _walk(node: Any, in_properties: bool = False) -> list[str]:
    keys: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if not in_properties:
                keys.append(key)
            if key not in ("enum", "default", "examples", "const"):
                keys += _walk(value, in_properties=key == "properties")
    elif isinstance(node, list):
        for value in node:
            keys += _walk(value)
    return keys


def test_every_component_and_the_stream_union_are_there_without_prose(document: dict[str, Any]) -> None:
    files = sync(document, "x").files
    names = {rel.removeprefix("schemas/").removesuffix(".json") for rel in files if rel.startswith("schemas/")}
    assert names == set(document["components"]["schemas"]) | {"StreamingEvent"}
    for rel, text in files.items():
        if rel.startswith("schemas/"):
            assert not set(_walk(json.loads(text))) & PROSE_KEYS, rel
    tool = json.loads(files["schemas/FunctionTool.json"])
    assert "description" in tool["properties"] and "description" in tool["required"]  # a field, not prose
    union = json.loads(files["schemas/StreamingEvent.json"])
    assert len(union["oneOf"]) == 24 and union["discriminator"] == {"propertyName": "type"}
    assert union["oneOf"][0] == {"$ref": "ResponseCreatedStreamingEvent.json"}
    index = json.loads(files["index.json"])
    assert index["version"] == "2026-04-24"
    assert index["operations"]["createResponse"]["stream"] == {"200": "StreamingEvent"}


def _validator(files: dict[str, str], name: str) -> Draft202012Validator:
    resources = [
        (rel.removeprefix("schemas/"), Resource.from_contents(json.loads(text)))
        for rel, text in files.items()
        if rel.startswith("schemas/")
    ]
    registry: Registry = Registry().with_resources(resources)
    return Draft202012Validator({"$ref": f"{name}.json"}, registry=registry)


def _upstream(document: dict[str, Any], name: str) -> Draft202012Validator:
    root = {**document, "$ref": f"#/components/schemas/{name}"}
    return Draft202012Validator(root)


CASES = [
    ("Message", {"type": "message", "id": "m", "status": "completed", "role": "assistant", "content": []}),
    ("Message", {"type": "message", "id": "m", "status": "done", "role": "assistant", "content": []}),
    ("OutputTextContent", {"type": "output_text", "text": "hi"}),  # annotations are required
    ("FunctionTool", {"type": "function", "name": "f", "parameters": None, "strict": None}),
    ("FunctionTool", {"type": "function", "name": "f", "description": None, "parameters": None, "strict": None}),
    ("ItemReferenceParam", {"id": "msg_1", "type": None}),
    ("ErrorStreamingEvent", {"type": "error", "sequence_number": 0, "error": {"type": "x", "code": None}}),
    ("StreamingEvent", {"type": "response.output_text.delta", "sequence_number": 3, "item_id": "msg_1"}),
]


@pytest.mark.parametrize(("name", "instance"), CASES)
def test_synced_schemas_judge_like_the_document(document: dict[str, Any], name: str, instance: Any) -> None:
    files = sync(document, "x").files
    if name == "StreamingEvent":
        stream = document["paths"]["/responses"]["post"]["responses"]["200"]["content"]["text/event-stream"]
        upstream = Draft202012Validator({**document, **stream["schema"]})
    else:
        upstream = _upstream(document, name)
    mine = sorted(e.message for e in _validator(files, name).iter_errors(instance))
    theirs = sorted(e.message for e in upstream.iter_errors(instance))
    assert mine == theirs


def test_examples_are_kept_and_judged_alike(document: dict[str, Any]) -> None:
    files = sync(document, "x").files
    for name in ("ResponseResource", "CompactResource"):
        schema = json.loads(files[f"schemas/{name}.json"])
        (example,) = schema["examples"]
        assert example == document["components"]["schemas"][name]["example"]
        mine = sorted(e.message for e in _validator(files, name).iter_errors(example))
        assert mine == sorted(e.message for e in _upstream(document, name).iter_errors(example))


def test_a_ref_outside_the_components_is_an_error_naming_where() -> None:
    doc: dict[str, Any] = {
        "info": {"version": "1"},
        "paths": {},
        "components": {"schemas": {"A": {"properties": {"b": {"$ref": "#/definitions/B"}}}}},
    }
    with pytest.raises(SyncError, match=r"#/components/schemas/A/properties/b: \$ref '#/definitions/B'"):
        sync(doc, "x")
    doc["components"]["schemas"]["A"]["properties"]["b"]["$ref"] = "#/components/schemas/B"
    with pytest.raises(SyncError, match="unknown component 'B'"):
        sync(doc, "x")
