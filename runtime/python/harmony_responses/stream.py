"""The event API for servers: parse Harmony completions from token ids or from text, strictly or leniently.

`HarmonyStreamParser` lexes its input into the terminals of grammar/harmony.lark and drives the
generated LALR tables (`lalr.IncrementalParser`). The lexer is contextual: it asks the parser what it
can take. In a body, text and any control token the grammar does not accept there are TEXT; a header
is split into words (ROLE, TO, WORD) when a control token closes it; outside a message text is TEXT.

Events: `MessageStart` once a header is complete, `ContentDelta` for each piece of body text as it
arrives, `MessageEnd` with the whole message and its terminator, and, in lenient mode, `Recovered`
for every repair (see `RECOVERY_RULES`). Strict mode raises `HarmonyParseError` where the input
leaves the grammar. Lenient mode never raises on model output and never drops text: whatever cannot
be placed in a message is carried by a `Recovered` event.
"""

from __future__ import annotations

import bisect
import codecs
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ._tables import grammar as _grammar
from ._tables import spec as _spec
from .errors import HarmonyError
from .lalr import GrammarError, IncrementalParser
from .models import Author, Message, Role, TextContent

if TYPE_CHECKING:
    from .encoding import HarmonyEncoding

Terminator = Literal["end", "call", "return", "eos"]
Mode = Literal["strict", "lenient"]

_END = _grammar.END
_SPELLING = {tid: s for s, tid in _spec.NAMED_TOKENS.items()}
_CONTROL = dict(_grammar.CONTROL_TERMINALS)
_TERMINAL_SPELLING = {term: _SPELLING[tid] for tid, term in _CONTROL.items()}
_SPELLING_TERMINAL = {s: term for term, s in _TERMINAL_SPELLING.items()}
_STOP_TERMINALS: dict[str, Terminator] = {
    _CONTROL[_spec.TOKEN_END]: "end",
    _CONTROL[_spec.TOKEN_CALL]: "call",
    _CONTROL[_spec.TOKEN_END_DONE_SAMPLING]: "return",
}
_T_START = _CONTROL[_spec.TOKEN_START]
_T_MESSAGE = _CONTROL[_spec.TOKEN_MESSAGE]
_T_CHANNEL = _CONTROL[_spec.TOKEN_CHANNEL]
_T_CONSTRAIN = _CONTROL[_spec.TOKEN_CONSTRAIN]
_CONSTRAIN = _SPELLING[_spec.TOKEN_CONSTRAIN]
_TO = _spec.HEADER_RECIPIENT_KEYWORD
_FUNCTIONS = _spec.HEADER_FUNCTION_NAMESPACE + "."
_ROLES = {role.value: role for role in Role}
_CHANNELS = _spec.CHANNELS
_WORD_RE = re.compile(r"\S+")
_CONTROL_RE = re.compile("|".join(re.escape(s) for s in sorted(_SPELLING_TERMINAL, key=len, reverse=True)))
_PREFIXES = frozenset(s[:i] for s in _SPELLING_TERMINAL for i in range(1, len(s)))
_MAX_PREFIX = max(len(s) for s in _SPELLING_TERMINAL) - 1
_STRIPPED_RE = re.compile(
    "(?:^|" + re.escape(Role.ASSISTANT.value) + ")(" + "|".join(re.escape(c) for c in _CHANNELS) + ")"
    "(?: " + re.escape(_TO) + r"(\S+?))?(?: (json|code))?(?=\S)"
)

RECOVERY_RULES: dict[str, str] = {
    "text_before_start": "text before the first message is set aside; it is in `text`",
    "junk_between_messages": "text between messages is set aside; it is in `text`",
    "extra_stop": "a stop token outside a message is skipped",
    "stray_control": "a <|message|> or <|constrain|> outside a message is skipped",
    "missing_start": "a <|channel|> outside a message opens a message as if `<|start|>ROLE` came first",
    "repeated_start": "a <|start|> inside a header restarts the header; the abandoned words are in `text`",
    "doubled_role": "the role repeated right after the author is dropped",
    "missing_role": "a header without an author gets the expected role (assistant by default)",
    "empty_channel": "<|channel|> without a word leaves the channel unset",
    "doubled_channel": "a second <|channel|> and its word are dropped; the word is in `text`",
    "doubled_recipient": "a second recipient is dropped; the first one is kept, the second is in `text`",
    "stray_header_word": "a header word with no place in the header is dropped; it is in `text`",
    "missing_functions_prefix": "a recipient that is a declared tool name without `functions.` gets the prefix",
    "glued_content_type": "`to=functions.NAMEjson`, NAME a declared tool, is split into recipient and content type",
    "header_cut_by_stop": "a stop token inside a header ends a message with that header and no content",
    "eof_in_header": "the end of the stream inside a header ends a message with that header and no content",
    "stripped_special_tokens": "text without control tokens (`analysis…assistantfinal…`) is split on channel words",
    "unstructured_text": "text with no control token at all after `<|start|>ROLE` becomes that message's body",
    "after_tool_call": "input after the first completed tool call is ignored (stop_after_tool_call); it is in `text`",
    "invented_tool_result": "a tool message written by the model right after its own tool call",
    "invalid_token": "a token id outside the vocabulary is skipped",
}
"""Every repair lenient mode makes, by the `rule` its `Recovered` event carries."""


class HarmonyParseError(HarmonyError):
    """The input leaves the Harmony grammar (strict mode): what came, what was expected, and where."""

    def __init__(self, message: str, position: int, unit: str) -> None:
        self.position = position
        self.unit = unit
        super().__init__(f"{message} at {unit} {position}")


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    """A parsed message: author, header fields, the whole text and how it ended."""

    role: Role
    name: str | None
    channel: str | None
    recipient: str | None
    content_type: str | None
    content: str
    terminator: Terminator

    def to_message(self) -> Message:
        return Message(
            author=Author(role=self.role, name=self.name),
            content=[TextContent(text=self.content)],
            channel=self.channel,
            recipient=self.recipient,
            content_type=self.content_type,
        )

    def to_dict(self) -> dict[str, Any]:
        out = self.to_message().to_dict()
        out["role"] = self.role.value
        out["terminator"] = self.terminator
        return out


@dataclass(frozen=True, slots=True)
class MessageStart:
    """A header is complete: the body follows."""

    index: int
    role: Role
    name: str | None
    channel: str | None
    recipient: str | None
    content_type: str | None
    type: Literal["message_start"] = "message_start"


@dataclass(frozen=True, slots=True)
class ContentDelta:
    """Body text, in input order; the deltas of a message concatenate to its content."""

    index: int
    text: str
    type: Literal["content_delta"] = "content_delta"


@dataclass(frozen=True, slots=True)
class MessageEnd:
    """A message is complete."""

    index: int
    message: ParsedMessage
    terminator: Terminator
    type: Literal["message_end"] = "message_end"


@dataclass(frozen=True, slots=True)
class Recovered:
    """Lenient mode repaired the input: which rule (see RECOVERY_RULES), where, and any text set aside."""

    rule: str
    detail: str
    position: int
    text: str = ""
    type: Literal["recovered"] = "recovered"


Event = MessageStart | ContentDelta | MessageEnd | Recovered


@dataclass
class _Header:
    author: str | None = None
    is_role: bool = False
    recipient: str | None = None
    channel: str | None = None
    content_type: str | None = None
    words: list[str] = field(default_factory=list)


def _tagged(origin: str, children: list[object]) -> object:
    """Reduce callback: what each header rule contributes (other rules carry nothing)."""
    if origin == "header":
        header = _Header()
        for child in children:
            if isinstance(child, tuple):
                setattr(header, child[0], child[1])
                if child[0] == "author":
                    header.is_role = child[2]
        return header
    if origin == "author":
        first = children[0]
        assert isinstance(first, tuple)
        return ("author", first[1], first[0] == "ROLE")
    if origin == "recipient":
        return ("recipient", children[0][1][len(_TO) :])  # type: ignore[index]
    if origin == "channel":
        word = children[1][1]  # type: ignore[index]
        return ("channel", word or None)
    if origin == "content_type":
        if len(children) == 2:
            return ("content_type", _CONSTRAIN + children[1][1])  # type: ignore[index]
        return ("content_type", children[0][1])  # type: ignore[index]
    return None


class HarmonyStreamParser:
    """Feed token ids or text in any chunks; get events back. Call `close()` at the end of the stream.

    `role` is the role of the message the completion starts in (the prompt ended with
    `<|start|>ROLE`), or None when the completion starts with `<|start|>`. `tools` are the declared
    function names (without `functions.`), used to split glued content types in lenient mode.
    """

    def __init__(
        self,
        encoding: HarmonyEncoding,
        role: Role | str | None = Role.ASSISTANT,
        mode: Mode = "strict",
        tools: Iterable[str] | None = None,
        *,
        stop_after_tool_call: bool = False,
    ) -> None:
        if mode not in ("strict", "lenient"):
            raise ValueError(f"mode must be 'strict' or 'lenient', not {mode!r}")
        self._encoding = encoding
        self._lenient = mode == "lenient"
        self._role = Role(role) if role is not None else None
        self._tools = frozenset(tools or ())
        self._stop_after_call = stop_after_tool_call
        self._parser = IncrementalParser(_tagged)
        self._snapshot = self._parser.copy()
        self._out: list[Event] = []
        self._unit = "token"
        self._pos = 0
        self._index = 0
        self._region = "outside"  # outside | header | body | stopped
        self._header_text: list[str] = []
        self._header_pos: list[int] = []  # where each piece of header text began
        self._header_words: list[str] = []
        self._header_terms: list[str] = []
        self._header_virtual = False
        self._skipping_channel = False
        self._header: _Header | None = None
        self._msg_role = Role.ASSISTANT
        self._msg_name: str | None = None
        self._body: list[str] = []
        self._body_run = False
        self._junk: list[str] = []
        self._junk_pos = 0
        self._seen_control = False
        self._last: ParsedMessage | None = None
        self._closed = False
        # token input
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._pending_bytes = False
        self._token_text: dict[int, str | None] = {}
        # text input
        self._byte_decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._held = ""
        self._text_pos = 0
        if self._role is not None:
            self._open_virtual(self._role)

    # -- input -----------------------------------------------------------------------------------

    def feed_tokens(self, tokens: Iterable[int]) -> list[Event]:
        """Feed completion token ids."""
        self._out = out = list[Event]()
        self._unit = "token"
        control = _CONTROL
        cache = self._token_text
        for token in tokens:
            term = control.get(token)
            if term is not None:
                if self._pending_bytes:
                    self._flush_bytes()
                self._control(term)
            else:
                text = None if self._pending_bytes else cache.get(token)
                if text is None:
                    text = self._token_piece(token)
                if text:
                    self._text(text)
            self._pos += 1
        return out

    def _token_piece(self, token: int) -> str | None:
        cache = self._token_text
        if token not in cache:
            try:
                data = self._encoding.decode_bytes([token])
            except HarmonyError:
                if not self._lenient:
                    raise HarmonyParseError(f"invalid token {token}", self._pos, "token") from None
                self._recover("invalid_token", f"token {token} is not in the vocabulary")
                return None
            try:
                cache[token] = data.decode("utf-8")
            except UnicodeDecodeError:
                cache[token] = None
        cached = cache[token]
        if cached is not None and not self._pending_bytes:
            return cached
        text = self._decoder.decode(self._encoding.decode_bytes([token]))
        self._pending_bytes = bool(self._decoder.getstate()[0])
        return text

    def _flush_bytes(self) -> None:
        text = self._decoder.decode(b"", final=True)
        self._decoder.reset()
        self._pending_bytes = False
        if text:
            self._text(text)

    def feed_text(self, text: str) -> list[Event]:
        """Feed detokenized text with control tokens spelled out, in any chunks."""
        self._out = out = list[Event]()
        self._unit = "character"
        buf = self._held + text if self._held else text
        start_pos = self._text_pos - len(self._held)
        self._text_pos += len(text)
        self._held = ""
        if "<" not in buf:
            if buf:
                self._pos = start_pos
                self._text(buf)
            return out
        index = 0
        for match in _CONTROL_RE.finditer(buf):
            if match.start() > index:
                self._pos = start_pos + index
                self._text(buf[index : match.start()])
            self._pos = start_pos + match.start()
            self._control(_SPELLING_TERMINAL[match.group()])
            index = match.end()
        tail = buf[index:]
        cut = tail.rfind("<", max(0, len(tail) - _MAX_PREFIX))
        while cut >= 0 and tail[cut:] not in _PREFIXES:
            cut = tail.rfind("<", 0, cut)
            if cut < len(tail) - _MAX_PREFIX:
                cut = -1
        if cut >= 0:
            self._held = tail[cut:]
            tail = tail[:cut]
        if tail:
            self._pos = start_pos + index
            self._text(tail)
        return out

    def feed_bytes(self, data: bytes) -> list[Event]:
        """Feed UTF-8 bytes of such text, split anywhere (even inside a character)."""
        return self.feed_text(self._byte_decoder.decode(data))

    def close(self) -> list[Event]:
        """End of stream: ends an open message (terminator `eos`), or reports an incomplete one."""
        tail = self._byte_decoder.decode(b"", final=True)
        out = self.feed_text(tail) if tail else list[Event]()
        if self._closed:
            return out
        self._closed = True
        self._out = out
        if self._held:
            held, self._held = self._held, ""
            self._text(held)
        if self._pending_bytes:
            self._flush_bytes()
        if self._region == "stopped":
            self._flush_junk()
            return out
        if self._lenient and not self._seen_control:
            if self._stripped_fallback():
                return out
            if self._region == "header" and self._header_virtual and "".join(self._header_text).strip():
                self._unstructured_text()
                return out
        self._flush_junk()
        if self._region == "header":
            if not self._lenient:
                raise HarmonyParseError("the stream ended inside a message header", self._pos, self._unit)
            self._close_header("eof_in_header", "the stream ended inside a header")
        if self._region == "body":
            self._parser.feed_eof()
            self._end_message("eos")
            return out
        try:
            self._parser.feed_eof()
        except GrammarError as exc:  # only reachable in strict mode
            raise HarmonyParseError(str(exc), self._pos, self._unit) from None
        return out

    # -- lexing ----------------------------------------------------------------------------------

    def _text(self, text: str) -> None:
        region = self._region
        if region == "body":
            if not self._body_run:
                self._parser.feed_token("TEXT")
                self._body_run = True
            self._body.append(text)
            self._out.append(ContentDelta(self._index, text))
        elif region == "header":
            self._header_text.append(text)
            self._header_pos.append(self._pos)
        else:
            if not self._junk:
                self._junk_pos = self._pos
            self._junk.append(text)
            if region == "outside" and not self._lenient:
                raise HarmonyParseError(
                    f"text outside a message: {text[:40]!r}, expected {_TERMINAL_SPELLING[_T_START]}",
                    self._pos,
                    self._unit,
                )

    def _control(self, term: str) -> None:
        self._seen_control = True
        region = self._region
        if region == "body":
            if term in self._parser.expected():  # a terminator
                self._parser.feed_token(term)
                self._end_message(_STOP_TERMINALS[term])
            else:  # the grammar takes no other control token in a body: it is text
                self._text(_TERMINAL_SPELLING[term])
            return
        if region == "header":
            self._header_words_flush()
            self._header_control(term)
            return
        if region == "stopped":
            self._junk.append(_TERMINAL_SPELLING[term])
            return
        self._flush_junk()
        if term == _T_START:
            self._snapshot = self._parser.copy()
            self._parser.feed_token(term)
            self._region = "header"
            self._header_words = []
            self._header_terms = []
            self._header_virtual = False
            return
        if not self._lenient:
            raise HarmonyParseError(
                f"unexpected {_TERMINAL_SPELLING[term]}, expected {_TERMINAL_SPELLING[_T_START]}",
                self._pos,
                self._unit,
            )
        if term in _STOP_TERMINALS:
            self._recover("extra_stop", f"{_TERMINAL_SPELLING[term]} outside a message")
        elif term == _T_CHANNEL:
            role = self._role or Role.ASSISTANT
            self._recover("missing_start", f"{_TERMINAL_SPELLING[term]} outside a message: a {role.value} message")
            self._open_virtual(role)
            self._header_control(term)
        else:
            self._recover("stray_control", f"{_TERMINAL_SPELLING[term]} outside a message")

    def _open_virtual(self, role: Role) -> None:
        self._snapshot = self._parser.copy()
        self._parser.feed_token(_T_START)
        self._parser.feed_token("ROLE", ("ROLE", role.value))
        self._region = "header"
        self._header_words = [role.value]
        self._header_virtual = True
        self._header_terms = ["ROLE"]

    def _header_words_flush(self) -> None:
        if not self._header_text:
            return
        pieces, starts = self._header_text, self._header_pos
        self._header_text, self._header_pos = [], []
        ends = list(itertools.accumulate(len(piece) for piece in pieces))
        control_pos = self._pos
        for match in _WORD_RE.finditer("".join(pieces)):
            index = bisect.bisect_right(ends, match.start())
            offset = match.start() - (ends[index - 1] if index else 0)
            self._pos = starts[index] + (offset if self._unit == "character" else 0)
            self._header_word(match.group())
        self._pos = control_pos

    def _classify(self, word: str) -> str:
        if word in _ROLES and "ROLE" in self._parser.expected():
            return "ROLE"
        if word.startswith(_TO):
            return "TO"
        return "WORD"

    def _header_word(self, word: str) -> None:
        parser = self._parser
        term = self._classify(word)
        if self._lenient:
            words = self._header_words
            if len(words) == 1 and word == words[0] and len(self._header_terms) == 1:
                self._recover("doubled_role", f"role {word!r} repeated", word)
                return
            if self._skip_channel_word(word):
                return
        try:
            parser.feed_token(term, (term, word))
        except GrammarError as exc:
            if not self._lenient:
                raise HarmonyParseError(f"header word {word!r}: {exc}", self._pos, self._unit) from None
            if self._header_terms[-1:] == [_T_CHANNEL]:
                self._recover("empty_channel", "no word after the channel marker")
                parser.feed_token("WORD", ("WORD", ""))
                self._header_terms.append("WORD")
                self._header_word(word)
            elif term == "TO" and self._header_has("TO"):
                self._recover("doubled_recipient", f"second recipient {word!r} dropped", word)
            else:
                self._recover("stray_header_word", f"{word!r} has no place in the header", word)
            return
        self._header_words.append(word)
        self._header_terms.append(term)

    def _header_has(self, term: str) -> bool:
        return term in self._header_terms

    def _skip_channel_word(self, word: str) -> bool:
        if self._skipping_channel:
            self._skipping_channel = False
            self._recover("doubled_channel", f"second channel {word!r} dropped", word)
            return True
        return False

    def _header_control(self, term: str) -> None:
        parser = self._parser
        if term == _T_MESSAGE:
            self._feed_header_end()
            return
        if term in _STOP_TERMINALS:
            if not self._lenient:
                raise HarmonyParseError(f"{_TERMINAL_SPELLING[term]} inside a message header", self._pos, self._unit)
            self._close_header("header_cut_by_stop", f"{_TERMINAL_SPELLING[term]} inside a header", term)
            return
        try:
            parser.feed_token(term)
        except GrammarError as exc:
            if not self._lenient:
                raise HarmonyParseError(
                    f"{_TERMINAL_SPELLING[term]} in a message header: {exc}", self._pos, self._unit
                ) from None
            self._repair_header_control(term)
            return
        self._header_terms.append(term)

    def _repair_header_control(self, term: str) -> None:
        parser = self._parser
        expected = parser.expected()
        if term == _T_START:
            abandoned = " ".join(self._header_words[1:] if self._header_virtual else self._header_words)
            self._recover("repeated_start", "a header restarted", abandoned)
            self._parser = self._snapshot.copy()
            self._parser.feed_token(term)
            self._header_words = []
            self._header_terms = []
            self._header_virtual = False
            return
        if expected == frozenset({"WORD"}) and self._header_terms[-1:] == [_T_CHANNEL]:
            self._recover("empty_channel", "no word after the channel marker")
            parser.feed_token("WORD", ("WORD", ""))
            self._header_terms.append("WORD")
            self._header_control(term)
            return
        if "ROLE" in expected:
            role = self._role or Role.ASSISTANT
            self._recover("missing_role", f"a header without an author: {role.value}")
            parser.feed_token("ROLE", ("ROLE", role.value))
            self._header_words.append(role.value)
            self._header_terms.append("ROLE")
            self._header_control(term)
            return
        if term == _T_CHANNEL and self._header_has(_T_CHANNEL):
            self._skipping_channel = True
            return
        self._recover("stray_header_word", f"{_TERMINAL_SPELLING[term]} has no place in the header")

    def _feed_header_end(self) -> bool:
        """Feed <|message|>, repairing the header first in lenient mode; then announce the message."""
        parser = self._parser
        self._skipping_channel = False
        try:
            parser.feed_token(_T_MESSAGE)
        except GrammarError as exc:
            if not self._lenient:
                raise HarmonyParseError(f"incomplete message header: {exc}", self._pos, self._unit) from None
            expected = parser.expected()
            if "ROLE" in expected:
                self._repair_header_control(_T_MESSAGE)
                return True
            if expected == frozenset({"WORD"}):
                if self._header_terms[-1:] == [_T_CHANNEL]:
                    self._recover("empty_channel", "no word after the channel marker")
                    parser.feed_token("WORD", ("WORD", ""))
                else:
                    self._recover("stray_header_word", "<|constrain|> without a content type")
                    parser.feed_token("WORD", ("WORD", ""))
                parser.feed_token(_T_MESSAGE)
            else:  # cannot happen with this grammar; keep the promise never to raise
                self._recover("stray_header_word", f"header abandoned: {exc}", " ".join(self._header_words))
                self._parser = self._snapshot.copy()
                self._region = "outside"
                return False
        header = self._header_from_parser()
        self._start_body(header)
        return True

    def _header_from_parser(self) -> _Header:
        value = self._parser.value_at(-2)
        assert isinstance(value, _Header)
        return value

    def _start_body(self, header: _Header) -> None:
        if self._lenient and header.recipient in self._tools:
            self._recover("missing_functions_prefix", f"recipient {header.recipient!r} is a declared tool")
            header.recipient = _FUNCTIONS + (header.recipient or "")
        if self._lenient and self._tools and header.recipient and header.recipient.startswith(_FUNCTIONS):
            name = header.recipient[len(_FUNCTIONS) :]
            if name not in self._tools:
                for tool in sorted(self._tools, key=len, reverse=True):
                    rest = name[len(tool) :]
                    if name.startswith(tool) and rest.isalnum():
                        self._recover("glued_content_type", f"{header.recipient!r} split", rest)
                        header.recipient = _FUNCTIONS + tool
                        if header.content_type is None:
                            header.content_type = rest
                        break
        role = _ROLES[header.author or ""] if header.is_role else Role.TOOL
        author_name = None if header.is_role else header.author
        self._header = header
        self._msg_role = role
        self._msg_name = author_name
        last = self._last
        if (
            self._lenient
            and role is Role.TOOL
            and last is not None
            and last.role is Role.ASSISTANT
            and last.recipient is not None
            and header.recipient == Role.ASSISTANT.value
        ):
            self._recover("invented_tool_result", f"{author_name} answered right after the call to {last.recipient}")
        self._region = "body"
        self._body = []
        self._body_run = False
        self._out.append(
            MessageStart(self._index, role, author_name, header.channel, header.recipient, header.content_type)
        )

    def _close_header(self, rule: str, detail: str, stop: str | None = None) -> None:
        self._header_words_flush()
        if self._header_terms == [] and self._header_words == []:
            self._recover(rule, detail + " with no author: dropped")
            self._parser = self._snapshot.copy()
            self._region = "outside"
            return
        self._recover(rule, detail)
        if not self._feed_header_end():
            return
        if stop is not None:
            self._parser.feed_token(stop)
            self._end_message(_STOP_TERMINALS[stop])

    def _end_message(self, terminator: Terminator) -> None:
        header = self._header
        assert header is not None
        message = ParsedMessage(
            self._msg_role,
            self._msg_name,
            header.channel,
            header.recipient,
            header.content_type,
            "".join(self._body),
            terminator,
        )
        self._out.append(MessageEnd(self._index, message, terminator))
        self._index += 1
        self._last = message
        self._header = None
        self._body = []
        self._body_run = False
        self._region = "outside"
        self._header_terms = []
        if (
            self._stop_after_call
            and message.recipient is not None
            and message.role is Role.ASSISTANT
            and terminator != "eos"
        ):
            self._region = "stopped"
            self._junk_pos = self._pos + 1

    # -- lenient helpers -------------------------------------------------------------------------

    def _recover(self, rule: str, detail: str, text: str = "", position: int | None = None) -> None:
        self._out.append(Recovered(rule, detail, self._pos if position is None else position, text))

    def _flush_junk(self) -> None:
        if not self._junk:
            return
        text = "".join(self._junk)
        self._junk = []
        if self._region == "stopped":
            self._recover("after_tool_call", "input after the first tool call", text, self._junk_pos)
        else:
            first = self._last is None
            rule = "text_before_start" if first else "junk_between_messages"
            self._recover(
                rule, "text before the first message" if first else "text between messages", text, self._junk_pos
            )

    def _stripped_fallback(self) -> bool:
        """`analysis…assistantfinal…`: special tokens were stripped by the server; split on channel words."""
        text = "".join(self._junk) + "".join(self._header_text)
        self._header_pos = []
        matches = list(_STRIPPED_RE.finditer(text))
        if not matches or matches[0].start() != 0:
            return False
        self._junk = []
        self._header_text = []
        self._recover("stripped_special_tokens", "no control tokens: split on channel words", "", 0)
        role = self._role or Role.ASSISTANT
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            body = text[match.end() : end]
            channel, recipient, content_type = match.group(1), match.group(2), match.group(3)
            self._out.append(MessageStart(self._index, role, None, channel, recipient, content_type))
            if body:
                self._out.append(ContentDelta(self._index, body))
            message = ParsedMessage(role, None, channel, recipient, content_type, body, "eos")
            self._out.append(MessageEnd(self._index, message, "eos"))
            self._index += 1
        self._region = "outside"
        return True

    def _unstructured_text(self) -> None:
        """No control token and no channel words: the whole text is the body of the expected message."""
        text = "".join(self._header_text)
        self._header_text, self._header_pos = [], []
        role = self._role or Role.ASSISTANT
        self._recover("unstructured_text", "no control tokens: the text is the message body", "", 0)
        self._out.append(MessageStart(self._index, role, None, None, None, None))
        self._out.append(ContentDelta(self._index, text))
        message = ParsedMessage(role, None, None, None, None, text, "eos")
        self._out.append(MessageEnd(self._index, message, "eos"))
        self._index += 1
        self._region = "outside"


def _messages(events: Sequence[Event]) -> list[ParsedMessage]:
    return [e.message for e in events if isinstance(e, MessageEnd)]


def parse_tokens(
    encoding: HarmonyEncoding,
    tokens: Iterable[int],
    role: Role | str | None = Role.ASSISTANT,
    mode: Mode = "strict",
    tools: Iterable[str] | None = None,
) -> list[ParsedMessage]:
    """Parse a whole completion given as token ids."""
    parser = HarmonyStreamParser(encoding, role, mode, tools)
    events = parser.feed_tokens(tokens)
    events += parser.close()
    return _messages(events)


def parse_text(
    encoding: HarmonyEncoding,
    text: str,
    role: Role | str | None = Role.ASSISTANT,
    mode: Mode = "strict",
    tools: Iterable[str] | None = None,
) -> list[ParsedMessage]:
    """Parse a whole completion given as text with control tokens spelled out."""
    parser = HarmonyStreamParser(encoding, role, mode, tools)
    events = parser.feed_text(text)
    events += parser.close()
    return _messages(events)
