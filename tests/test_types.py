"""`harmony_responses.types`: the models generated from spec/responses/ by datamodel-code-generator."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import typing
from typing import Any, get_args, get_origin

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel, TypeAdapter, ValidationError

from harmony_responses import types as T
from harmony_responses.types import _models

from conftest import ROOT, SHARED, require

OPENAPI = SHARED / "openresponses" / "openapi.json"
SCHEMAS = ROOT / "spec" / "responses" / "schemas"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(require(OPENAPI).read_text(encoding="utf-8"))
    return data


def upstream(document: dict[str, Any], name: str) -> Draft202012Validator:
    return Draft202012Validator({**document, "$ref": f"#/components/schemas/{name}"})


def union_members(alias: Any) -> list[type[BaseModel]]:
    """The model classes of a TypeAliasType union, however deeply Annotated."""
    out: list[type[BaseModel]] = []

    def walk(tp: Any) -> None:
        tp = getattr(tp, "__value__", tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            out.append(tp)
        elif get_origin(tp) is typing.Annotated:
            walk(get_args(tp)[0])
        else:
            for arg in get_args(tp):
                walk(arg)

    walk(alias)
    return out


def spec_names() -> set[str]:
    return {p.stem for p in SCHEMAS.glob("*.json")}


def test_class_names_are_the_component_names() -> None:
    names = spec_names()
    exported = set(T.__all__)
    assert names <= exported, sorted(names - exported)
    for name in names:
        assert getattr(T, name) is getattr(_models, name)


TAGGED = [
    "ItemField",
    "ItemParam",
    "MessageContent",
    "ReasoningBodyContent",
    "ReasoningBodySummary",
    "UserMessageItemParamContent",
    "AssistantMessageItemParamContent",
    "FunctionCallOutputOutput",
    "FunctionCallOutputItemParamOutput1",
    "StreamingEvent",
]


# The schemas whose `type` spec/overrides/responses.json makes optional (OpenAI's easy input message): not required,
# so the model's tag may be absent, and it has its default.
_UNTYPED_BY_OVERRIDE = {
    entry["schema"]
    for entry in json.loads((ROOT / "spec" / "overrides" / "responses.json").read_text(encoding="utf-8"))["required"]
    if "type" in entry["synced"] and "type" not in entry["replacement"]
}


_OVERRIDES = json.loads((ROOT / "spec" / "overrides" / "responses.json").read_text(encoding="utf-8"))
# The schemas spec/overrides/responses.json adds (`schemas`), and the union members it adds them as (`members`).
_ADDED = {entry["schema"]: entry["definition"] for entry in _OVERRIDES["schemas"]}
_ADDED_MEMBERS = [entry["schema"] for entry in _OVERRIDES.get("members", [])]


def _schema(name: str) -> dict[str, object]:
    """A synced schema, or one the overrides add."""
    if name in _ADDED:
        return _ADDED[name]  # type: ignore[no-any-return]
    loaded: dict[str, object] = json.loads((SCHEMAS / f"{name}.json").read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize("union", TAGGED)
def test_every_variant_has_a_literal_type_tag_with_its_default(union: str) -> None:
    members = [m for m in union_members(getattr(T, union)) if m is not T.ExtensionItem]
    assert len(members) >= 2
    for model in members:
        schema: Any = _schema(model.__name__)
        prop = schema["properties"]["type"]
        branches = prop.get("anyOf", [prop])
        (value,) = [v for b in branches for v in b.get("enum", [])]
        nullable = any(b.get("type") == "null" for b in branches) or model.__name__ in _UNTYPED_BY_OVERRIDE
        field = model.model_fields["type"]
        expected: object = typing.Literal[value] | None if nullable else typing.Literal[value]  # built at run time
        assert field.annotation == expected, model
        assert field.default == value, model


def test_stream_union_has_the_24_events_and_dispatches_on_type() -> None:
    members = union_members(T.StreamingEvent)
    assert len(members) == 24 + _ADDED_MEMBERS.count("StreamingEvent")  # the synced ones, and OpenAI's the server emits
    event = T.StreamingEventAdapter.validate_python(
        {"type": "response.function_call_arguments.delta", "sequence_number": 7, "item_id": "fc_1",
         "output_index": 2, "delta": '{"a'}
    )  # fmt: skip
    assert isinstance(event, T.ResponseFunctionCallArgumentsDeltaStreamingEvent)
    with pytest.raises(ValidationError, match="union_tag_invalid"):
        T.StreamingEventAdapter.validate_python({"type": "response.nope", "sequence_number": 0})


@pytest.mark.parametrize(
    ("raw", "model"),
    [
        ({"type": "message", "role": "user", "content": "hi"}, "UserMessageItemParam"),
        ({"type": "message", "role": "system", "content": "be terse"}, "SystemMessageItemParam"),
        ({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "x"}]},
         "DeveloperMessageItemParam"),
        ({"type": "message", "role": "assistant", "content": "ok", "phase": "final_answer"},
         "AssistantMessageItemParam"),
        ({"id": "msg_1"}, "ItemReferenceParam"),
        ({"id": "msg_1", "type": None}, "ItemReferenceParam"),
        ({"type": "item_reference", "id": "msg_1"}, "ItemReferenceParam"),
        ({"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}, "FunctionCallItemParam"),
        ({"type": "function_call_output", "call_id": "c1", "output": "42"}, "FunctionCallOutputItemParam"),
        ({"type": "reasoning", "summary": []}, "ReasoningItemParam"),
        ({"type": "acme:web_search_call", "id": "ws_1", "query": "weather"}, "ExtensionItem"),
    ],
)  # fmt: skip
def test_input_items_dispatch_on_type_and_role(raw: dict[str, Any], model: str) -> None:
    item = T.ItemParamAdapter.validate_python(raw)
    assert type(item).__name__ == model
    dumped = T.ItemParamAdapter.dump_python(item, mode="json")
    assert T.ItemParamAdapter.dump_python(T.ItemParamAdapter.validate_python(dumped), mode="json") == dumped


def test_unknown_item_types_and_roles_are_named_in_the_error() -> None:
    with pytest.raises(ValidationError, match="'message' \\(role 'critic'\\)"):
        T.ItemParamAdapter.validate_python({"type": "message", "role": "critic", "content": "x"})
    with pytest.raises(ValidationError, match="'web_search_call'"):
        T.ItemFieldAdapter.validate_python({"type": "web_search_call", "id": "x"})  # not vendor-prefixed
    with pytest.raises(ValidationError, match="string_pattern_mismatch"):
        T.ExtensionItem(type="no_prefix")


def test_output_items_dispatch_on_type_with_an_extension_fallback() -> None:
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
            "arguments": '{"city":"Paris"}', "status": "completed"}  # fmt: skip
    assert isinstance(T.ItemFieldAdapter.validate_python(call), T.FunctionCall)
    vendor = {"type": "openai:browser_call", "id": "bc_1", "action": {"url": "https://example.com"}}
    item = T.ItemFieldAdapter.validate_python(vendor)
    assert isinstance(item, T.ExtensionItem)
    assert T.ItemFieldAdapter.dump_python(item) == vendor
    assert T.is_vendor_type("openai:browser_call") and not T.is_vendor_type("message")


def test_required_nullable_keys_are_written_as_null_and_absent_optionals_left_out(document: dict[str, Any]) -> None:
    tool = T.FunctionTool(name="f", description=None, parameters=None, strict=None)
    assert tool.model_dump() == {"type": "function", "name": "f", "description": None, "parameters": None,
                                 "strict": None}  # fmt: skip
    text = T.OutputTextContent(text="hi", annotations=[])
    assert text.model_dump() == {"type": "output_text", "text": "hi", "annotations": []}  # no logprobs key
    reasoning = T.ReasoningBody(id="rs_1", summary=[])
    assert reasoning.model_dump(mode="json") == {"type": "reasoning", "id": "rs_1", "summary": []}
    for model, dumped in ((T.FunctionTool, tool), (T.OutputTextContent, text), (T.ReasoningBody, reasoning)):
        assert not list(upstream(document, model.__name__).iter_errors(dumped.model_dump(mode="json")))
    with pytest.raises(ValidationError, match="description"):
        T.FunctionTool.model_validate({"type": "function", "name": "f", "parameters": None, "strict": None})


def test_aliased_field_names_load_and_dump_by_their_wire_name() -> None:
    fmt = T.JsonSchemaResponseFormatParam.model_validate({"type": "json_schema", "name": "x", "schema": {"a": 1}})
    assert fmt.schema_ == {"a": 1}
    assert fmt.model_dump() == {"type": "json_schema", "name": "x", "schema": {"a": 1}}


def _examples(node: Any, where: str) -> list[tuple[str, Any]]:
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "examples":
                found += [(where, ex) for ex in value]
            elif key not in ("enum", "default"):
                found += _examples(value, f"{where}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _examples(value, f"{where}/{i}")
    return found


def test_every_example_in_the_spec_loads_and_dumps_without_loss(document: dict[str, Any]) -> None:
    seen = 0
    for path in sorted(SCHEMAS.glob("*.json")):
        for where, example in _examples(json.loads(path.read_text(encoding="utf-8")), path.stem):
            seen += 1
            model = getattr(T, path.stem)
            parts = where.split("/")
            if len(parts) == 1:  # an example of the whole component
                errors = sorted(e.message for e in upstream(document, path.stem).iter_errors(example))
                if errors:  # upstream examples may break their own schema: the models must agree
                    with pytest.raises(ValidationError):
                        model.model_validate(example)
                    continue
                assert model.model_validate(example).model_dump(mode="json") == example, where
            else:  # an example of one property: `<Model>/properties/<name>`
                assert parts[1] == "properties" and len(parts) == 3, where
                field = model.model_fields[parts[2]]
                adapter: TypeAdapter[Any] = TypeAdapter(field.annotation)
                assert adapter.dump_python(adapter.validate_python(example), mode="json") == example, where
    assert seen >= 12


def test_the_upstream_response_example_round_trips_once_made_valid(document: dict[str, Any]) -> None:
    example = json.loads((SCHEMAS / "ResponseResource.json").read_text(encoding="utf-8"))["examples"][0]
    missing = [e.message for e in upstream(document, "ResponseResource").iter_errors(example)]
    assert "'prompt_cache_key' is a required property" in missing
    fixed = {**example, "reasoning": {"effort": None, "summary": None}}
    for name, info in T.ResponseResource.model_fields.items():
        fixed.setdefault(info.alias or name, None)  # vendor fields by their wire names (`harmony:labels`)
    assert not list(upstream(document, "ResponseResource").iter_errors(fixed))
    assert T.ResponseResource.model_validate(fixed).model_dump(mode="json") == fixed


def _types_digest(seed: str) -> str:
    code = (
        "import hashlib, sys\n"
        "from pathlib import Path\n"
        "from harmonygen.config import load_config\n"
        "from harmonygen.engine import generate\n"
        f"files = generate(load_config(Path({str(ROOT)!r}))).files\n"
        "h = hashlib.sha256()\n"
        "for path in sorted(files):\n"
        "    if path.startswith('python/') and '/types/' in path:\n"
        "        h.update(path.encode() + b'\\0' + files[path].encode())\n"
        "print(h.hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    return done.stdout.strip()


def test_generation_is_byte_identical_across_hash_seeds() -> None:
    digests = {_types_digest(seed) for seed in ("0", "1", "12345")}
    assert len(digests) == 1
    on_disk = hashlib.sha256()
    out = ROOT / "generated" / "python" / "harmony_responses" / "types"
    for path in sorted(out.glob("*.py")):
        rel = f"python/harmony_responses/types/{path.name}"
        on_disk.update(rel.encode() + b"\0" + path.read_bytes())
    assert digests == {on_disk.hexdigest()}
