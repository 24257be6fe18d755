"""Arguments of a strict function tool, checked against the tool's `parameters` JSON Schema.

The check needs the optional `jsonschema` package (the `validate` extra); it is imported the first time a
strict tool's call is checked, never when the package is imported, so the core keeps pydantic and
tiktoken as its only runtime dependencies. Without it the result says so (`valid` is None).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..json_input import NOT_JSON

MISSING = "the jsonschema package is not installed (pip install 'harmony-responses[validate]'): not checked"
BAD_SCHEMA = "the tool's schema is invalid: {error}"


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
        validator = validator_class(schema)
        errors = sorted(validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
    except jsonschema.exceptions.SchemaError as exc:  # the request's schema, not the model, is at fault
        return Validation(None, [{"path": "", "message": BAD_SCHEMA.format(error=exc.message)}])
    except Exception as exc:  # noqa: BLE001 - a `$ref` to nowhere and the like: the schema's fault again
        return Validation(None, [{"path": "", "message": BAD_SCHEMA.format(error=exc)}])
    return Validation(not errors, [{"path": _pointer(e.absolute_path), "message": e.message} for e in errors])
