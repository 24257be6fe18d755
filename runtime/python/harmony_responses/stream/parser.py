"""`HarmonyStreamParser`: Harmony completions → events, from token ids or text, strictly or leniently.

The lexer (`lexer.py`) turns the input into control terminals and text; this module decides, by the
region the parser is in (`Region`), what each piece is: outside a message, text is set aside (lenient)
or an error (strict); in a header it goes to the `HeaderReader` (`header.py`); in a body it is content,
and so is any control token the grammar does not accept there. The generated LALR tables
(`lalr.IncrementalParser`) follow the whole stream, so every structural decision is the grammar's.

Events: `MessageStart` once a header is complete, `ContentDelta` for each piece of body text as it
arrives, `MessageEnd` with the whole message and its terminator, and, in lenient mode, `Recovered`
for every repair (`RECOVERY_RULES`). Strict mode raises `HarmonyParseError` where the input leaves the
grammar. Lenient mode never raises on model output and never drops text: whatever cannot be placed in a
message is carried by a `Recovered` event.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from enum import Enum
from typing import TYPE_CHECKING, NoReturn

from .._tables import Role, Terminator
from .._tables import grammar as _grammar
from .._tables import spec as _spec
from ..lalr import GrammarError, IncrementalParser
from .events import (
    ContentDelta,
    Event,
    HarmonyParseError,
    MessageEnd,
    MessageStart,
    Mode,
    ParsedMessage,
    Recovered,
    messages_of,
)
from .header import FUNCTIONS_PREFIX, ROLES, Header, HeaderReader, apply_declared_tools, reduce_header
from .header import T_CHANNEL as _T_CHANNEL
from .header import T_MESSAGE as _T_MESSAGE
from .header import T_START as _T_START
from .lexer import SPELLINGS, TextLexer, TokenLexer

if TYPE_CHECKING:
    from ..encoding import HarmonyEncoding

__all__ = ["FUNCTIONS_PREFIX", "HarmonyStreamParser", "Region", "parse_text", "parse_tokens"]

_TEXT = _grammar.LEXER_TERMINAL_TEXT
_TERMINATOR_OF: dict[str, Terminator] = {
    terminal: Terminator(_spec.TERMINATORS[tid])
    for tid, terminal in _grammar.CONTROL_TERMINALS.items()
    if tid in _spec.TERMINATORS
}
_EOS = Terminator(_spec.PARSE_EOS_TERMINATOR)
_TURN_ENDS = frozenset(Terminator(_spec.TERMINATORS[tid]) for tid in _spec.STOP_TOKENS_FOR_ASSISTANT_ACTIONS)
_STRIPPED_RE = re.compile(
    "(?:^|" + re.escape(Role.ASSISTANT.value) + ")(" + "|".join(re.escape(c) for c in _spec.CHANNELS) + ")"
    "(?: " + re.escape(_spec.HEADER_RECIPIENT_KEYWORD) + r"(\S+?))?"
    "(?: (" + "|".join(re.escape(c) for c in _spec.CONTENT_TYPES) + "))?(?=\\S)"
)


class Region(Enum):
    """Where in the stream the parser is."""

    OUTSIDE = enum.auto()  # between messages
    HEADER = enum.auto()  # after `<|start|>`, before `<|message|>`
    BODY = enum.auto()  # after `<|message|>`, before a stop token
    STOPPED = enum.auto()  # after a tool call or a turn's end, when asked to stop there


class HarmonyStreamParser:
    """Feed token ids or text in any chunks; get events back. Call `close()` at the end of the stream.

    `role` is the role of the message the completion starts in (the prompt ended with
    `<|start|>ROLE`), or None when the completion starts with `<|start|>`. `tools` are the declared
    function names (without the function namespace), used by the lenient repairs of recipients.
    `stop_after_tool_call` sets aside what follows the first completed tool call by the assistant;
    `stop_at_turn_end` what follows any message ended by a token that ends the model's turn (`<|call|>`,
    `<|return|>`): a sampler stops there, so what comes after is not the model's answer.
    """

    def __init__(
        self,
        encoding: HarmonyEncoding,
        role: Role | str | None = Role.ASSISTANT,
        mode: Mode = "strict",
        tools: Iterable[str] | None = None,
        *,
        stop_after_tool_call: bool = False,
        stop_at_turn_end: bool = False,
    ) -> None:
        if mode not in ("strict", "lenient"):
            raise ValueError(f"mode must be 'strict' or 'lenient', not {mode!r}")
        self._lenient = mode == "lenient"
        self._role = Role(role) if role is not None else None
        self._tools = frozenset(tools or ())
        self._stop_after_call = stop_after_tool_call
        self._stop_at_turn_end = stop_at_turn_end
        self._stop_rule = _spec.RECOVERY_AFTER_TOOL_CALL
        self._lalr = IncrementalParser(reduce_header)
        self._header = HeaderReader(self._lalr, self._lenient, self._role, self._report, self._fail)
        self._tokens = TokenLexer(encoding, self)
        self._known = self._tokens.known_texts
        self._text = TextLexer(self)
        self._out: list[Event] = []
        self._unit = _spec.PARSE_UNIT_TOKENS
        self._pos = 0  # where the piece being handled began
        self._index = 0  # the next message's index
        self._region = Region.OUTSIDE
        self._current: Header | None = None  # the header of the message whose body is open
        self._msg_role = Role.ASSISTANT
        self._msg_name: str | None = None
        self._body: list[str] = []
        self._body_run = False  # the body's text has been announced to the grammar
        self._junk: list[str] = []
        self._junk_pos = 0
        self._seen_control = False
        self._last: ParsedMessage | None = None
        self._closed = False
        if self._role is not None:
            self._header.open(self._role)
            self._region = Region.HEADER

    # -- input -----------------------------------------------------------------------------------

    @property
    def region(self) -> Region:
        return self._region

    @property
    def tokens_read(self) -> int:
        """How many token ids were fed (`feed_tokens` and `feed_body_token`)."""
        return self._tokens.position

    @property
    def current_content(self) -> str:
        """The text of the body being read so far ("" outside a body)."""
        return "".join(self._body) if self._region is Region.BODY else ""

    def feed_tokens(self, tokens: Iterable[int]) -> list[Event]:
        """Feed completion token ids; the events they cause."""
        self._out = out = list[Event]()
        self._unit = _spec.PARSE_UNIT_TOKENS
        self._tokens.feed(tokens)
        return out

    def feed_body_token(self, token: int) -> str | None:
        """A fast path for servers: if `token` is plain text continuing the open body, take it and return its
        text (the one `ContentDelta` it would cause is not built); otherwise take nothing and return None,
        and the caller feeds the token with `feed_tokens`. The parser's state is the same either way."""
        lexer = self._tokens
        if not self._body_run or lexer.pending:  # _body_run: inside a body whose text the grammar knows of
            return None
        text = self._known.get(token)
        if text:
            lexer.skip()
            self._body.append(text)
        return text

    def feed_text(self, text: str) -> list[Event]:
        """Feed detokenized text with control tokens spelled out, in any chunks."""
        self._unit = _spec.PARSE_UNIT_TEXT
        lexer = self._text
        if self._body_run and text and lexer.plain(text):  # body text and nothing else: the fast path
            lexer.skip(text)
            self._body.append(text)
            return [ContentDelta(self._index, text)]
        self._out = out = list[Event]()
        lexer.feed(text)
        return out

    def feed_bytes(self, data: bytes) -> list[Event]:
        """Feed UTF-8 bytes of such text, split anywhere (even inside a character)."""
        self._out = out = list[Event]()
        self._unit = _spec.PARSE_UNIT_TEXT
        self._text.feed_bytes(data)
        return out

    def close(self) -> list[Event]:
        """End of stream: ends an open message (terminator `eos`), or reports an incomplete one."""
        self._out = out = list[Event]()
        self._text.finish()
        self._tokens.finish()
        if self._closed:
            return out
        self._closed = True
        end = self._text.position if self._unit == _spec.PARSE_UNIT_TEXT else self._tokens.position
        self._pos = end
        if self._region is Region.STOPPED:
            self._flush_junk()
            return out
        if self._lenient and not self._seen_control:
            if self._stripped_fallback():
                return out
            if self._region is Region.HEADER and self._header.virtual and self._header.pending_text().strip():
                self._unstructured_text()
                return out
        self._flush_junk()
        if self._region is Region.HEADER:
            if not self._lenient:
                self._fail(_spec.PARSE_ERR_EOF_IN_HEADER, end)
            self._drop_header(_spec.RECOVERY_EOF_IN_HEADER, _spec.PARSE_DETAIL_EOF_IN_HEADER, end)
        if self._region is Region.BODY:
            self._lalr.feed_eof()
            self._end_message(_EOS)
            return out
        if self._region is Region.OUTSIDE:
            try:
                self._lalr.feed_eof()
            except GrammarError as exc:  # only reachable in strict mode
                self._fail(str(exc), end)
        return out

    # -- what the lexers find (the lexer's Sink) ------------------------------------------------

    def on_text(self, text: str, position: int) -> None:
        self._pos = position
        region = self._region
        if region is Region.BODY:
            if not self._body_run:
                self._lalr.feed_token(_TEXT)
                self._body_run = True
            self._body.append(text)
            self._out.append(ContentDelta(self._index, text))
        elif region is Region.HEADER:
            self._header.add_text(text, position)
        else:
            if not self._junk:
                self._junk_pos = position
            self._junk.append(text)
            if region is Region.OUTSIDE and not self._lenient:
                start = SPELLINGS[_T_START]
                self._fail(_spec.PARSE_ERR_TEXT_OUTSIDE.format(text=text[:40], start=start), position)

    def on_control(self, terminal: str, position: int) -> None:
        self._pos = position
        self._seen_control = True
        region = self._region
        if region is Region.BODY:
            if terminal in self._lalr.expected():  # a terminator
                self._lalr.feed_token(terminal)
                self._end_message(_TERMINATOR_OF[terminal])
            else:  # the grammar takes no other control token in a body: it is text
                self.on_text(SPELLINGS[terminal], position)
            return
        if region is Region.HEADER:
            self._header_control(terminal, position)
            return
        if region is Region.STOPPED:
            self._junk.append(SPELLINGS[terminal])
            return
        self._flush_junk()
        if terminal == _T_START:
            self._header.open()
            self._region = Region.HEADER
            return
        if not self._lenient:
            self._fail(
                _spec.PARSE_ERR_UNEXPECTED_CONTROL.format(token=SPELLINGS[terminal], start=SPELLINGS[_T_START]),
                position,
            )
        token = SPELLINGS[terminal]
        if terminal in _TERMINATOR_OF:
            self._recover(_spec.RECOVERY_EXTRA_STOP, _spec.PARSE_DETAIL_STOP_OUTSIDE.format(token=token))
        elif terminal == _T_CHANNEL:
            role = self._role or Role.ASSISTANT
            detail = _spec.PARSE_DETAIL_CHANNEL_OUTSIDE.format(token=token, role=role.value)
            self._recover(_spec.RECOVERY_MISSING_START, detail)
            self._header.open(role)
            self._region = Region.HEADER
            self._header_control(terminal, position)
        else:
            self._recover(_spec.RECOVERY_STRAY_CONTROL, _spec.PARSE_DETAIL_CONTROL_OUTSIDE.format(token=token))

    def on_invalid_token(self, token: int, position: int) -> None:
        if not self._lenient:
            raise HarmonyParseError(_spec.PARSE_ERR_INVALID_TOKEN.format(token=token), position, self._unit)
        detail = _spec.PARSE_DETAIL_INVALID_TOKEN.format(token=token)
        self._out.append(Recovered(_spec.RECOVERY_INVALID_TOKEN, detail, position))

    # -- headers ---------------------------------------------------------------------------------

    def _header_control(self, terminal: str, position: int) -> None:
        self._header.flush_words(self._unit == _spec.PARSE_UNIT_TEXT)
        self._pos = position
        if terminal == _T_MESSAGE:
            header = self._header.complete(position)
            if header is None:
                self._region = Region.OUTSIDE
            else:
                self._start_body(header)
            return
        if terminal in _TERMINATOR_OF:
            token = SPELLINGS[terminal]
            if not self._lenient:
                self._fail(_spec.PARSE_ERR_STOP_IN_HEADER.format(token=token), position)
            detail = _spec.PARSE_DETAIL_STOP_IN_HEADER.format(token=token)
            self._close_header(_spec.RECOVERY_HEADER_CUT_BY_STOP, detail, terminal, position)
            return
        self._header.control(terminal, position)

    def _drop_header(self, rule: str, detail: str, position: int) -> None:
        """The stream ended inside a header (lenient): no message; the header's words are set aside."""
        self._header.flush_words(self._unit == _spec.PARSE_UNIT_TEXT)
        if not self._header.untouched:  # an empty completion is not a header cut short
            self._recover(rule, detail, self._header.spoken_words(), position)
        self._header.abandon()
        self._region = Region.OUTSIDE

    def _close_header(self, rule: str, detail: str, stop: str, position: int) -> None:
        """A stop token inside a header (lenient): a message with that header and no content."""
        self._header.flush_words(self._unit == _spec.PARSE_UNIT_TEXT)
        self._pos = position
        if self._header.empty:
            self._recover(rule, _spec.PARSE_DETAIL_NO_AUTHOR.format(detail=detail))
            self._header.abandon()
            self._region = Region.OUTSIDE
            return
        self._recover(rule, detail)
        header = self._header.complete(position)
        if header is None:
            self._region = Region.OUTSIDE
            return
        self._start_body(header)
        self._lalr.feed_token(stop)
        self._end_message(_TERMINATOR_OF[stop])

    def _start_body(self, header: Header) -> None:
        if self._lenient:
            apply_declared_tools(header, self._tools, self._report, self._pos)
        role = ROLES[header.author or ""] if header.is_role else Role.TOOL
        author_name = None if header.is_role else header.author
        self._current = header
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
            detail = _spec.PARSE_DETAIL_INVENTED_TOOL_RESULT.format(author=author_name, recipient=last.recipient)
            self._recover(_spec.RECOVERY_INVENTED_TOOL_RESULT, detail)
        self._region = Region.BODY
        self._body = []
        self._body_run = False
        self._out.append(
            MessageStart(self._index, role, author_name, header.channel, header.recipient, header.content_type)
        )

    def _end_message(self, terminator: Terminator) -> None:
        header = self._current
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
        self._current = None
        self._body = []
        self._body_run = False
        self._region = Region.OUTSIDE
        if terminator is _EOS:
            return
        if self._stop_after_call and message.recipient is not None and message.role is Role.ASSISTANT:
            self._stop(_spec.RECOVERY_AFTER_TOOL_CALL)
        elif self._stop_at_turn_end and terminator in _TURN_ENDS:
            self._stop(_spec.RECOVERY_AFTER_TURN_END)

    def _stop(self, rule: str) -> None:
        self._region = Region.STOPPED
        self._stop_rule = rule
        self._junk_pos = self._pos + 1

    # -- repairs and errors ----------------------------------------------------------------------

    def _recover(self, rule: str, detail: str, text: str = "", position: int | None = None) -> None:
        self._out.append(Recovered(rule, detail, self._pos if position is None else position, text))

    def _report(self, rule: str, detail: str, text: str, position: int) -> None:
        self._out.append(Recovered(rule, detail, position, text))

    def _fail(self, message: str, position: int) -> NoReturn:
        raise HarmonyParseError(message, position, self._unit)

    def _flush_junk(self) -> None:
        if not self._junk:
            return
        text = "".join(self._junk)
        self._junk = []
        if self._region is Region.STOPPED:
            stopped_by_call = self._stop_rule == _spec.RECOVERY_AFTER_TOOL_CALL
            detail = _spec.PARSE_DETAIL_AFTER_TOOL_CALL if stopped_by_call else _spec.PARSE_DETAIL_AFTER_TURN_END
            self._recover(self._stop_rule, detail, text, self._junk_pos)
        elif self._last is None:
            detail = _spec.PARSE_DETAIL_TEXT_BEFORE_START
            self._recover(_spec.RECOVERY_TEXT_BEFORE_START, detail, text, self._junk_pos)
        else:
            detail = _spec.PARSE_DETAIL_JUNK_BETWEEN_MESSAGES
            self._recover(_spec.RECOVERY_JUNK_BETWEEN_MESSAGES, detail, text, self._junk_pos)

    def _stripped_fallback(self) -> bool:
        """`analysis…assistantfinal…`: special tokens were stripped by the server; split on channel words."""
        text = "".join(self._junk) + self._header.pending_text()
        matches = list(_STRIPPED_RE.finditer(text))
        if not matches or matches[0].start() != 0:
            return False
        self._junk = []
        self._header.take_pending_text()
        detail = _spec.PARSE_DETAIL_STRIPPED_SPECIAL_TOKENS
        self._recover(_spec.RECOVERY_STRIPPED_SPECIAL_TOKENS, detail, "", 0)
        role = self._role or Role.ASSISTANT
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            body = text[match.end() : end]
            channel, recipient, content_type = match.group(1), match.group(2), match.group(3)
            self._emit_whole(ParsedMessage(role, None, channel, recipient, content_type, body, _EOS))
        self._region = Region.OUTSIDE
        return True

    def _unstructured_text(self) -> None:
        """No control token and no channel words: the whole text is the body of the expected message."""
        text = self._header.take_pending_text()
        role = self._role or Role.ASSISTANT
        detail = _spec.PARSE_DETAIL_UNSTRUCTURED_TEXT
        self._recover(_spec.RECOVERY_UNSTRUCTURED_TEXT, detail, "", 0)
        self._emit_whole(ParsedMessage(role, None, None, None, None, text, _EOS))
        self._region = Region.OUTSIDE

    def _emit_whole(self, message: ParsedMessage) -> None:
        """Start, content and end events of a message found whole (by a fallback)."""
        m = message
        self._out.append(MessageStart(self._index, m.role, m.name, m.channel, m.recipient, m.content_type))
        if m.content:
            self._out.append(ContentDelta(self._index, m.content))
        self._out.append(MessageEnd(self._index, m, m.terminator))
        self._index += 1


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
    return messages_of(events)


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
    return messages_of(events)
