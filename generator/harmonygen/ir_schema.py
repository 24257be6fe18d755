"""The IR's JSON Schema (`ir.schema.json`, kept beside this module) and validation against it."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from .errors import SpecError

SCHEMA_FILE = "ir.schema.json"


@cache
def ir_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files(__package__).joinpath(SCHEMA_FILE).read_text(encoding="utf-8"))
    return data


def validate_ir(data: Any) -> None:
    """Raise SpecError naming the first place where `data` (an IR as JSON) breaks the schema."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(ir_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "$" + "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in first.absolute_path)
        raise SpecError(f"the IR breaks {SCHEMA_FILE} at {where}: {first.message} ({len(errors)} problems in all)")
