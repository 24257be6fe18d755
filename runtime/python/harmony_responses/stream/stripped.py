"""Completions whose control tokens a detokenizer stripped: `analysis…assistantcommentary to=functions.x json{…}`.

With special tokens skipped, a server sees each header as plain words glued to the text around it: the
first message's channel word, then for each later message the role word and the channel word
(`assistantfinal`), a recipient (`to=NAME`) and a content type. `StrippedSplitter` reads such text in any
chunks and splits it into messages as it streams: it holds back only a tail that may be the start of
the next header (`assista…`) or a header that may still grow (`commentary to=functions.get_wea…`).
A recipient is read whole (letters of any script, digits, `_`, `-` and the namespace separator), never
cut short; a content type glued to a declared name is split off by the caller's declared-tool repair.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._tables import Role
from .._tables import spec as _spec

_ROLE = Role.ASSISTANT.value
_CHANNELS = sorted(_spec.CHANNELS, key=len, reverse=True)
_TO = _spec.HEADER_RECIPIENT_KEYWORD
_SPACE = _spec.HEADER_PART_SEPARATOR
_ALT = "|".join
_NAME = r"[\w\-" + re.escape(_spec.HEADER_NAMESPACE_SEPARATOR) + "]+"
_HEADER_RE = re.compile(
    "(?P<who>" + re.escape(_ROLE) + ")?"
    "(?P<chan>" + _ALT(re.escape(c) for c in _CHANNELS) + ")"
    "(?:" + re.escape(_SPACE + _TO) + "(?P<rcpt>" + _NAME + "))?"
    "(?:" + re.escape(_SPACE) + "(?P<ctype>" + _ALT(re.escape(t) for t in _spec.CONTENT_TYPES) + "))?"
)
_MARKERS = tuple(_ROLE + c for c in _CHANNELS)
_MARKER_RE = re.compile(_ALT(re.escape(m) for m in _MARKERS))
_STARTS = (*_MARKERS, *_CHANNELS)  # what the first header may begin with
_GROWTH = (_SPACE + _TO, *(_SPACE + t for t in _spec.CONTENT_TYPES))  # what may still follow a header
_HOLD = max(len(m) for m in _MARKERS) - 1


@dataclass(frozen=True)
class StrippedHeader:
    """A header read from stripped text; `text` is the header as written (`assistantcommentary to=f json`)."""

    role: Role | None  # the role its words name, or None (the first message, after the prompt's role)
    channel: str
    recipient: str | None
    content_type: str | None
    text: str
    offset: int  # where the header begins, in characters from the start of the stripped text


Piece = StrippedHeader | str  # a header, or body text of the message the last header opened


def stripped_start(text: str, final: bool) -> bool | None:
    """Whether a completion that so far holds `text` and no control token is stripped text: True, False,
    or None while `text` is too short to say (`final`: no more text comes)."""
    match = _HEADER_RE.match(text)
    if match is not None:
        return True if (final or len(text) > match.end()) else None
    if not final and any(start.startswith(text) for start in _STARTS):
        return None
    return False


class StrippedSplitter:
    """Stripped text in → headers and body text out, in order (`feed`, then `finish`)."""

    __slots__ = ("_buf", "_in_header", "_offset")

    def __init__(self) -> None:
        self._buf = ""
        self._in_header = True  # the text starts with a header
        self._offset = 0  # characters taken out of the buffer so far

    def feed(self, text: str) -> list[Piece]:
        self._buf += text
        return self._split(final=False)

    def finish(self) -> list[Piece]:
        return self._split(final=True)

    def _split(self, final: bool) -> list[Piece]:
        out: list[Piece] = []
        buf = self._buf
        while buf:
            if self._in_header:
                match = _HEADER_RE.match(buf)
                if match is None:  # not a header after all: body text of the message before
                    self._in_header = False
                    continue
                rest = buf[match.end() :]
                if not final and (not rest or any(g.startswith(rest) for g in _GROWTH)):
                    break  # the header may still grow
                role = Role(match.group("who")) if match.group("who") else None
                channel, recipient, content_type = match.group("chan", "rcpt", "ctype")
                out.append(StrippedHeader(role, channel, recipient, content_type, match.group(), self._offset))
                self._offset += match.end()
                buf = rest
                self._in_header = False
                continue
            found = _MARKER_RE.search(buf)
            if found is not None:
                if found.start():
                    out.append(buf[: found.start()])
                self._offset += found.start()
                buf = buf[found.start() :]
                self._in_header = True
                continue
            hold = 0 if final else self._held(buf)
            if len(buf) > hold:
                out.append(buf[: len(buf) - hold])
                self._offset += len(buf) - hold
                buf = buf[len(buf) - hold :]
            break
        self._buf = buf
        return out

    @staticmethod
    def _held(buf: str) -> int:
        """How many characters at the end of `buf` may begin the next header."""
        for size in range(min(_HOLD, len(buf)), 0, -1):
            tail = buf[-size:]
            if any(m.startswith(tail) for m in _MARKERS):
                return size
        return 0
