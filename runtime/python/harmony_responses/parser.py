"""The reference-compatible incremental parser: same messages, per-token state and error texts.

Strict mode (the default) and non-strict mode behave exactly as openai-harmony 0.0.8, defects
included, so servers can switch without changing behaviour. Tolerant parsing lives elsewhere.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from ._tables import spec as _spec
from .errors import HarmonyError
from .models import Author, Message, Role, TextContent
from .texts import fill

if TYPE_CHECKING:
    from .encoding import HarmonyEncoding

REPLACEMENT = "\ufffd"
_CHANNEL = _spec.SPELLING_CHANNEL
_CONSTRAIN = _spec.SPELLING_CONSTRAIN
_TO = _spec.HEADER_RECIPIENT_KEYWORD
_ROLES = {role.value: role for role in Role}
# Rust's char::is_whitespace (Unicode White_Space); Python's isspace() also counts \x1c-\x1f.
_UNICODE_WS = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
_UNICODE_WS_STR = "".join(sorted(_UNICODE_WS))
_ASCII_WS = re.compile("[ \t\n\x0c\r]+")
_CHANNEL_END = re.compile("[<" + re.escape(_UNICODE_WS_STR) + "]")


class StreamState(Enum):
    """Where the parser is: before a message, in its header, or in its body."""

    EXPECT_START = "ExpectStart"
    HEADER = "Header"
    CONTENT = "Content"


@dataclass(slots=True)
class ParsedHeader:
    """A message header as the reference parses it."""

    author: Author
    recipient: str | None
    channel: str | None
    content_type: str | None

    def to_dict(self) -> dict[str, Any]:
        author: dict[str, Any] = {"role": self.author.role.value}
        if self.author.name is not None:  # the reference leaves an absent name out
            author["name"] = self.author.name
        return {
            "author": author,
            "recipient": self.recipient,
            "channel": self.channel,
            "content_type": self.content_type,
        }


def rust_debug_str(text: str) -> str:
    """A string as Rust's `{:?}` prints it."""
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\0":
            out.append("\\0")
        elif not ch.isprintable() and ch != " ":
            out.append("\\u{" + format(ord(ch), "x") + "}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _rust_trim(text: str) -> str:
    return text.strip(_UNICODE_WS_STR)


def parse_header_text(
    header: str, role: Role | None, parse_recipient_and_type: bool
) -> tuple[ParsedHeader, str | None]:
    """Split a decoded header into author, channel, recipient and content type (reference rules)."""
    channel = None
    idx = header.find(_CHANNEL)
    if idx >= 0:
        after = header[idx + len(_CHANNEL) :]
        m = _CHANNEL_END.search(after)
        end = m.start() if m else len(after)
        if end == 0:
            raise HarmonyError(_spec.ERR_PARSE_NO_CHANNEL_VALUE)
        channel = after[:end]
        header = header[:idx] + after[end:]
    header = _rust_trim(header)
    if _CONSTRAIN in header:
        header = _rust_trim(header.replace(_CONSTRAIN, " " + _CONSTRAIN))
    parts = [p for p in _ASCII_WS.split(header) if p]
    role_text = None
    if role is None:
        if not parts:
            raise HarmonyError(_spec.ERR_PARSE_NO_ROLE)
        role_text = parts[0]
        found = _ROLES.get(role_text)
        if found is None:
            if len(parts) > 1 or parts[0].startswith(_TO):
                parts.pop(0)
                found = Role.TOOL
            else:
                raise HarmonyError(fill(_spec.ERR_PARSE_UNKNOWN_ROLE, role=role_text))
        role = found
    if parts and parts[0] == role.value:
        parts.pop(0)
    recipient = content_type = None
    if parse_recipient_and_type and parts:
        count = len(parts)
        last = parts.pop()
        if last.startswith(_TO):
            recipient = last[len(_TO) :]
        elif count == 1:
            recipient = last
        else:
            content_type = last
            if parts:
                raw = parts.pop()
                recipient = raw[len(_TO) :] if raw.startswith(_TO) else raw
    remaining = " ".join(parts) if parts else None
    author = Author(role=role, name=role_text if role is Role.TOOL else None)
    return ParsedHeader(author, recipient, channel, content_type), remaining


class StreamableParser:
    """Incremental parser over completion tokens, one `process(token)` at a time."""

    def __init__(self, encoding: HarmonyEncoding, role: Role | None, *, strict: bool = True) -> None:
        self._encoding = encoding
        self._strict = strict
        self._next_role: Role | None = Role(role) if role is not None else None
        self._state = StreamState.HEADER if role is not None else StreamState.EXPECT_START
        self._header_tokens: list[int] = []
        self._header: ParsedHeader | None = None
        self._deltas: list[str] = []
        self._tokens: list[int] = []
        self._messages: list[Message] = []
        self._last_delta: str | None = None
        self._undecoded_tokens: list[int] = []
        self._undecoded_bytes = b""
        self._stop = frozenset(_spec.STOP_TOKENS)
        self._token_bytes: dict[int, bytes] = {}
        # Headers repeat within a completion (`<|channel|>analysis`, a call to the same function): each is parsed once.
        self._headers: dict[tuple[tuple[int, ...], Role | None], ParsedHeader] = {}

    # -- feeding ---------------------------------------------------------------------------------

    def process(self, token: int) -> StreamableParser:
        self._tokens.append(token)
        self._step(token)
        return self

    def process_tokens(self, tokens: Iterable[int]) -> StreamableParser:
        """`process` every token, in order: the same result, faster (a whole body is decoded in one call)."""
        tokens = list(tokens)
        n = len(tokens)
        i = 0
        stop = self._stop
        stop_at = [k for k, token in enumerate(tokens) if token in stop]
        stop_at.append(n)
        while i < n:
            if self._state is StreamState.CONTENT and not self._undecoded_tokens and not self._undecoded_bytes:
                j = stop_at[bisect.bisect_left(stop_at, i)]
                if j > i + 1:
                    body = tokens[i:j]
                    try:
                        data = self._encoding.decode_bytes(body)
                    except HarmonyError:
                        pass  # an id outside the vocabulary: token by token
                    else:
                        text = data.decode("utf-8", "replace")
                        self._tokens += body
                        if text:
                            self._deltas.append(text)
                        self._last_delta = None
                        i = j
                        continue
            self.process(tokens[i])
            i += 1
        return self

    def process_eos(self) -> StreamableParser:
        self._step(None)
        return self

    def _bytes_of(self, token: int) -> bytes:
        data = self._token_bytes.get(token)
        if data is None:
            data = self._encoding.decode_bytes([token])
            self._token_bytes[token] = data
        return data

    def _step(self, token: int | None) -> None:
        state = self._state
        if state is StreamState.CONTENT:
            if token is not None and token not in self._stop:
                self._content_token(token)
            else:
                self._finish_content()
        elif state is StreamState.HEADER:
            if token == _spec.TOKEN_MESSAGE:
                tokens = self._header_tokens
                self._state = StreamState.EXPECT_START
                self._header_tokens = []
                self._header = self._parse_header(tokens, self._next_role)
                self._next_role = None
                self._deltas = []
                self._state = StreamState.CONTENT
            elif token is not None and not self._strict and token in self._stop:
                role = self._next_role
                if role is not None and self._header_tokens:
                    text = self._encoding.decode_utf8(self._header_tokens)
                    header, rest = parse_header_text(text, role, False)
                    self._messages.append(self._message(header, rest or ""))
                self._header_tokens = []
                self._state = StreamState.EXPECT_START
                self._next_role = None
            elif token is not None:
                self._header_tokens.append(token)
            else:
                raise HarmonyError(_spec.ERR_PARSE_EOS_IN_HEADER)
        else:
            if token == _spec.TOKEN_START:
                self._header_tokens = []
                self._state = StreamState.HEADER
            elif token is not None:
                raise HarmonyError(fill(_spec.ERR_PARSE_EXPECTED_START, token=token, start=_spec.TOKEN_START))

    def _parse_header(self, tokens: list[int], role: Role | None) -> ParsedHeader:
        key = (tuple(tokens), role)
        header = self._headers.get(key)
        if header is None:
            header = self._headers[key] = self._parse_new_header(tokens, role)
        return header

    def _parse_new_header(self, tokens: list[int], role: Role | None) -> ParsedHeader:
        try:
            text = self._encoding.decode_utf8(tokens)
        except HarmonyError:
            raise HarmonyError("could not decode header") from None
        header, rest = parse_header_text(text, role, True)
        if rest is not None:
            raise HarmonyError(fill(_spec.ERR_PARSE_HEADER_REMAINING, rest=rust_debug_str(rest)))
        return header

    def _content_token(self, token: int) -> None:
        self._undecoded_tokens.append(token)
        try:
            if len(self._undecoded_tokens) == 1:
                data = self._bytes_of(token)
            else:
                data = self._encoding.decode_bytes(self._undecoded_tokens)
        except HarmonyError:
            self._last_delta = None
            return
        pending = self._undecoded_bytes + data if self._undecoded_bytes else data
        self._undecoded_tokens = []
        try:
            text = pending.decode("utf-8")
        except UnicodeDecodeError as exc:
            delta = pending[: exc.start].decode("utf-8")
            rest = pending[exc.start :]
            if delta:
                self._deltas.append(delta)
            if exc.reason == "unexpected end of data":
                self._undecoded_bytes = rest
                self._last_delta = delta or None
            else:
                # the reference keeps the replacement as a piece of its own (state_data re-encodes pieces)
                self._deltas.append(REPLACEMENT)
                self._undecoded_bytes = rest[exc.end - exc.start :]
                self._last_delta = delta + REPLACEMENT
            return
        self._undecoded_bytes = b""
        self._deltas.append(text)
        self._last_delta = text

    def _finish_content(self) -> None:
        header = self._header
        assert header is not None
        text = "".join(self._deltas)
        if self._undecoded_tokens:
            try:
                text += self._encoding.decode_utf8(self._undecoded_tokens)
            except HarmonyError:
                text += REPLACEMENT
        text += self._undecoded_bytes.decode("utf-8", "replace")
        self._messages.append(self._message(header, text))
        self._state = StreamState.EXPECT_START
        self._header = None
        self._deltas = []
        self._last_delta = None
        self._undecoded_tokens = []
        self._undecoded_bytes = b""

    @staticmethod
    def _message(header: ParsedHeader, text: str) -> Message:
        return Message(
            author=header.author.model_copy(),
            content=[TextContent(text=text)],
            channel=header.channel,
            recipient=header.recipient,
            content_type=header.content_type,
        )

    # -- observing -------------------------------------------------------------------------------

    @property
    def current_content(self) -> str:
        return "".join(self._deltas) if self._state is StreamState.CONTENT else ""

    @property
    def current_role(self) -> Role | None:
        if self._state is StreamState.CONTENT and self._header is not None:
            return self._header.author.role
        return self._next_role

    @property
    def current_channel(self) -> str | None:
        return self._header.channel if self._state is StreamState.CONTENT and self._header else None

    @property
    def current_recipient(self) -> str | None:
        return self._header.recipient if self._state is StreamState.CONTENT and self._header else None

    @property
    def current_content_type(self) -> str | None:
        return self._header.content_type if self._state is StreamState.CONTENT and self._header else None

    @property
    def last_content_delta(self) -> str | None:
        return self._last_delta

    @property
    def messages(self) -> list[Message]:
        return [m.model_copy(deep=True) for m in self._messages]

    def take_messages(self) -> list[Message]:
        """The messages parsed so far, handed over (not copied); the parser keeps none of them."""
        messages, self._messages = self._messages, []
        return messages

    @property
    def tokens(self) -> list[int]:
        return list(self._tokens)

    @property
    def state_data(self) -> dict[str, Any]:
        if self._state is StreamState.HEADER:
            return {"state": "Header", "header_tokens": list(self._header_tokens)}
        if self._state is StreamState.CONTENT and self._header is not None:
            content_tokens: list[int] = []
            for delta in self._deltas:  # the reference re-encodes each decoded delta
                content_tokens += self._encoding.encode_ordinary(delta)
            return {"state": "Content", "header": self._header.to_dict(), "content_tokens": content_tokens}
        return {"state": "ExpectStart"}

    @property
    def state(self) -> StreamState:
        return self._state

    def state_json(self) -> str:
        return json.dumps(self.state_data)
