"""`HarmonyStreamParser`: Harmony completions → events, from token ids or text, strictly or leniently.

The lexer (`lexer.py`) turns the input into control terminals and text; this module decides, by the
region the parser is in (`Region`), what each piece is: outside a message, text is set aside (lenient)
or an error (strict); in a header it goes to the `HeaderReader` (`header.py`); in a body it is content,
and so is any control token the grammar does not accept there. The generated LALR tables
(`lalr.IncrementalParser`) follow the whole stream, so every structural decision is the grammar's.
Text whose control tokens a detokenizer stripped is split by `stripped.StrippedSplitter` as it streams.

Lenient mode, besides the header repairs of `header.py`: a leading byte order mark is not structure; a
header cut short by a stop token is a call without arguments only when it is a whole header with a
recipient, prose where the header should be is a message's body (reasoning when `<|end|>` ends it, the
answer when `<|return|>` does), and anything else is set aside; header words outside a message followed
by `<|constrain|>` or `<|message|>` open a message; text after the last message that `<|end|>` ended is
the answer; in text input, a stop token spelled inside an open JSON string of a call's arguments is text; a
misspelled control token in a header (`<message|>`) is that token; a header that a stop token or the end of the
stream ends before `<|message|>`, and whose text goes on with JSON, is a message with that body.

Events: `MessageStart` once a header is complete, `ContentDelta` for each piece of body text as it
arrives, `MessageEnd` with the whole message and its terminator, and, in lenient mode, `Recovered`
for every repair (`RECOVERY_RULES`). Strict mode raises `HarmonyParseError` where the input leaves the
grammar. Lenient mode never raises on model output and never drops text: whatever cannot be placed in a
message is carried by a `Recovered` event.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable
from enum import Enum
from typing import TYPE_CHECKING, NoReturn

from .._tables import Role, Terminator
from .._tables import grammar as _grammar
from .._tables import spec as _spec
from ..lalr import GrammarError, IncrementalParser
from ..texts import fill
from .events import (
    ContentDelta,
    Event,
    HarmonyParseError,
    MessageEnd,
    MessageStart,
    Mode,
    ParsedMessage,
    Recovered,
    described,
    messages_of,
)
from .header import (
    CHANNELS,
    FUNCTIONS_PREFIX,
    NEAR_MISS_IN_HEADER,
    ROLES,
    Cut,
    Header,
    HeaderReader,
    apply_declared_tools,
    channel_of,
    reduce_header,
)
from .header import T_CHANNEL as _T_CHANNEL
from .header import T_MESSAGE as _T_MESSAGE
from .header import T_START as _T_START
from .lexer import SPELLINGS, TextLexer, TokenLexer
from .stripped import StrippedHeader, StrippedSplitter, stripped_start

if TYPE_CHECKING:
    from ..encoding import HarmonyEncoding

__all__ = ["FUNCTIONS_PREFIX", "HarmonyStreamParser", "Region", "parse_text", "parse_tokens"]

_TEXT = _grammar.LEXER_TERMINAL_TEXT
_TERMINATOR_OF = {terminal: Terminator(value) for terminal, value in _grammar.STOP_TERMINATORS.items()}
_EOS = Terminator(_spec.PARSE_EOS_TERMINATOR)
_END = Terminator(_spec.TERMINATORS[_spec.TOKEN_END])
_CALL = Terminator(_spec.TERMINATORS[_spec.TOKEN_CALL])
_TURN_END = Terminator(_spec.TERMINATORS[_spec.TOKEN_END_DONE_SAMPLING])  # ends the model's turn
_TO = _spec.HEADER_RECIPIENT_KEYWORD
_BOM = "\ufeff"  # a byte order mark: Unicode's, not the format's
_GT = _spec.SPELLING_CLOSE[-1:]  # every spelling, near-misses too, ends with it


class Region(Enum):
    """Where in the stream the parser is."""

    OUTSIDE = enum.auto()  # between messages
    HEADER = enum.auto()  # after `<|start|>`, before `<|message|>`
    BODY = enum.auto()  # after `<|message|>`, before a stop token
    STRIPPED = enum.auto()  # text whose control tokens were stripped, split on its header words
    STOPPED = enum.auto()  # after the turn's end or a tool call, when asked to stop there


class HarmonyStreamParser:
    """Feed token ids or text in any chunks; get events back. Call `close()` at the end of the stream.

    `role` is the role of the message the completion starts in (the prompt ended with
    `<|start|>ROLE`), or None when the completion starts with `<|start|>`. `tools` are the declared
    function names (without the function namespace), used by the lenient repairs of recipients.
    `stop_after_tool_call` sets aside what follows the first completed tool call by the assistant, and
    `max_tool_calls=N` what follows the N-th (a request's `parallel_tool_calls: false`, `max_tool_calls`).
    `stop_at_turn_end` (by default: in lenient mode, for a completion that follows the prompt's role; a
    strict parser, or one reading from `<|start|>`, reads a whole transcript) reads the input as one turn
    of the model, as a server does: what follows the
    message that `<|return|>` ended is set aside (a sampler stops there), and so is a tool result the model
    wrote itself after its call and everything after it; several calls in a row are all read (an engine
    that does not stop at `<|call|>` lets the model make them).
    """

    __slots__ = (
        "_lenient",
        "_role",
        "_tools",
        "_calls_left",
        "_stop_at_turn_end",
        "_stop_rule",
        "_stop_detail",
        "_lalr",
        "_header",
        "_tokens",
        "_known",
        "_text",
        "_out",
        "_unit",
        "_pos",
        "_index",
        "_region",
        "_current",
        "_msg_role",
        "_msg_name",
        "_body",
        "_body_run",
        "_junk",
        "_junk_pos",
        "_header_pos",
        "_seen_control",
        "_fresh",
        "_stripped_possible",
        "_splitter",
        "_stripped_at",
        "_last",
        "_last_stop",
        "_closed",
        "_actions",
    )

    def __init__(
        self,
        encoding: HarmonyEncoding,
        role: Role | str | None = Role.ASSISTANT,
        mode: Mode = "strict",
        tools: Iterable[str] | None = None,
        *,
        stop_after_tool_call: bool = False,
        stop_at_turn_end: bool | None = None,
        max_tool_calls: int | None = None,
    ) -> None:
        if mode not in ("strict", "lenient"):
            raise ValueError(f"mode must be 'strict' or 'lenient', not {json.dumps(str(mode))}")
        self._lenient = mode == "lenient"
        self._role = Role(role) if role is not None else None
        self._tools = frozenset(tools or ())
        if max_tool_calls is not None and max_tool_calls < 1:
            raise ValueError(f"max_tool_calls must be at least 1, not {max_tool_calls}")
        limits = [n for n in (1 if stop_after_tool_call else None, max_tool_calls) if n is not None]
        self._calls_left = min(limits) if limits else -1  # tool calls still allowed; -1: no limit
        self._stop_at_turn_end = (
            self._lenient and self._role is not None if stop_at_turn_end is None else stop_at_turn_end
        )
        self._stop_rule = _spec.RECOVERY_AFTER_TOOL_CALL
        self._stop_detail = _spec.PARSE_DETAIL_AFTER_TOOL_CALL
        self._lalr = IncrementalParser(reduce_header)
        self._header = HeaderReader(self._lalr, self._lenient, self._role, self._report, self._fail, self._tools)
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
        self._header_pos = 0  # where the open header began
        self._seen_control = False
        self._fresh = True  # nothing read yet
        self._stripped_possible = self._lenient  # no control token and no text ruled out stripped text yet
        self._splitter: StrippedSplitter | None = None
        self._stripped_at = 0  # where the stripped text began (its headers' positions count from there)
        self._last: ParsedMessage | None = None
        self._last_stop: Terminator | None = None  # the stop token read last, message or not
        self._closed = False
        self._actions = _ACTIONS[mode]
        if self._role is not None:
            self._header.open(self._role)
            self._region = Region.HEADER

    # -- input -----------------------------------------------------------------------------------

    @property
    def region(self) -> Region:
        return self._region

    @property
    def seen_control(self) -> bool:
        """Whether a control token has been read (text without any is read as stripped or plain text)."""
        return self._seen_control

    @property
    def tokens_read(self) -> int:
        """How many token ids were fed (`feed_tokens` and `feed_body_token`)."""
        return self._tokens.position

    @property
    def current_content(self) -> str:
        """The text of the body being read so far ("" outside a body)."""
        region = self._region
        return "".join(self._body) if region is Region.BODY or region is Region.STRIPPED else ""

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
        if self._region is Region.STRIPPED:
            self._end_stripped(_EOS)
            return out
        if self._lenient and not self._seen_control:
            if self._stripped_possible and self._try_stripped(final=True):
                self._end_stripped(_EOS)
                return out
            if self._region is Region.HEADER and self._header.virtual and self._header.pending_text().strip():
                self._unstructured_text()
                return out
        if self._lenient and self._region is Region.OUTSIDE and self._junk and self._last_stop is not None:
            self._text_after_messages()
            return out
        self._flush_junk()
        if self._region is Region.HEADER and self._lenient and self._header_without_message(None, end):
            pass  # the body is open: it ends below
        elif self._region is Region.HEADER:
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
        if self._fresh:
            self._fresh = False
            if self._lenient and text.startswith(_BOM):
                self._repair(_spec.RECOVERY_BYTE_ORDER_MARK, position, text=_BOM)
                text = text[len(_BOM) :]
                position += len(_BOM) if self._unit == _spec.PARSE_UNIT_TEXT else 0
                if not text:
                    return
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
            if self._lenient and _GT in text and self._near_miss():
                return
            if self._stripped_possible and not self._seen_control:
                self._try_stripped(final=False)
        elif region is Region.STRIPPED:
            assert self._splitter is not None
            self._stripped_pieces(self._splitter.feed(text))
        else:
            if not self._junk:
                self._junk_pos = position
            self._junk.append(text)
            if region is Region.OUTSIDE:
                if not self._lenient:
                    start = SPELLINGS[_T_START]
                    self._fail(fill(_spec.PARSE_ERR_TEXT_OUTSIDE, dict(text=text[:40], start=start)), position)
                if self._stripped_possible and not self._seen_control:
                    self._try_stripped(final=False)

    def on_control(self, terminal: str, position: int) -> None:
        self._pos = position
        if not self._seen_control:
            self._seen_control = True
            self._fresh = self._stripped_possible = False
        self._actions[self._region][terminal](self, terminal, position)

    # the actions of the spec's `control_triggers` (region × control token → action), as `_ACTIONS` binds them

    def _on_open_header(self, terminal: str, position: int) -> None:
        self._flush_junk()
        self._header_pos = position
        self._header.open()
        self._region = Region.HEADER

    def _on_unexpected_control(self, terminal: str, position: int) -> None:
        values = dict(token=SPELLINGS[terminal], start=SPELLINGS[_T_START])
        self._fail(fill(_spec.PARSE_ERR_UNEXPECTED_CONTROL, values), position)

    def _on_header_without_start(self, terminal: str, position: int) -> None:
        if self._junk_is_header():
            self._header_without_start(terminal, position)
        else:
            self._on_stray_control(terminal, position)

    def _on_stray_control(self, terminal: str, position: int) -> None:
        self._flush_junk()
        self._repair(_spec.RECOVERY_STRAY_CONTROL, token=SPELLINGS[terminal])

    def _on_extra_stop(self, terminal: str, position: int) -> None:
        self._flush_junk()
        self._last_stop = _TERMINATOR_OF[terminal]
        self._repair(_spec.RECOVERY_EXTRA_STOP, token=SPELLINGS[terminal])

    def _on_channel_opens_message(self, terminal: str, position: int) -> None:
        self._flush_junk()
        role = self._role or Role.ASSISTANT
        detail = fill(_spec.PARSE_DETAIL_CHANNEL_OUTSIDE, {"token": SPELLINGS[terminal], "role": role.value})
        self._recover(_spec.RECOVERY_MISSING_START, detail)
        self._header_pos = position
        self._header.open(role)
        self._region = Region.HEADER
        self._header_control(terminal, position)

    def _on_header_control(self, terminal: str, position: int) -> None:
        self._header.flush_words(self._unit == _spec.PARSE_UNIT_TEXT, terminal)
        self._pos = position
        self._header.control(terminal, position)

    def _on_complete_header(self, terminal: str, position: int) -> None:
        self._header.flush_words(self._unit == _spec.PARSE_UNIT_TEXT, terminal)
        self._pos = position
        header = self._header.complete(position)
        if header is None:
            self._region = Region.OUTSIDE
        elif not self._cut_invented_result(header):
            self._start_body(header)

    def _on_close_header(self, terminal: str, position: int) -> None:
        if self._lenient and self._header_without_message(terminal, position):
            return
        self._header.flush_words(self._unit == _spec.PARSE_UNIT_TEXT, terminal)
        self._pos = position
        if not self._lenient:
            self._fail(fill(_spec.PARSE_ERR_STOP_IN_HEADER, {"token": SPELLINGS[terminal]}), position)
        self._close_header(terminal, position)

    def _on_as_text(self, terminal: str, position: int) -> None:
        self.on_text(SPELLINGS[terminal], position)

    def _on_end_message(self, terminal: str, position: int) -> None:
        if self._unit == _spec.PARSE_UNIT_TEXT and self._lenient and self._inside_json_string():
            self._repair(_spec.RECOVERY_JSON_STRING_CONTROL, token=SPELLINGS[terminal])
            self.on_text(SPELLINGS[terminal], position)
            return
        self._lalr.feed_token(terminal)
        self._end_message(_TERMINATOR_OF[terminal])

    def _on_end_stripped(self, terminal: str, position: int) -> None:
        """A control token after all: the stripped text ends here, and the token is read as outside a message."""
        self._end_stripped(_END)
        self._actions[Region.OUTSIDE][terminal](self, terminal, position)

    def _on_end_stripped_at_stop(self, terminal: str, position: int) -> None:
        stop = _TERMINATOR_OF[terminal]
        self._end_stripped(stop)
        self._last_stop = stop
        if self._stop_at_turn_end and stop is _TURN_END:
            self._stop(_spec.RECOVERY_AFTER_TURN_END, _spec.PARSE_DETAIL_AFTER_TURN_END)

    def _on_set_aside(self, terminal: str, position: int) -> None:
        self._junk.append(SPELLINGS[terminal])

    def on_invalid_token(self, token: int, position: int) -> None:
        if not self._lenient:
            raise HarmonyParseError(fill(_spec.PARSE_ERR_INVALID_TOKEN, {"token": token}), position, self._unit)
        detail = fill(_spec.PARSE_DETAIL_INVALID_TOKEN, {"token": token})
        self._out.append(Recovered(_spec.RECOVERY_INVALID_TOKEN, detail, position))

    # -- headers ---------------------------------------------------------------------------------

    def _near_miss(self) -> bool:
        """Lenient: a control token misspelled in the header's text (`<message|>`) is that token; the text
        after it is read on from there (a loop, not a recursion: a header may hold any number of them).
        Whether one was found."""
        header = self._header
        by_character = self._unit == _spec.PARSE_UNIT_TEXT
        found = False
        while self._region is Region.HEADER:
            near_miss = header.find_near_miss()
            if near_miss is None:
                break
            found = True
            index, cut, spelling = near_miss
            rest, at = header.split_piece(index, cut, by_character)
            after, after_at = rest[len(spelling) :], at + (len(spelling) if by_character else 0)
            terminal = NEAR_MISS_IN_HEADER[spelling]
            self._repair(_spec.RECOVERY_CONTROL_SPELLING, at, text=spelling, word=spelling, token=SPELLINGS[terminal])
            self.on_control(terminal, at)
            if not after:
                break
            if self._region is not Region.HEADER:  # a body (or what follows a header cut short) begins
                self.on_text(after, after_at)
                break
            header.add_text(after, after_at)
        return found

    def _header_without_message(self, stop: str | None, position: int) -> bool:
        """Lenient: a header that a stop token (or, `stop` None, the end of the stream) ends before `<|message|>`
        and whose text goes on with JSON is a message whose body that text is. Whether it was one."""
        header = self._header
        at = header.body_start()
        if at is None:
            return False
        body, body_at = header.split_pending(at, self._unit == _spec.PARSE_UNIT_TEXT)
        detail = fill(
            _spec.PARSE_DETAIL_HEADER_WITHOUT_MESSAGE, {"token": SPELLINGS[_T_MESSAGE], "word": body.split()[0]}
        )
        self._recover(_spec.RECOVERY_HEADER_WITHOUT_MESSAGE, detail, "", body_at)
        self.on_control(_T_MESSAGE, body_at)
        self.on_text(body, body_at)
        if stop is not None:
            self.on_control(stop, position)
        return True

    def _header_control(self, terminal: str, position: int) -> None:
        self._actions[Region.HEADER][terminal](self, terminal, position)

    def _drop_header(self, rule: str, detail: str, position: int) -> None:
        """The stream ended inside a header (lenient): no message; the header's words are set aside."""
        self._header.flush_words(self._unit == _spec.PARSE_UNIT_TEXT)
        if not self._header.untouched:  # an empty completion is not a header cut short
            aside = self._header.spoken_words() or self._header.raw_text()
            self._recover(rule, detail, aside, position)
        self._header.abandon()
        self._region = Region.OUTSIDE

    def _close_header(self, stop: str, position: int) -> None:
        """A stop token inside a header (lenient): a call without arguments, a message whose header is missing,
        or nothing (the header's text is set aside), as `HeaderReader.cut` decides (a message whose
        `<|message|>` is missing before its body is found before)."""
        header = self._header
        header.flush_words(self._unit == _spec.PARSE_UNIT_TEXT, stop)
        self._pos = position
        token = SPELLINGS[stop]
        terminator = _TERMINATOR_OF[stop]
        detail = fill(_spec.PARSE_DETAIL_STOP_IN_HEADER, {"token": token})
        cut = header.cut()
        if cut is Cut.MESSAGE:
            self._recover(_spec.RECOVERY_HEADER_CUT_BY_STOP, detail)
            complete = header.complete(position)
            if complete is None:
                self._region = Region.OUTSIDE
                return
            self._start_body(complete)
            self._lalr.feed_token(stop)
            self._end_message(terminator)
            return
        text = header.raw_text()
        header.discard_pending()
        header.abandon()
        self._region = Region.OUTSIDE
        self._last_stop = terminator
        if cut is Cut.NOTHING:
            self._recover(_spec.RECOVERY_HEADER_CUT_BY_STOP, fill(_spec.PARSE_DETAIL_NO_AUTHOR, {"detail": detail}))
        elif cut is Cut.HEADERLESS and terminator is not _CALL:
            channel = _spec.CHANNEL_REASONING if terminator is _END else None
            self._repair(_spec.RECOVERY_HEADERLESS_MESSAGE, self._header_pos, token=token, channel=channel)
            role = self._role or Role.ASSISTANT
            self._emit_whole(ParsedMessage(role, None, channel, None, None, text, terminator))
        else:
            self._recover(_spec.RECOVERY_JUNK_HEADER, detail, text, self._header_pos)
        if self._stop_at_turn_end and terminator is _TURN_END:
            self._stop(_spec.RECOVERY_AFTER_TURN_END, _spec.PARSE_DETAIL_AFTER_TURN_END)

    def _junk_is_header(self) -> bool:
        """Whether the text set aside since the last message reads as header words (a channel word first,
        or a recipient), so that a `<|constrain|>` or `<|message|>` after it closes a header."""
        words = "".join(self._junk).split()
        if not words:
            return False
        return channel_of(words[0])[0] in CHANNELS or any(w.startswith(_TO) for w in words)

    def _header_without_start(self, terminal: str, position: int) -> None:
        """Header words outside a message, then `<|constrain|>` or `<|message|>`: a header whose `<|start|>ROLE`
        (and `<|channel|>`, when the words begin with a channel word) were lost."""
        text, at = "".join(self._junk), self._junk_pos
        self._junk = []
        role = self._role or Role.ASSISTANT
        detail = fill(_spec.PARSE_DETAIL_HEADER_WITHOUT_START, {"token": SPELLINGS[_T_START], "role": role.value})
        self._recover(_spec.RECOVERY_MISSING_START, detail, "", at)
        self._header_pos = at
        self._header.open(role)
        self._region = Region.HEADER
        if channel_of(text.split()[0])[0] in CHANNELS:
            self._header.control(_T_CHANNEL, at)
        self._header.add_text(text, at)
        self._header_control(terminal, position)

    def _cut_invented_result(self, header: Header) -> bool:
        """A message the model wrote in another's name: a tool's result (right after its own call, or not), or
        a user's, system's or developer's message. Reading one turn (`stop_at_turn_end`), it and all that
        follows are set aside; otherwise a tool's result right after a call is only reported."""
        if not self._lenient:
            return False
        own = self._role or Role.ASSISTANT
        last = self._last
        after_call = last is not None and last.role is own and last.recipient is not None
        if header.is_role:
            if not self._stop_at_turn_end or ROLES[header.author or ""] is own:
                return False
            detail = fill(_spec.PARSE_DETAIL_OTHER_AUTHOR, {"author": header.author, "role": own.value})
            rule = _spec.RECOVERY_OTHER_AUTHOR
        else:
            recipient = last.recipient if after_call and last is not None else None
            detail = fill(_spec.PARSE_DETAIL_INVENTED_TOOL_RESULT, {"author": header.author, "recipient": recipient})
            rule = _spec.RECOVERY_INVENTED_TOOL_RESULT
            if not self._stop_at_turn_end:
                if after_call:
                    self._recover(rule, detail)
                return False
        self._junk = [self._header.raw_text(), SPELLINGS[_T_MESSAGE]]
        self._header.abandon()
        self._stop(rule, detail)
        self._junk_pos = self._header_pos
        return True

    def _start_body(self, header: Header) -> None:
        if self._lenient:
            apply_declared_tools(header, self._tools, self._report, self._pos)
        role = ROLES[header.author or ""] if header.is_role else Role.TOOL
        author_name = None if header.is_role else header.author
        self._current = header
        self._msg_role = role
        self._msg_name = author_name
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
        self._last_stop = terminator
        if self._calls_left > 0 and message.recipient is not None and message.role is Role.ASSISTANT:
            self._calls_left -= 1
        if self._calls_left == 0:
            self._stop(_spec.RECOVERY_AFTER_TOOL_CALL, _spec.PARSE_DETAIL_AFTER_TOOL_CALL)
        elif self._stop_at_turn_end and terminator is _TURN_END:
            self._stop(_spec.RECOVERY_AFTER_TURN_END, _spec.PARSE_DETAIL_AFTER_TURN_END)

    def _stop(self, rule: str, detail: str) -> None:
        self._region = Region.STOPPED
        self._stop_rule = rule
        self._stop_detail = detail
        self._junk_pos = self._pos + 1

    def _inside_json_string(self) -> bool:
        """Whether the open body is a call's JSON arguments that end inside a string (text input only: there a
        control token's spelling inside a string is indistinguishable from the token)."""
        header = self._current
        if header is None or header.recipient is None:
            return False
        text = "".join(self._body).lstrip()
        if not text or text[0] not in "{[":
            return False
        inside = escaped = False
        for char in text:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = inside
            elif char == '"':
                inside = not inside
        return inside

    # -- text without control tokens -------------------------------------------------------------

    def _try_stripped(self, final: bool) -> bool:
        """Decide, as early as the text allows, whether a completion without control tokens is stripped text;
        if it is, read it as such from here on."""
        text = "".join(self._junk) + self._header.pending_text()
        body = text.lstrip()
        decision = stripped_start(body, final) if body or final else None
        if decision is None:
            return False
        self._stripped_possible = False
        if not decision:
            return False
        at = self._junk_pos if self._junk else 0
        self._junk = []
        if self._region is Region.HEADER:
            self._header.take_pending_text()
            self._header.abandon()
        self._region = Region.STRIPPED
        self._splitter = StrippedSplitter()
        self._pos = at
        lead = text[: len(text) - len(body)]
        if lead:  # white space before the first header word
            self._repair(_spec.RECOVERY_TEXT_BEFORE_START, at, text=lead)
        self._stripped_at = at + (len(lead) if self._unit == _spec.PARSE_UNIT_TEXT else 0)
        self._stripped_pieces(self._splitter.feed(body))
        return True

    def _stripped_pieces(self, pieces: list[StrippedHeader | str]) -> None:
        for piece in pieces:
            if isinstance(piece, str):
                self._body.append(piece)
                self._out.append(ContentDelta(self._index, piece))
                continue
            if self._current is not None:
                self._end_stripped_message(_END)
            at = self._stripped_at + (piece.offset if self._unit == _spec.PARSE_UNIT_TEXT else 0)
            self._repair(_spec.RECOVERY_STRIPPED_SPECIAL_TOKENS, at, header=piece.text)
            header = Header(None, True, piece.recipient, piece.channel, piece.content_type)
            apply_declared_tools(header, self._tools, self._report, at)
            role = piece.role or self._role or Role.ASSISTANT
            header.author = role.value
            self._current = header
            self._msg_role, self._msg_name, self._body = role, None, []
            start = MessageStart(self._index, role, None, header.channel, header.recipient, header.content_type)
            self._out.append(start)

    def _end_stripped_message(self, terminator: Terminator) -> None:
        self._end_message(terminator)
        if self._region is Region.OUTSIDE:
            self._region = Region.STRIPPED

    def _end_stripped(self, terminator: Terminator) -> None:
        """The stripped text ends (the stream ends, or a control token comes): the open message ends too."""
        assert self._splitter is not None
        self._stripped_pieces(self._splitter.finish())
        if self._current is not None:
            self._end_message(terminator)
        self._splitter = None
        if self._region is Region.STRIPPED:
            self._region = Region.OUTSIDE

    def _unstructured_text(self) -> None:
        """No control token and no channel words: the whole text is the body of the expected message."""
        text = self._header.take_pending_text()
        role = self._role or Role.ASSISTANT
        detail = _spec.PARSE_DETAIL_UNSTRUCTURED_TEXT
        self._recover(_spec.RECOVERY_UNSTRUCTURED_TEXT, detail, "", 0)
        self._header.abandon()
        self._emit_whole(ParsedMessage(role, None, None, None, None, text, _EOS))
        self._region = Region.OUTSIDE

    def _text_after_messages(self) -> None:
        """Text after the last message and no header before the stream ends: after `<|end|>` it is the answer
        (a message with no channel; leading white space set aside); otherwise it is set aside."""
        text, at = "".join(self._junk), self._junk_pos
        self._junk = []
        body = text.lstrip()
        if self._last_stop is _END and body:
            lead = text[: len(text) - len(body)]
            self._repair(_spec.RECOVERY_TEXT_AFTER_END, at, text=lead)
            role = self._role or Role.ASSISTANT
            self._emit_whole(ParsedMessage(role, None, None, None, None, body, _EOS))
        elif self._last_stop is _CALL:
            self._repair(_spec.RECOVERY_TEXT_AFTER_CALL, at, text=text)
        else:
            self._repair(_spec.RECOVERY_JUNK_BETWEEN_MESSAGES, at, text=text)

    def _emit_whole(self, message: ParsedMessage) -> None:
        """Start, content and end events of a message found whole (by a fallback)."""
        m = message
        self._out.append(MessageStart(self._index, m.role, m.name, m.channel, m.recipient, m.content_type))
        if m.content:
            self._out.append(ContentDelta(self._index, m.content))
        self._out.append(MessageEnd(self._index, m, m.terminator))
        self._index += 1
        self._last = m

    # -- repairs and errors ----------------------------------------------------------------------

    def _recover(self, rule: str, detail: str, text: str = "", position: int | None = None) -> None:
        self._out.append(Recovered(rule, detail, self._pos if position is None else position, text))

    def _repair(self, rule: str, position: int | None = None, text: str | None = None, **values: object) -> None:
        """A repair, reported with the detail and the text set aside that the spec's table gives `rule`."""
        self._recover(rule, *described(rule, values, text), self._pos if position is None else position)

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
            self._recover(self._stop_rule, self._stop_detail, text, self._junk_pos)
        elif self._last is None and self._last_stop is None:
            detail = _spec.PARSE_DETAIL_TEXT_BEFORE_START
            self._recover(_spec.RECOVERY_TEXT_BEFORE_START, detail, text, self._junk_pos)
        else:
            detail = _spec.PARSE_DETAIL_JUNK_BETWEEN_MESSAGES
            self._recover(_spec.RECOVERY_JUNK_BETWEEN_MESSAGES, detail, text, self._junk_pos)


_Action = Callable[[HarmonyStreamParser, str, int], None]
_ACTIONS: dict[str, dict[Region, dict[str, _Action]]] = {
    mode: {
        region: {t: getattr(HarmonyStreamParser, "_on_" + action) for t, action in regions[region.name.lower()].items()}
        for region in Region
    }
    for mode, regions in _grammar.CONTROL_TRIGGERS.items()
}
"""The spec's `control_triggers`: mode → region → control terminal → the parser's action method of that name."""


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
