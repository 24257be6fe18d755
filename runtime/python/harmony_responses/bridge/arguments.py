"""Arguments of a strict function tool, checked against the tool's `parameters` JSON Schema.

The check needs the optional `jsonschema` package (the `validate` extra); it is imported the first time a
strict tool's call is checked, never when the package is imported, so the core keeps pydantic and
tiktoken as its only runtime dependencies. Without it the result says so (`valid` is None).

What it reports is the spec's (`ARGUMENT_ERRORS`, the mapping's `arguments` section, whose comment gives the
rule): one text per failed keyword, filled with the keyword's value in the schema or the property it is about,
sorted by path and message, each error once. jsonschema decides what is wrong; its own words are not used.
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .._tables import spec as _spec
from ..json_input import NOT_JSON
from ..texts import fill

MISSING = "the jsonschema package is not installed (pip install 'harmony-responses[validate]'): not checked"
BAD_SCHEMA = "the tool's schema is invalid: {error}"
_TEXTS = _spec.ARGUMENT_ERRORS
_FALSE = "false"  # the table's key of a `false` schema's error (jsonschema names no keyword there)
_OTHER = "other"
# draft 7's keyword whose arrays are a later draft's `dependentRequired`; the bounds jsonschema names apart
_SAME = {"dependencies": "dependentRequired", "minContains": "contains", "maxContains": "contains"}
_LIMITED = frozenset(
    {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength"}
    | {"minItems", "maxItems", "minProperties", "maxProperties"}
)  # the keywords whose text shows their value as `limit`
_EXPECTED = ("type", "enum", "const")


@dataclass(frozen=True)
class Validation:
    """What the check found: `valid` True, False, or None (not checked); each error's JSON pointer and text."""

    valid: bool | None
    errors: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "errors": self.errors}


@cache
def _jsonschema() -> Any:
    try:
        return importlib.import_module("jsonschema")
    except ImportError:
        return None


def _pointer(path: Any) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _other(error: Any) -> str:
    return fill(_TEXTS[_OTHER], keyword=error.validator)


def _messages(error: Any) -> list[str]:
    """The spec's texts for one jsonschema error (one per property it is about)."""
    keyword = _FALSE if error.validator is None else _SAME.get(error.validator, error.validator)
    value, instance, schema = error.validator_value, error.instance, error.schema
    text = _TEXTS.get(keyword)
    if text is None or keyword == _OTHER:
        return [_other(error)]
    if keyword in _LIMITED:
        return [fill(text, limit=value)]
    if keyword in _EXPECTED:
        return [fill(text, expected=value)]
    if keyword == "pattern":
        return [fill(text, pattern=value)]
    if keyword == "items":
        return [fill(text, limit=len(schema.get("prefixItems", [])) if isinstance(schema, dict) else 0)]
    if keyword == "required":
        return [fill(text, name=name) for name in value if name not in instance]
    if keyword == "dependentRequired":
        pairs = [
            (name, by) for by, names in value.items() if by in instance and isinstance(names, list) for name in names
        ]
        return [fill(text, name=name, by=by) for name, by in pairs if name not in instance]
    if keyword == "additionalProperties":
        known, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
        extra = [k for k in instance if k not in known and not any(re.search(p, k) for p in patterns)]
        return [fill(text, name=name) for name in extra]
    return [text]


def check_arguments(arguments: str, schema: dict[str, Any]) -> Validation:
    """Validate a call's `arguments` (a JSON text) against `schema`; never raises on what the model wrote."""
    try:
        value = json.loads(arguments)
    except ValueError:  # format.json's one syntax-error text, as every JSON reader of the package says it
        return Validation(False, [{"path": "", "message": NOT_JSON}])
    jsonschema = _jsonschema()
    if jsonschema is None:
        return Validation(None, [{"path": "", "message": MISSING}])
    try:
        validator_class = jsonschema.validators.validator_for(schema)
        validator_class.check_schema(schema)
        errors = list(validator_class(schema).iter_errors(value))
        found = {(_pointer(e.absolute_path), m) for e in errors for m in _messages(e) or [_other(e)]}
    except jsonschema.exceptions.SchemaError as exc:  # the request's schema, not the model, is at fault
        return Validation(None, [{"path": "", "message": BAD_SCHEMA.format(error=exc.message)}])
    except Exception as exc:  # noqa: BLE001 - a `$ref` to nowhere and the like: the schema's fault again
        return Validation(None, [{"path": "", "message": BAD_SCHEMA.format(error=exc)}])
    return Validation(not errors, [{"path": path, "message": message} for path, message in sorted(found)])
