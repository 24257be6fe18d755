"""A small valid instance of a JSON Schema, the same every time: what the demo engine answers when constrained.

`instance(schema)` follows `$ref` to the schema's own `$defs`/`definitions` (local pointers only), takes
`const`, then the first `enum` value, then the first `anyOf`/`oneOf` branch that gives a value (a
non-null branch before `null`), merges `allOf`, and otherwise builds a value of the schema's `type`:
an object with every `required` property (and, when nothing is required, none), an array of
`minItems` items built from `items` (or `prefixItems`), a string of `minLength` (or a fixed example
for the common `format`s), a number within `minimum`/`maximum` (a multiple of `multipleOf`). A schema
it cannot satisfy (a `pattern`, a `not`) gives its best guess: the server checks the answer anyway.
A recursion guard stops at `MAX_DEPTH` levels, so a schema that refers to itself still ends.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

MAX_DEPTH = 32
_FORMATS = {  # JSON Schema's `format` names → a value of that format
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "duration": "P1D",
    "email": "demo@example.com",
    "hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}
_TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


def instance(schema: Any) -> Any:
    """A small value `schema` accepts (see the module docstring); `schema` is read, never changed."""
    root = schema if isinstance(schema, Mapping) else {}
    return _value(schema, root, 0, frozenset())


def _resolve(ref: str, root: Mapping[str, Any]) -> Any:
    if not ref.startswith("#"):
        return {}  # a remote reference: nothing to follow here
    node: Any = root
    for raw in ref[1:].split("/"):
        if not raw:
            continue
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return {}
    return node


def _merged(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> dict[str, Any]:
    """The schema with its `$ref` and `allOf` folded in (properties and required lists joined)."""
    out: dict[str, Any] = {k: v for k, v in schema.items() if k not in ("$ref", "allOf")}
    parts: list[Any] = []
    if isinstance(schema.get("$ref"), str) and depth < MAX_DEPTH:
        parts.append(_resolve(schema["$ref"], root))
    if isinstance(schema.get("allOf"), list):
        parts.extend(schema["allOf"])
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        part = _merged(part, root, depth + 1)
        for key, value in part.items():
            if key == "properties" and isinstance(value, Mapping):
                out["properties"] = {**value, **(out.get("properties") or {})}
            elif key == "required" and isinstance(value, list):
                out["required"] = list(dict.fromkeys([*(out.get("required") or []), *value]))
            else:
                out.setdefault(key, value)
    return out


def _choice(branch: Any, active: frozenset[str]) -> int:
    """How early a branch of `anyOf`/`oneOf` is taken: a value before null, null before a way back into a
    `$ref` being built (which could go on forever)."""
    if not isinstance(branch, Mapping):
        return 1
    if branch.get("$ref") in active:
        return 2
    return 1 if branch.get("type") == "null" else 0


def _value(schema: Any, root: Mapping[str, Any], depth: int, active: frozenset[str]) -> Any:
    if schema is True or not isinstance(schema, Mapping):
        return None if depth >= MAX_DEPTH else {}
    if depth >= MAX_DEPTH:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        active = active | {ref}
    schema = _merged(schema, root, depth)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            first = sorted(branches, key=lambda b: _choice(b, active))[0]
            rest = {k: v for k, v in schema.items() if k != key}
            return _value({**rest, **first} if isinstance(first, Mapping) else rest, root, depth + 1, active)
    kind = _kind(schema)
    if kind == "object":
        return _object(schema, root, depth, active)
    if kind == "array":
        return _array(schema, root, depth, active)
    if kind == "string":
        return _string(schema)
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "boolean":
        return True
    return None


def _kind(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind in _TYPES:
        return str(kind)
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return "string"
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return "number"
    return "object" if kind is None and not schema else "string"


def _object(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int, active: frozenset[str]) -> dict[str, Any]:
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = schema.get("required")
    names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
    out = {name: _value(props.get(name, {}), root, depth + 1, active) for name in names}
    minimum = schema.get("minProperties")
    for name in props:
        if isinstance(minimum, int) and len(out) < minimum and name not in out:
            out[name] = _value(props[name], root, depth + 1, active)
    return out


def _array(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int, active: frozenset[str]) -> list[Any]:
    prefix = schema.get("prefixItems")
    prefix = prefix if isinstance(prefix, list) else []
    items = schema.get("items")
    count = schema.get("minItems")
    count = max(count if isinstance(count, int) else 0, len(prefix))
    out = [_value(prefix[i], root, depth + 1, active) for i in range(len(prefix))]
    while len(out) < count:
        out.append(_value(items if items is not None else {}, root, depth + 1, active))
    if schema.get("uniqueItems") is True and len(out) > 1 and isinstance(out[0], (int, float)):
        out = [out[0] + i for i in range(len(out))]  # numbers made distinct; other items stay a best guess
    return out


def _string(schema: Mapping[str, Any]) -> str:
    fmt = schema.get("format")
    text = _FORMATS.get(fmt, "demo") if isinstance(fmt, str) else "demo"
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(low, int) and len(text) < low:
        text = (text * (low // len(text) + 1))[:low]
    if isinstance(high, int) and len(text) > high:
        text = text[:high]
    return text


def _number(schema: Mapping[str, Any], *, integer: bool) -> int | float:
    low: float = -math.inf
    high: float = math.inf
    if isinstance(schema.get("minimum"), (int, float)):
        low = schema["minimum"]
    if isinstance(schema.get("maximum"), (int, float)):
        high = schema["maximum"]
    step = schema.get("multipleOf")
    step = step if isinstance(step, (int, float)) and step > 0 else (1 if integer else None)
    value: float = 1.0 if low <= 1 <= high else (low if low != -math.inf else high)
    ex_low, ex_high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(ex_low, (int, float)) and value <= ex_low:
        value = ex_low + (step or 1)
    if isinstance(ex_high, (int, float)) and value >= ex_high:
        value = ex_high - (step or 1)
    if step:
        value = math.ceil(value / step) * step
        if value > high or (isinstance(ex_high, (int, float)) and value >= ex_high):
            value -= step
    if integer or float(value).is_integer():
        return int(value)
    return value
