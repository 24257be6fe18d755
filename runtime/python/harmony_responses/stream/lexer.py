"""The event parser's input side: token ids, text or bytes → control terminals and pieces of text.

A lexer knows nothing of messages: it hands each control token it finds to its sink as the grammar's
terminal (`_grammar.CONTROL_TERMINALS`), and everything else as text, with the position where it
began. `TokenLexer` decodes token ids (a character split across tokens is held until it is whole);
`TextLexer` reads text with control tokens spelled out, in any chunks (a chunk's tail that may be
half a spelling is held until the next chunk says).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from .._tables import grammar as _grammar
from .._tables import spec as _spec
from ..errors import HarmonyError

if TYPE_CHECKING:
    from ..encoding import HarmonyEncoding

CONTROL_TERMINALS: dict[int, str] = dict(_grammar.CONTROL_TERMINALS)
SPELLINGS: dict[str, str] = dict(_grammar.CONTROL_SPELLINGS)
"""Terminal → the spelling of its control token."""
_TERMINAL_OF_SPELLING = {spelling: terminal for terminal, spelling in SPELLINGS.items()}
_SPELLING_RE = re.compile("|".join(re.escape(s) for s in sorted(_TERMINAL_OF_SPELLING, key=len, reverse=True)))
_OPEN = _spec.SPELLING_OPEN[0]  # every spelling starts with it: text without it holds no control token
_PREFIXES = frozenset(s[:i] for s in _TERMINAL_OF_SPELLING for i in range(1, len(s)))
_MAX_PREFIX = max(len(s) for s in _TERMINAL_OF_SPELLING) - 1


class Sink(Protocol):
    """Where a lexer sends what it reads."""

    def on_control(self, terminal: str, position: int) -> None: ...

    def on_text(self, text: str, position: int) -> None: ...

    def on_invalid_token(self, token: int, position: int) -> None: ...


class TokenLexer:
    """Token ids → pieces. `position` counts the tokens read so far."""

    __slots__ = ("_encoding", "_sink", "_decoder", "_pending", "_text", "position")

    def __init__(self, encoding: HarmonyEncoding, sink: Sink) -> None:
        self._encoding = encoding
        self._sink = sink
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending = False  # bytes of an unfinished character are held by the decoder
        self._text = encoding.token_texts  # token → its text; None: not whole UTF-8 on its own (shared)
        self.position = 0

    def feed(self, tokens: Iterable[int]) -> None:
        sink = self._sink
        cache = self._text
        for token in tokens:
            terminal = CONTROL_TERMINALS.get(token)
            if terminal is not None:
                if self._pending:
                    self._flush()
                sink.on_control(terminal, self.position)
            else:
                text = None if self._pending else cache.get(token)
                if text is None:
                    text = self._decode(token)
                if text:
                    sink.on_text(text, self.position)
            self.position += 1

    @property
    def pending(self) -> bool:
        """Bytes of an unfinished character are held: the next token's text depends on them."""
        return self._pending

    @property
    def known_texts(self) -> Mapping[int, str | None]:
        """Token → its text, for the tokens decoded so far by any lexer of the encoding (None: not whole UTF-8 on
        its own). A caller's fast path may pass an ordinary token on itself when nothing is `pending`: it then
        counts it with `skip`."""
        return self._text

    def skip(self) -> None:
        """Count one token a caller's fast path took (see `known_texts`)."""
        self.position += 1

    def finish(self) -> None:
        """End of input: a character left unfinished becomes U+FFFD."""
        if self._pending:
            self._flush()

    def _decode(self, token: int) -> str | None:
        cache = self._text
        if token not in cache:
            try:
                data = self._encoding.decode_bytes([token])
            except HarmonyError:
                self._sink.on_invalid_token(token, self.position)
                return None
            try:
                cache[token] = data.decode("utf-8")
            except UnicodeDecodeError:
                cache[token] = None
        cached = cache[token]
        if cached is not None and not self._pending:
            return cached
        text = self._decoder.decode(self._encoding.decode_bytes([token]))
        self._pending = bool(self._decoder.getstate()[0])
        return text

    def _flush(self) -> None:
        text = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        self._pending = False
        if text:
            self._sink.on_text(text, self.position)


class TextLexer:
    """Text with control tokens spelled out (or its UTF-8 bytes) → pieces. `position` counts characters."""

    __slots__ = ("_sink", "_held", "_bytes", "position")

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._held = ""  # a tail that may be the start of a spelling
        self._bytes = codecs.getincrementaldecoder("utf-8")("replace")
        self.position = 0  # characters received, held ones included

    def feed(self, text: str) -> None:
        sink = self._sink
        buf = self._held + text if self._held else text
        start = self.position - len(self._held)
        self.position += len(text)
        self._held = ""
        if _OPEN not in buf:
            if buf:
                sink.on_text(buf, start)
            return
        index = 0
        for match in _SPELLING_RE.finditer(buf):
            if match.start() > index:
                sink.on_text(buf[index : match.start()], start + index)
            sink.on_control(_TERMINAL_OF_SPELLING[match.group()], start + match.start())
            index = match.end()
        tail = buf[index:]
        cut = tail.rfind(_OPEN, max(0, len(tail) - _MAX_PREFIX))
        while cut >= 0 and tail[cut:] not in _PREFIXES:
            cut = tail.rfind(_OPEN, 0, cut)
            if cut < len(tail) - _MAX_PREFIX:
                cut = -1
        if cut >= 0:
            self._held = tail[cut:]
            tail = tail[:cut]
        if tail:
            sink.on_text(tail, start + index)

    def plain(self, text: str) -> bool:
        """For a caller's fast path: whether `text` would reach the sink as exactly one piece of text (no
        control token can start in it and nothing is held). If so the caller may take it itself and `skip`."""
        return not self._held and _OPEN not in text

    def skip(self, text: str) -> None:
        """Count `text`, which a caller's fast path took (see `plain`)."""
        self.position += len(text)

    def feed_bytes(self, data: bytes) -> None:
        """UTF-8 bytes, split anywhere (even inside a character); invalid bytes become U+FFFD."""
        self.feed(self._bytes.decode(data))

    def finish(self) -> None:
        """End of input: bytes of an unfinished character become U+FFFD; a held tail is text after all."""
        tail = self._bytes.decode(b"", final=True)
        if tail:
            self.feed(tail)
        if self._held:
            held, self._held = self._held, ""
            self._sink.on_text(held, self.position - len(held))
