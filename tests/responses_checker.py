"""Test helpers: schema validation against the upstream OpenAPI document, and an event-order checker.

The ordering rules are those of ../shared/docs/open-responses-notes.md ("Streaming"). `check_stream`
takes events as JSON dicts (what a client sees) and raises `AssertionError` naming the first broken rule.

Core items (the OpenAPI document's `message`, `function_call`, `reasoning`, ...) are validated against the
document. Its item unions are closed, but the specification's text lets an implementation add item types
prefixed with its slug (`slug:type`): such extension items are validated by that extension rule instead
(`assert_valid_extension_item`: a vendor-prefixed `type`, a string `id`, a known `status`, and here, for the
items this project makes, the fields its spec/mapping names: `recipient`, `arguments`, `channel`,
`content_type`), and everything around them (the event, the response) against the document.

Requests (`request_errors`, `assert_valid_request`) are validated against the document with the departures
spec/overrides/responses.json states applied to it (each a documented override: the items the bridge emits must
come back as input, and the document forbids some of them). Vendor-prefixed input items are validated by the
extension rule and by the schema spec/mapping/harmony_responses.json names for their type (`input`): the call
items by `call_schema`, the tool output item by `tool_output_schema`; any other vendor type is no input here.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator

from conftest import ROOT, SHARED, require

OPENAPI = SHARED / "openresponses" / "openapi.json"
TERMINAL = {"response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed"}
LISTING_ITEMS = ("mcp_list_tools",)  # items a hosted session starts a response with, each with its own events
TEXT_KINDS = {
    "message": ("output_text", "output_text"),
    "reasoning": ("reasoning_text", "reasoning"),
}  # item type → (content part type, event kind in response.<kind>.delta)


@cache
def document() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(require(OPENAPI).read_text(encoding="utf-8"))
    return data


@cache
def component_validator(name: str) -> Draft202012Validator:
    return Draft202012Validator({**document(), "$ref": f"#/components/schemas/{name}"})


@cache
def stream_validator() -> Draft202012Validator:
    post = document()["paths"]["/responses"]["post"]
    return Draft202012Validator({**document(), **post["responses"]["200"]["content"]["text/event-stream"]["schema"]})


VENDOR_TYPE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*:[A-Za-z0-9_.:-]+$")  # `slug:type`
STATUSES = ("in_progress", "completed", "incomplete")
EXTENSION_FIELDS: dict[str, type | tuple[type, ...]] = {
    "recipient": str,
    "arguments": str,
    "channel": (str, type(None)),
    "content_type": (str, type(None)),
}


def is_extension(item: Any) -> bool:
    return isinstance(item, dict) and ":" in str(item.get("type", ""))


def assert_valid_extension_item(item: dict[str, Any]) -> None:
    """The spec's extension rule for an item type outside the document's unions, and this project's fields."""
    assert VENDOR_TYPE.match(item["type"]), f"extension item type {item['type']!r} is not vendor-prefixed"
    assert isinstance(item.get("id"), str) and item["id"], f"extension item without an id: {item}"
    assert item.get("status") in STATUSES, f"extension item status {item.get('status')!r}"
    for key, kind in EXTENSION_FIELDS.items():
        assert key in item and isinstance(item[key], kind), f"extension item field {key!r}: {item.get(key)!r}"


def _outside(item: Any) -> bool:
    """An item outside the document's unions: vendor-prefixed (checked by the extension rule), or one of OpenAI's
    that spec/overrides/responses.json adds to `ItemField` (checked by its schema there); either is checked here."""
    if is_extension(item):
        assert_valid_extension_item(item)
        return True
    if isinstance(item, dict) and item.get("type") in added_members("ItemField"):
        assert_valid_added(added_members("ItemField")[item["type"]], item)
        return True
    return False


def _strip_extensions(data: dict[str, Any]) -> dict[str, Any]:
    """Vendor-prefixed items, and OpenAI's items the overrides add, are outside the spec's closed unions: check them
    by the extension rule or their override schema, and validate everything around them against the document."""
    out = dict(data)
    if "response" in out:
        response = dict(out["response"])
        response["output"] = [i for i in response["output"] if not _outside(i)]
        out["response"] = response
    if "output" in out:
        out["output"] = [i for i in out["output"] if not _outside(i)]
    return out


OVERRIDES = ROOT / "spec" / "overrides" / "responses.json"
MAPPING = ROOT / "spec" / "mapping" / "harmony_responses.json"


def _component_refs(node: Any) -> Any:
    """An override's schema with its `X.json` references pointed at the document's components."""
    if isinstance(node, list):
        return [_component_refs(v) for v in node]
    if not isinstance(node, dict):
        return node
    return {
        k: "#/components/schemas/" + v.removesuffix(".json") if k == "$ref" else _component_refs(v)
        for k, v in node.items()
    }


@cache
def request_document() -> dict[str, Any]:
    """The document with the spec's overrides applied: a property replaced or added, a `required` list replaced, a
    schema added."""
    data: dict[str, Any] = json.loads(json.dumps(document()))
    schemas = data["components"]["schemas"]
    overrides = json.loads(OVERRIDES.read_text(encoding="utf-8"))
    for entry in overrides["properties"]:
        schemas[entry["schema"]].setdefault("properties", {})[entry["property"]] = _component_refs(entry["replacement"])
    for entry in overrides.get("required", []):
        assert schemas[entry["schema"]].get("required", []) == entry["synced"], f"{entry['schema']}.required changed"
        schemas[entry["schema"]]["required"] = entry["replacement"]
    for entry in overrides["schemas"]:
        assert entry["schema"] not in schemas, f"the override adds {entry['schema']}, which the document has"
        schemas[entry["schema"]] = _component_refs(entry["definition"])
    for entry in overrides.get("members", []):  # StreamingEvent is no component: its events are checked by name
        if entry["schema"] not in schemas:
            continue
        union = schemas[entry["schema"]]
        union["oneOf"] = [*union["oneOf"], {"$ref": "#/components/schemas/" + entry["member"]}]
    return data


@cache
def added_members(union: str) -> dict[str, str]:
    """The members spec/overrides/responses.json adds to `union` (`members`), by the `type` they carry."""
    overrides = json.loads(OVERRIDES.read_text(encoding="utf-8"))
    added = {entry["schema"]: entry["definition"] for entry in overrides["schemas"]}
    out = {}
    for entry in overrides.get("members", []):
        if entry["schema"] == union:
            (kind,) = added[entry["member"]]["properties"]["type"]["enum"]
            out[kind] = entry["member"]
    return out


def assert_valid_added(name: str, value: Any) -> None:
    """An item or event the overrides add, against its schema there (the document's, overrides applied)."""
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in request_validator(name).iter_errors(value)]
    assert not errors, f"{name}: {errors[:3]}"


@cache
def request_validator(name: str = "CreateResponseBody") -> Draft202012Validator:
    return Draft202012Validator({**request_document(), "$ref": f"#/components/schemas/{name}"})


@cache
def input_extension_schemas() -> dict[str, str]:
    """Vendor-prefixed input item type → the schema that reads it (from spec/mapping)."""
    mapping = json.loads(MAPPING.read_text(encoding="utf-8"))
    inputs = mapping["input"]
    out = {item["type"]: inputs["call_schema"] for item in mapping["items"].values() if ":" in item["type"]}
    out[inputs["tool_output_type"]] = inputs["tool_output_schema"]
    return out


def request_errors(body: Any) -> list[str]:
    """What is wrong with a request body: the document's complaints (overrides applied), extension items checked
    by the extension rule and their schema."""
    if not isinstance(body, dict):
        return ["$: not an object"]
    errors: list[str] = []
    rest = dict(body)
    items = body.get("input")
    if isinstance(items, list):
        rest["input"] = [item for item in items if not is_extension(item)]
        for i, item in enumerate(items):
            if not is_extension(item):
                continue
            kind = item["type"]
            if not VENDOR_TYPE.match(kind):
                errors.append(f"input[{i}].type: {kind!r} is not vendor-prefixed")
                continue
            name = input_extension_schemas().get(kind)
            if name is None:
                errors.append(f"input[{i}].type: {kind!r} is no input item this project reads")
                continue
            errors += [
                f"input[{i}]{list(e.absolute_path)}: {e.message}" for e in request_validator(name).iter_errors(item)
            ]
    errors += [f"{list(e.absolute_path)}: {e.message}" for e in request_validator().iter_errors(rest)]
    return errors


def assert_valid_request(body: Any) -> None:
    errors = request_errors(body)
    assert not errors, errors[:3]


def assert_valid_event(event: dict[str, Any]) -> None:
    added = added_members("StreamingEvent").get(event.get("type", ""))
    if added is not None:
        assert_valid_added(added, event)
        return
    if is_extension(event.get("item")) or (
        isinstance(event.get("item"), dict) and event["item"].get("type") in added_members("ItemField")
    ):
        _outside(event["item"])
        rest = {k: v for k, v in event.items() if k != "item"}
        item_schema_free = {**rest, "item": {"type": "message", "id": "x", "status": "completed", "role": "assistant",
                                             "content": []}}  # fmt: skip
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in stream_validator().iter_errors(item_schema_free)]
        assert not errors, f"{event['type']} #{event.get('sequence_number')}: {errors[:3]}"
        return
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in stream_validator().iter_errors(_strip_extensions(event))]
    assert not errors, f"{event['type']} #{event.get('sequence_number')}: {errors[:3]}"


def assert_valid_response(response: dict[str, Any]) -> None:
    errors = [
        f"{list(e.absolute_path)}: {e.message}"
        for e in component_validator("ResponseResource").iter_errors(_strip_extensions(response))
    ]
    assert not errors, errors[:3]


@cache
def hosted_items() -> dict[str, dict[str, Any]]:
    """The output item type of each kind of hosted tool (spec/mapping `hosted`) → its row (events in order)."""
    mapping = json.loads(MAPPING.read_text(encoding="utf-8"))
    return {row["item"]: row for row in mapping.get("hosted", {}).values()}


def check_stream(events: list[dict[str, Any]]) -> None:
    """Assert the ordering rules; every event is also validated against the spec."""
    assert events, "empty stream"
    for n, event in enumerate(events):
        assert event.get("sequence_number") == n, f"event {n} has sequence_number {event.get('sequence_number')}"
        assert_valid_event(event)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "response.created", kinds[0]
    assert events[0]["response"]["status"] in ("in_progress", "queued")
    assert kinds[1] == "response.in_progress", kinds[1]
    terminal_at = [i for i, k in enumerate(kinds) if k in TERMINAL]
    assert terminal_at == [len(events) - 1], f"exactly one terminal event, last: {terminal_at}"
    final = events[-1]
    assert final["response"]["status"] == TERMINAL[final["type"]]
    if "error" in kinds:
        at = kinds.index("error")
        assert kinds[at + 1 :] == ["response.failed"], "an error event is followed by response.failed only"
    body = events[2:-1]
    if body and body[-1]["type"] == "error":
        body = body[:-1]
    items: list[dict[str, Any]] = []
    i = 0
    while i < len(body):
        added = body[i]
        assert added["type"] == "response.output_item.added", f"#{added['sequence_number']}: {added['type']}"
        index = added["output_index"]
        assert index == len(items), f"output_index {index}, expected {len(items)}"
        item = added["item"]
        item_id = item["id"]
        assert item.get("status", "in_progress") == "in_progress"
        kind = item["type"]
        i += 1
        if kind in TEXT_KINDS:
            assert item.get("content") in ([], None), "added items have no content yet"
            part_type, event_kind = TEXT_KINDS[kind]
            if i < len(body) and body[i]["type"] == "response.content_part.added":
                part = body[i]
                assert (part["item_id"], part["output_index"], part["content_index"]) == (item_id, index, 0)
                assert part["part"]["type"] == part_type and part["part"]["text"] == ""
                i += 1
                text = ""
                while i < len(body) and body[i]["type"] == f"response.{event_kind}.delta":
                    assert (body[i]["item_id"], body[i]["output_index"]) == (item_id, index)
                    text += body[i]["delta"]
                    i += 1
                if i == len(body):  # cut by a failure
                    break
                done = body[i]
                assert done["type"] == f"response.{event_kind}.done", done["type"]
                assert done["text"] == text, "done text is the deltas joined"
                assert body[i + 1]["type"] == "response.content_part.done"
                assert body[i + 1]["part"]["text"] == text
                i += 2
        elif kind in hosted_items():  # a tool the server ran: its kind's events, in the spec's order
            row = hosted_items()[kind]
            seen = []
            while i < len(body) and body[i]["type"] != "response.output_item.done":
                assert (body[i]["item_id"], body[i]["output_index"]) == (item_id, index), body[i]
                seen.append(body[i]["type"])
                i += 1
            if i == len(body):
                break
            failed = body[i]["item"]["status"] == "failed"
            assert seen == row["before"] + row["failed" if failed else "completed"], seen
        elif kind in LISTING_ITEMS:  # an item the server made itself (an MCP server's tool list): in_progress, then
            seen = []  # completed or failed
            while i < len(body) and body[i]["type"] != "response.output_item.done":
                assert (body[i]["item_id"], body[i]["output_index"]) == (item_id, index), body[i]
                seen.append(body[i]["type"])
                i += 1
            if i == len(body):
                break
            ending = "failed" if body[i]["item"].get("error") else "completed"
            assert seen == [f"response.{kind}.in_progress", f"response.{kind}.{ending}"], seen
        elif kind == "function_call":
            assert item["arguments"] == "" and item["status"] == "in_progress"
            args = ""
            while i < len(body) and body[i]["type"] == "response.function_call_arguments.delta":
                assert (body[i]["item_id"], body[i]["output_index"]) == (item_id, index)
                args += body[i]["delta"]
                i += 1
            if i == len(body):
                break
            assert body[i]["type"] == "response.function_call_arguments.done", body[i]["type"]
            assert body[i]["arguments"] == args
            i += 1
        if i == len(body):
            break
        done_item = body[i]
        assert done_item["type"] == "response.output_item.done", done_item["type"]
        assert done_item["output_index"] == index and done_item["item"]["id"] == item_id
        items.append(done_item["item"])
        i += 1
    output = final["response"]["output"]
    assert output[: len(items)] == items, "the terminal response holds the finished items"
    if final["type"] == "response.completed":
        assert len(output) == len(items)
    if final["type"] == "response.incomplete":
        assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
