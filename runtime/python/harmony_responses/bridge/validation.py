"""A pydantic `ValidationError` told in the words of the JSON it rejected: its own path, what fits there.

pydantic reports one error per union member it tried, at locations that name those members
(`UserMessageItemParam`, `constrained-str`, `list[tagged-union[...]]`). `explain` follows the input
instead: the member that got furthest into the data says the most, and all members failing at that
same place together say what was expected there (`expected a string or an array, found 5 (an
integer)`). Union member names never reach the message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .._tables import spec as _spec
from ..json_input import format_path

_EXPECTED = {  # pydantic error type → what the input should have held there
    "string_type": "a string",
    "string_unicode": "a string",
    "list_type": "an array",
    "tuple_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "none_required": "null",
}
_BOUNDS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}
_TAG_ERRORS = ("union_tag_invalid", "union_tag_not_found")
_INVALID, _MISSING = _spec.REQUEST_ERROR_INVALID, _spec.REQUEST_ERROR_MISSING  # the spec's request errors
ITEM_UNION = "item_tag()"  # how pydantic names the discriminator of the item unions (`item_discriminator`)


@dataclass(frozen=True)
class Problem:
    """The one thing to tell: where (`parts`, the input's own path), the spec's error (`error`, a handle of
    `REQUEST_ERRORS`) and what to say of it (`message`), what is there.

    `union` is the discriminator of a tagged union no member of which took the value (`'type'`, or
    `ITEM_UNION` for the item unions), for callers that can say more about their own unions.
    """

    parts: tuple[int | str, ...]
    error: str
    message: str
    value: object
    union: str | None = None

    def path(self, root: str = "") -> str:
        return format_path(root, self.parts)


def kind_of(value: object) -> str:
    """`an integer`, `an array`, `null`: a JSON value's kind."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    return type(value).__name__


def found(value: object) -> str:
    """`"robot"`, `5 (an integer)`, `an array`: short enough for one line, never the whole value."""
    if isinstance(value, str):
        return json.dumps(value[:40] + ("…" if len(value) > 40 else ""), ensure_ascii=True)
    if value is None or isinstance(value, (bool, int, float)):
        return f"{json.dumps(value)} ({kind_of(value)})"
    return kind_of(value)


def _resolve(raw: object, loc: Sequence[int | str], missing: bool) -> tuple[tuple[int | str, ...], object, bool]:
    """The input's own path for a pydantic `loc`, the value there, and whether it is present.

    Location parts that are not in the data (the union members pydantic tried) are left out.
    """
    parts: list[int | str] = []
    node = raw
    for i, seg in enumerate(loc):
        if isinstance(seg, int) and isinstance(node, (list, tuple)) and 0 <= seg < len(node):
            parts.append(seg)
            node = node[seg]
        elif isinstance(seg, str) and isinstance(node, Mapping) and seg in node:
            parts.append(seg)
            node = node[seg]
        elif missing and i == len(loc) - 1 and isinstance(node, Mapping):
            parts.append(seg)
            return tuple(parts), None, False
    return tuple(parts), node, True


def _phrase(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind in _EXPECTED:
        return _EXPECTED[kind]
    if kind == "string_too_long":
        return f"a string of at most {ctx.get('max_length')} characters"
    if kind == "string_too_short":
        return f"a string of at least {ctx.get('min_length')} characters"
    if kind == "too_long":
        return f"at most {ctx.get('max_length')} entries"
    if kind == "too_short":
        return f"at least {ctx.get('min_length')} entries"
    if kind == "string_pattern_mismatch":
        return f"a string matching {ctx.get('pattern')}"
    if kind in _BOUNDS:
        return f"a number {_BOUNDS[kind]} {next(iter(ctx.values()), '')}"
    return str(error["msg"]).removeprefix("Input should be ").removeprefix("Value error, ")


def _quoted(text: object) -> str:
    return str(text).replace("'", '"')


def explain(exc: ValidationError, raw: object) -> Problem:
    """The deepest place `raw` went wrong, and what would have fit there."""
    resolved = []
    for error in exc.errors():
        parts, value, present = _resolve(raw, error["loc"], error["type"] == "missing")
        resolved.append((parts, value, present, error))
    depth = max(len(r[0]) for r in resolved)
    deepest = [r for r in resolved if len(r[0]) == depth]
    # A wrong `type` explains the other complaints about its object.
    parts, value, present, error = next((r for r in deepest if r[0] and r[0][-1] == "type"), deepest[0])
    if error["type"] in _TAG_ERRORS:
        ctx = error.get("ctx") or {}
        union = str(ctx.get("discriminator", ""))
        if union == ITEM_UNION:
            return Problem(parts, _INVALID, "expected a known item type", value, union)
        if error["type"] == "union_tag_not_found":
            return Problem((*parts, "type"), _MISSING, "", None, union)
        tag = value.get("type") if isinstance(value, Mapping) else value
        message = f"expected a type of {_quoted(ctx.get('expected_tags', ''))}, found {found(tag)}"
        return Problem((*parts, "type"), _INVALID, message, tag, union)
    if not present:
        return Problem(parts, _MISSING, "", None)
    phrases: list[str] = []
    literals: list[str] = []
    for r in deepest:
        kind = r[3]["type"]
        if r[0] != parts or kind in _TAG_ERRORS or kind == "missing":
            continue
        if kind == "literal_error":
            literals.append(_quoted((r[3].get("ctx") or {}).get("expected", "")))
        elif (phrase := _phrase(r[3])) not in phrases:
            phrases.append(phrase)
    if literals:
        phrases.append("one of " + ", ".join(literals).replace(" or ", ", "))
    return Problem(parts, _INVALID, f"expected {' or '.join(phrases)}, found {found(value)}", value)
