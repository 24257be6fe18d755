"""Fill the spec's texts: the placeholder rule written in spec/harmony/format.json's `texts`.

`{name}` inserts the value as plain text (a string as is, any other value as its JSON text: an integer in
decimal, `null`, `true`); `{name:json}` its JSON text
(`json.dumps(value, ensure_ascii=False, separators=(",", ":"))`); `{name:pyrepr}`, allowed only in the texts
the drop-in API copies from openai-harmony, Python's `repr` of a string; `{{` and `}}` are literal braces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(?::(json|pyrepr))?\}")


def fill(template: str, given: Mapping[str, object] | None = None, /, **named: object) -> str:
    """`template` with each placeholder replaced by its value (from `given` and the keywords), under the spec's rule."""
    values = {**given, **named} if given is not None else named

    def one(match: re.Match[str]) -> str:
        whole, name, form = match.group(0), match.group(1), match.group(2)
        if name is None:
            return whole[0]
        if name not in values:
            raise KeyError(f"the text's placeholder {whole} has no value")
        value = values[name]
        if form is None and not isinstance(value, (int, float, list, dict, type(None))):
            return str(value)  # a string as is (an error object: its message)
        if form == "pyrepr":
            return repr(value)
        return json.dumps(_as_json(value), ensure_ascii=False, separators=(",", ":"))

    return _FIELD.sub(one, template)


def _as_json(value: object) -> object:
    """Integral floats as integers (`1.0` → `1`), as JavaScript writes a number: the rule's number spelling."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return int(value)
    if isinstance(value, list):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value
