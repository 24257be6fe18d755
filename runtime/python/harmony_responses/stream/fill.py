"""Fill a spec text's placeholders by the spec's neutral rule, the same in every language.

`{name}` is the value as plain text (a value that is no string: its JSON text), `{name:json}` the value's
JSON text (`json.dumps(v, ensure_ascii=False)`; JavaScript's `JSON.stringify(v)` writes the same), and
`{{` / `}}` are literal braces. (A stand-in for the runtime-wide helper of the spec's text rule.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(:json)?\}")


def fill(template: str, values: Mapping[str, object]) -> str:
    """`template` with each placeholder replaced by its value; a placeholder without a value raises KeyError."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)[0]
        value = values[name]
        if match.group(2) is None and isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False)

    return _FIELD.sub(one, template)
