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

import bisect
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
_CONTENT_ALT = "|".join(re.escape(c) for c in _spec.CONTENT_TYPES)
# A second header signal on the fragment's line: a channel word, a content type before the body, or `<|`.
# Searched once over the whole text (lines are `\n`-separated; the word before a channel stays on its line).
_SIGNAL_RE = re.compile(
    "(?:^|[^\\S\n]|"
    + re.escape(Role.ASSISTANT.value)
    + ")(?:"
    + _CHANNEL_ALT
    + ")(?![a-z])"
    + "|(?:^|[^\\S\n])(?:"
    + _CONTENT_ALT
    + ")(?=\\{|\\s|$)|"
    + re.escape(_spec.SPELLING_OPEN),
    re.M,
)
# A signal word right before the fragment (`analysisto=functions.f`): the fragment itself reads as a space.
_SIGNAL_BEFORE_RE = re.compile(
    "(?:^|\\s|" + re.escape(Role.ASSISTANT.value) + ")(?:" + _CHANNEL_ALT + ")$|(?:^|\\s)(?:" + _CONTENT_ALT + ")$"
)
_SIGNAL_REACH = 2 * max(len(Role.ASSISTANT.value), *(len(c) for c in (*_CHANNELS, *_spec.CONTENT_TYPES)))
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


class _Spans:
    """Sorted, non-overlapping [start, end) spans; `covers(pos)` by binary search."""

    def __init__(self, spans: list[tuple[int, int]]) -> None:
        self._starts = [a for a, _ in spans]
        self._ends = [b for _, b in spans]

    def covers(self, pos: int) -> bool:
        i = bisect.bisect_right(self._starts, pos) - 1
        return i >= 0 and pos < self._ends[i]


def _header_signal(text: str, start: int, end: int, lines: list[int], signals: list[tuple[int, int]]) -> bool:
    """Another header signal on the line of the fragment `text[start:end]`, outside the fragment.

    `lines` holds the position of every newline and `signals` the (start, end) of every `_SIGNAL_RE`
    match, both sorted: a signal cannot straddle the fragment (which begins `to=` and runs to white
    space), so the test is a binary search on each side plus a look at the word just before it.
    """
    k = bisect.bisect_left(lines, start)
    line_start = lines[k - 1] + 1 if k > 0 else 0
    line_end = lines[k] if k < len(lines) else len(text)
    i = bisect.bisect_left(signals, (line_start, -1))
    if i < len(signals) and signals[i][1] <= start:  # a signal between the line start and the fragment
        return True
    j = bisect.bisect_left(signals, (end, -1))
    if j < len(signals) and signals[j][0] < line_end:  # a signal after the fragment, on its line
        return True
    cut = max(line_start, start - _SIGNAL_REACH)
    before = ("" if cut == line_start else "\0") + text[cut:start]
    return _SIGNAL_BEFORE_RE.search(before) is not None


def detect_leak(text: str) -> list[Leak]:
    """Control-token spellings and header fragments outside Markdown code, in text order.

    Linear in the text: code spans, newlines and header signals are found once, and each candidate is
    checked against them by binary search.
    """
    code = _Spans([(m.start(), m.end()) for m in _CODE_RE.finditer(text)])
    leaks: list[Leak] = []
    for m in _SPECIAL_RE.finditer(text):
        if not code.covers(m.start()):
            leaks.append(Leak("control_token", m.start(), m.end(), m.group()))
    for m in _GLUED_RE.finditer(text):
        if not code.covers(m.start()):
            leaks.append(Leak("glued_header", m.start(), m.end(), m.group()))
    fragments = [m for m in _RECIPIENT_RE.finditer(text) if not code.covers(m.start())]
    if fragments:
        lines = [m.start() for m in re.finditer("\n", text)]
        signals = [(m.start(), m.end()) for m in _SIGNAL_RE.finditer(text)]
        for m in fragments:
            if _header_signal(text, m.start(), m.end(), lines, signals):
                leaks.append(Leak("header_fragment", m.start(), m.end(), m.group()))
    leaks.sort(key=lambda leak: (leak.start, leak.end))
    return leaks
