"""Keep untrusted text from becoming Harmony structure, and spot structure leaking into visible text.

`escape_control_tokens` makes text that contains no `<|` at all (so no control-token spelling), and
`unescape_control_tokens` gives the original back exactly: `<` followed by k word joiners (U+2060)
and `|` becomes `<`, k+1 word joiners, `|`. `escape_control_tokens_json` writes a JSON string whose
`<` before `|` is `\u003c`, so any JSON parser reads the original text back.

`detect_leak` flags control-token spellings, header fragments (`to=functions.` next to a second
header signal) and glued role/channel words (`assistantfinal`) in text meant for users, but not
in Markdown code (inline code spans and fenced blocks), where documentation mentions them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from ._tables import spec as _spec
from .models import Role

_JOINER = "\u2060"
# Every control-token spelling starts with this prefix (`<|`): its first character and the rest.
_HEAD, _TAIL = _spec.SPELLING_OPEN[0], _spec.SPELLING_OPEN[1:]
_JSON_ESCAPED_OPEN = f"\\u{ord(_HEAD):04x}" + _TAIL  # the prefix with its first character escaped in JSON
_ESCAPE_RE = re.compile(re.escape(_HEAD) + "(" + _JOINER + "*)" + re.escape(_TAIL))
_UNESCAPE_RE = re.compile(re.escape(_HEAD) + "(" + _JOINER + "+)" + re.escape(_TAIL))
_SPECIAL_RE = re.compile(
    "|".join(re.escape(s) for s in sorted(_spec.NAMED_TOKENS, key=len, reverse=True))
    + "|"
    + re.escape(_spec.RESERVED_SPELLING).replace(re.escape("{id}"), "[0-9]+")
)
_CHANNELS = _spec.CHANNELS
_CHANNEL_ALT = "|".join(re.escape(c) for c in _CHANNELS)
_RECIPIENT_RE = re.compile(
    re.escape(_spec.HEADER_RECIPIENT_KEYWORD + _spec.HEADER_FUNCTION_NAMESPACE + _spec.HEADER_NAMESPACE_SEPARATOR)
    + r"\S*"
)
_GLUED_RE = re.compile(re.escape(Role.ASSISTANT.value) + "(?:" + _CHANNEL_ALT + ")(?![a-z])")
_SIGNAL_RE = re.compile(
    "(?:^|\\s|"
    + re.escape(Role.ASSISTANT.value)
    + ")(?:"
    + _CHANNEL_ALT
    + ")(?![a-z])"
    + "|(?:^|\\s)(?:"
    + "|".join(re.escape(c) for c in _spec.CONTENT_TYPES)
    + ")(?=\\{|\\s|$)|"
    + re.escape(_spec.SPELLING_OPEN)
)
_CODE_RE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)

LeakKind = Literal["control_token", "header_fragment", "glued_header"]


def escape_control_tokens(text: str) -> str:
    """Text with no `<|` left; `unescape_control_tokens` inverts it exactly."""
    return _ESCAPE_RE.sub(lambda m: _HEAD + m.group(1) + _JOINER + _TAIL, text)


def unescape_control_tokens(text: str) -> str:
    """The inverse of `escape_control_tokens`."""
    return _UNESCAPE_RE.sub(lambda m: _HEAD + m.group(1)[1:] + _TAIL, text)


def escape_control_tokens_json(text: str) -> str:
    """A JSON string literal for `text` in which no control-token spelling appears literally."""
    return json.dumps(text, ensure_ascii=False).replace(_spec.SPELLING_OPEN, _JSON_ESCAPED_OPEN)


@dataclass(frozen=True, slots=True)
class Leak:
    """A place in visible text that looks like Harmony structure."""

    kind: LeakKind
    start: int
    end: int
    text: str


def detect_leak(text: str) -> list[Leak]:
    """Control-token spellings and header fragments outside Markdown code, in text order."""
    code = [(m.start(), m.end()) for m in _CODE_RE.finditer(text)]

    def in_code(pos: int) -> bool:
        return any(a <= pos < b for a, b in code)

    leaks: list[Leak] = []
    for m in _SPECIAL_RE.finditer(text):
        if not in_code(m.start()):
            leaks.append(Leak("control_token", m.start(), m.end(), m.group()))
    for m in _GLUED_RE.finditer(text):
        if not in_code(m.start()):
            leaks.append(Leak("glued_header", m.start(), m.end(), m.group()))
    for m in _RECIPIENT_RE.finditer(text):
        if in_code(m.start()):
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        around = text[line_start : m.start()] + " " + text[m.end() : len(text) if line_end < 0 else line_end]
        if _SIGNAL_RE.search(around):
            leaks.append(Leak("header_fragment", m.start(), m.end(), m.group()))
    leaks.sort(key=lambda leak: (leak.start, leak.end))
    return leaks
