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
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from .._tables import spec as _spec
from ..json_input import format_path
from ..texts import fill

_Model = TypeVar("_Model", bound=BaseModel)
_TEXTS = _spec.VALIDATION_TEXTS  # spec/mapping/requests.json's `validation`: what each kind of error says
_KINDS = {  # pydantic error type → the table's kind of what the input should have held there
    "string_type": "string",
    "string_unicode": "string",
    "list_type": "array",
    "tuple_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "int_type": "integer",
    "int_parsing": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "float_parsing": "number",
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "none_required": "null",
}
_LIMITS = {  # pydantic error type → the table's kind, and the ctx entry that is its `{limit}`
    "string_too_long": ("max_length", "max_length"),
    "string_too_short": ("min_length", "min_length"),
    "too_long": ("max_items", "max_length"),
    "too_short": ("min_items", "min_length"),
    "greater_than_equal": ("minimum", "ge"),
    "greater_than": ("exclusive_minimum", "gt"),
    "less_than_equal": ("maximum", "le"),
    "less_than": ("exclusive_maximum", "lt"),
}
_FOUND_CHARS = 40  # a string found is shown up to this many characters
_TAG_ERRORS = ("union_tag_invalid", "union_tag_not_found")
_INVALID, _MISSING = _spec.REQUEST_ERROR_INVALID, _spec.REQUEST_ERROR_MISSING  # the spec's request errors
ITEM_UNION = "item_tag()"  # how pydantic names the discriminator of the item unions (`item_discriminator`)


def validate(model: type[_Model], raw: object) -> _Model:
    """`model.model_validate(raw)` by the spec's rule: JSON types as sent, no coercion (pydantic's strict mode),
    except that an integral number (16.0) is an integer, as it is to JSON."""
    try:
        return model.model_validate(raw, strict=True)
    except ValidationError as exc:
        fixed, changed = raw, False
        for error in exc.errors():
            value = error.get("input")
            if error["type"] == "int_type" and isinstance(value, float) and value.is_integer():
                fixed, changed = _replaced(fixed, error["loc"], int(value)), True
        if not changed:
            raise
    return model.model_validate(fixed, strict=True)


def _replaced(node: object, loc: Sequence[int | str], value: object) -> object:
    """A copy of `node` with `value` at pydantic's `loc` (union member names, not in the data, skipped)."""
    if not loc:
        return value
    head, rest = loc[0], loc[1:]
    if isinstance(head, int) and isinstance(node, list) and 0 <= head < len(node):
        return [_replaced(v, rest, value) if i == head else v for i, v in enumerate(node)]
    if isinstance(head, str) and isinstance(node, Mapping) and head in node:
        return {k: _replaced(v, rest, value) if k == head else v for k, v in node.items()}
    return _replaced(node, rest, value)


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
        return _TEXTS["null"]
    if isinstance(value, bool):
        return _TEXTS["boolean"]
    if isinstance(value, int):
        return _TEXTS["integer"]
    if isinstance(value, float):
        return _TEXTS["number"]
    if isinstance(value, str):
        return _TEXTS["string"]
    if isinstance(value, Mapping):
        return _TEXTS["object"]
    if isinstance(value, (list, tuple)):
        return _TEXTS["array"]
    return type(value).__name__


def found(value: object) -> str:
    """`"robot"`, `5 (an integer)`, `an array`: short enough for one line, never the whole value."""
    if isinstance(value, str):
        return json.dumps(value[:_FOUND_CHARS] + ("…" if len(value) > _FOUND_CHARS else ""), ensure_ascii=True)
    if value is None or isinstance(value, (bool, int, float)):
        number = int(value) if isinstance(value, float) and value.is_integer() else value  # JSON's value: 1.0 is 1
        return fill(_TEXTS["found_scalar"], value=json.dumps(number), kind=kind_of(value))
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
    if kind in _KINDS:
        return _TEXTS[_KINDS[kind]]
    if kind in _LIMITS:
        text, key = _LIMITS[kind]
        return fill(_TEXTS[text], limit=ctx.get(key))
    if kind == "string_pattern_mismatch":
        return fill(_TEXTS["pattern"], pattern=ctx.get("pattern"))
    return str(error["msg"]).removeprefix("Input should be ").removeprefix("Value error, ")


def _literals(text: object) -> list[str]:
    """pydantic's list of allowed values (`'a', 'b' or 'c'`) as JSON texts."""
    return [part.strip().replace("'", '"') for part in str(text).replace(" or ", ", ").split(", ") if part.strip()]


def _tag_error(error: ErrorDetails) -> bool:
    """A tagged union's complaint about its tag (not the item unions', which are told at the item)."""
    return error["type"] in _TAG_ERRORS and str((error.get("ctx") or {}).get("discriminator", "")) != ITEM_UNION


def _depth(parts: tuple[int | str, ...], error: ErrorDetails) -> int:
    """How deep a complaint is: pydantic places a union's tag error at the object, the spec at its tag."""
    return len(parts) + (1 if _tag_error(error) else 0)


def _rank(parts: tuple[int | str, ...], present: bool, error: ErrorDetails) -> int:
    """0 for a wrong `type` (a tag no member has among them), 1 for a wrong value, 2 for a missing field or tag."""
    if not present or (_tag_error(error) and error["type"] == "union_tag_not_found"):
        return 2
    return 0 if _tag_error(error) or (parts and parts[-1] == "type") else 1


def explain(exc: ValidationError, raw: object) -> Problem:
    """The deepest place `raw` went wrong, and what would have fit there (the rule of the `validation` table)."""
    resolved = []
    for error in exc.errors():
        parts, value, present = _resolve(raw, error["loc"], error["type"] == "missing")
        resolved.append((parts, value, present, error))
    depth = max(_depth(r[0], r[3]) for r in resolved)
    # Of the deepest: a wrong `type` first (it explains the rest of its object), then a wrong value, then a missing one.
    deepest = [r for r in resolved if _depth(r[0], r[3]) == depth]
    ranked = sorted(deepest, key=lambda r: _rank(r[0], r[2], r[3]))
    parts, value, present, error = ranked[0]
    if error["type"] in _TAG_ERRORS:
        ctx = error.get("ctx") or {}
        union = str(ctx.get("discriminator", ""))
        if union == ITEM_UNION:
            return Problem(parts, _INVALID, "", value, union)
        if error["type"] == "union_tag_not_found":
            return Problem((*parts, "type"), _MISSING, "", None, union)
        tag = value.get("type") if isinstance(value, Mapping) else value
        expected = fill(_TEXTS["enum"], values=", ".join(_literals(ctx.get("expected_tags", ""))))
        return Problem((*parts, "type"), _INVALID, fill(_TEXTS["message"], expected=expected, found=found(tag)), tag)
    if not present:
        return Problem(parts, _MISSING, "", None)
    phrases: list[str] = []
    literals: list[str] = []
    for r in deepest:
        kind = r[3]["type"]
        if r[0] != parts or kind in _TAG_ERRORS or kind == "missing":
            continue
        if kind == "literal_error":
            literals += [v for v in _literals((r[3].get("ctx") or {}).get("expected", "")) if v not in literals]
        elif (phrase := _phrase(r[3])) not in phrases:
            phrases.append(phrase)
    if len(phrases) > 1 or literals:  # null is what an optional field may also be: told only when nothing else is
        phrases = [p for p in phrases if p != _TEXTS["null"]]
    if literals:
        phrases.append(fill(_TEXTS["enum"], values=", ".join(literals)))
    message = fill(_TEXTS["message"], expected=_TEXTS["or"].join(phrases), found=found(value))
    return Problem(parts, _INVALID, message, value)
