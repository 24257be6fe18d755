"""Canonical Python literals for generated tables: same value, same bytes, any hash seed."""

from __future__ import annotations

from typing import Any

_WIDTH = 100


def py_literal(value: Any, indent: int = 0) -> str:
    """A literal that evaluates to `value`; containers wrap one item a line when too long."""
    flat = _flat(value)
    if len(flat) + indent <= _WIDTH or not isinstance(value, (list, tuple, dict, set, frozenset)):
        return flat
    pad = " " * (indent + 4)
    if isinstance(value, dict):
        items = [f"{pad}{_flat(k)}: {py_literal(v, indent + 4)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, (set, frozenset)):
        items = [f"{pad}{py_literal(v, indent + 4)}," for v in sorted(value)]
        return (
            "frozenset(\n"
            + pad
            + "{\n"
            + "\n".join("    " + i for i in items)
            + "\n"
            + pad
            + "}\n"
            + " " * indent
            + ")"
        )
    open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
    items = [f"{pad}{py_literal(v, indent + 4)}," for v in value]
    return open_ + "\n" + "\n".join(items) + "\n" + " " * indent + close


def _flat(value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flat(k)}: {_flat(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    if isinstance(value, tuple):
        if len(value) == 1:
            return "(" + _flat(value[0]) + ",)"
        return "(" + ", ".join(_flat(v) for v in value) + ")"
    if isinstance(value, (set, frozenset)):
        return "frozenset({" + ", ".join(_flat(v) for v in sorted(value)) + "})" if value else "frozenset()"
    raise TypeError(f"cannot print {type(value).__name__} as a Python literal")


def _str(text: str) -> str:
    # Prefer double quotes like ruff format; repr() picks single quotes.
    body = repr(text)[1:-1]
    if repr(text).startswith('"'):
        return '"' + body + '"'
    body = body.replace("\\'", "'").replace('"', '\\"')
    return '"' + body + '"'
