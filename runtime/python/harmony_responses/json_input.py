"""Untrusted JSON, read within documented limits; every problem names its JSON path.

The limits (spec/mapping/requests.json), for the command line, the request bridge and `Conversation.from_json`:

- `MAX_JSON_DEPTH` (64): arrays and objects nest at most 64 deep, the document itself being depth 1.
  Deeper input is refused before it reaches anything recursive (the JSON decoder, pydantic, the tool
  namespace renderer), so no `RecursionError` or serialisation-depth error can escape. A tool schema
  about 30 levels deep still fits in a request; real schemas stay far below.
- `MAX_SCHEMA_CHARS` (262 144): a JSON Schema shown to the model (a tool's `parameters`, a
  `text.format` schema) is at most that many characters of compact JSON: about the whole 131 072-token
  context of gpt-oss. The bridge checks it (`bridge.request`); it is kept here with the other limit.

Besides the limits, a string or object key holding a lone UTF-16 surrogate (`"\\ud800"`: JSON escapes
can spell one, no UTF-8 text can carry it) is refused, and so are `NaN` and `Infinity`, which Python's
decoder accepts but JSON does not have.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from ._tables import spec as _spec

MAX_JSON_DEPTH: int = _spec.MAX_JSON_DEPTH
MAX_SCHEMA_CHARS: int = _spec.MAX_SCHEMA_CHARS
NOT_JSON: str = _spec.JSON_SYNTAX_ERROR  # format.json text_rules: one text, no position

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
# A JSON string, or one structural character: enough to follow the nesting without building values.
_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}:,]', re.S)


class JSONInputError(ValueError):
    """JSON that cannot be taken: `path` (`$.messages[0].role`, `input[2]`) and what was wrong there."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


class _NonFinite:
    """What the decoder makes of `NaN`, `Infinity` and `-Infinity`: found and refused by the walk."""

    __slots__ = ("spelling",)

    def __init__(self, spelling: str) -> None:
        self.spelling = spelling


def format_path(root: str, parts: list[int | str] | tuple[int | str, ...]) -> str:
    """`root` followed by `[i]` for indexes and `.key` for keys (`["odd key"]` when not a plain word).

    An empty root gives the request style (`input[0].role`); `$` the JSONPath style (`$.input[0].role`).
    Keys are written with ASCII escapes where needed, so a path always prints.
    """
    out = root
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _KEY_RE.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += "[" + json.dumps(part) + "]"
    return out


def _describe(value: object) -> str:
    if isinstance(value, _NonFinite):
        return value.spelling
    return type(value).__name__


def _walk(value: Any) -> Iterator[tuple[tuple[int | str, ...], str]]:
    """Every problem of a decoded value, in document order: (path parts, reason). Iterative, never recursive."""
    stack: list[tuple[tuple[int | str, ...], Any]] = [((), value)]
    while stack:
        parts, node = stack.pop()
        if isinstance(node, str):
            bad = None if node.isascii() else _SURROGATE_RE.search(node)
            if bad is not None:
                yield parts, f"lone surrogate {json.dumps(bad.group())} at character {bad.start()}: not valid Unicode"
        elif isinstance(node, (dict, list)):
            if len(parts) >= MAX_JSON_DEPTH:
                yield parts, f"nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects"
                continue
            if isinstance(node, dict):
                children: list[tuple[tuple[int | str, ...], Any]] = []
                for key, child in node.items():
                    if not isinstance(key, str):
                        yield parts, f"object key {key!r} is not a string"
                        continue
                    if not key.isascii() and _SURROGATE_RE.search(key):
                        yield (*parts, key), "the key holds a lone surrogate: not valid Unicode"
                        continue
                    children.append(((*parts, key), child))
            else:
                children = [((*parts, i), child) for i, child in enumerate(node)]
            stack.extend(reversed(children))
        elif isinstance(node, _NonFinite) or (isinstance(node, float) and not math.isfinite(node)):
            yield parts, f"expected a finite number, found {node if isinstance(node, float) else node.spelling}"


def check_json_value(value: Any, root: str = "$") -> None:
    """Raise `JSONInputError` for the first problem of an already decoded value (depth, surrogates, NaN)."""
    for parts, reason in _walk(value):
        raise JSONInputError(format_path(root, parts), reason)


def _too_deep_at(text: str, root: str) -> str | None:
    """The path of the first container nested beyond the limit, following the text's brackets only."""
    frames: list[list[Any]] = []  # per open container: [is_object, key or index, expecting_key]
    for m in _TOKEN_RE.finditer(text):
        tok = m.group()
        if tok == "[" or tok == "{":
            if len(frames) >= MAX_JSON_DEPTH:
                return format_path(root, [f[1] for f in frames])
            frames.append([True, "", True] if tok == "{" else [False, 0, False])
        elif tok == "]" or tok == "}":
            if frames:
                frames.pop()
        elif tok == ",":
            if frames:
                if frames[-1][0]:
                    frames[-1][2] = True
                else:
                    frames[-1][1] += 1
        elif tok != ":" and frames and frames[-1][2]:  # an object's key
            try:
                frames[-1][1] = json.loads(tok)
            except ValueError:
                frames[-1][1] = tok
            frames[-1][2] = False
    return None


def load_json(text: str, root: str = "$") -> Any:
    """Decode JSON text within the limits; `JSONInputError` names the path of a problem.

    The nesting limit is checked on the text's brackets first, so nothing recursive sees deeper input. Any
    text the decoder refuses (a byte-order mark included) and an integer of more digits than Python converts
    get format.json's one syntax-error text, `NOT_JSON`, with no position: each language's parser reports
    positions its own way, so the corpus fixes only the text (format.json's `text_rules`).
    """
    where = _too_deep_at(text, root)
    if where is not None:
        raise JSONInputError(where, f"nested deeper than {MAX_JSON_DEPTH} levels of arrays and objects")
    try:
        value = json.loads(text, parse_constant=_NonFinite)
    except ValueError:  # a JSONDecodeError, or an integer of more digits than Python converts
        raise JSONInputError(root, NOT_JSON) from None
    check_json_value(value, root)
    return value
