"""Canonical TypeScript literals and types for generated tables: same value, same bytes, any hash seed."""

from __future__ import annotations

import json
from typing import Any

_WIDTH = 110


def ts_string(text: str) -> str:
    # JSON string syntax is TypeScript string syntax; U+2028/9 are escaped for older parsers and editors.
    return json.dumps(text, ensure_ascii=False).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def ts_literal(value: Any, indent: int = 0) -> str:
    """An expression that evaluates to `value`; containers wrap one item a line when too long."""
    flat = _flat(value)
    if len(flat) + indent <= _WIDTH or not isinstance(value, (list, tuple, dict, set, frozenset)):
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{ts_string(str(k))}: {ts_literal(v, indent + 2)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    values = sorted(value) if isinstance(value, (set, frozenset)) else value
    items = [f"{pad}{ts_literal(v, indent + 2)}," for v in values]
    return "[\n" + "\n".join(items) + "\n" + " " * indent + "]"


def _flat(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return ts_string(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{ts_string(str(k))}: {_flat(v)}" for k, v in value.items()) + " }" if value else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        return "[" + ", ".join(_flat(v) for v in sorted(value)) + "]"
    raise TypeError(f"cannot print {type(value).__name__} as a TypeScript literal")


def _union(types: list[str]) -> str:
    unique = sorted(set(types), key=lambda t: (t == "null", t))
    return " | ".join(unique) if unique else "never"


def _element(t: str) -> str:
    return f"({t})" if " | " in t else t


def ts_type(value: Any) -> str:
    """A read-only type that `value` has, widened to primitives: a table's type never names its values."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (set, frozenset)):
        return f"readonly {_element(_union([ts_type(v) for v in value]))}[]"
    if isinstance(value, tuple) and value and len({ts_type(v) for v in value}) > 1 and len(value) <= 4:
        return "readonly [" + ", ".join(ts_type(v) for v in value) + "]"
    if isinstance(value, (list, tuple)):
        return f"readonly {_element(_union([_merged([v for v in value])]))}[]"
    if isinstance(value, dict):
        keys = {"number" if isinstance(k, int) else "string" for k in value} or {"string"}
        key = keys.pop() if len(keys) == 1 else "string"
        return f"Readonly<Record<{key}, {_merged(list(value.values()))}>>"
    raise TypeError(f"no TypeScript type for {type(value).__name__}")


def _merged(values: list[Any]) -> str:
    """One type for the values of a table: records with the same keys merge field by field."""
    records = [v for v in values if isinstance(v, dict)]
    others = [ts_type(v) for v in values if not isinstance(v, dict)]
    if not records:
        return _union(others)
    field_names = list(records[0])
    if any(list(r) != field_names for r in records) or not field_names:
        return _union(others + [ts_type(r) for r in records])
    fields = [f"readonly {name}: {_union([ts_type(r[name]) for r in records])}" for name in field_names]
    return _union(others + ["{ " + "; ".join(fields) + " }"])
