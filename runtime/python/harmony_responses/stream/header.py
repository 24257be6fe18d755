"""One message header: its text split into words, the words fed to the grammar, and the repairs of lenient mode.

`HeaderReader` collects a header's text until a control token closes a stretch of it, splits it into
words at whitespace and feeds each word to the shared LALR parser as a terminal: the lexer terminal
for a role (when a role can come there), for a recipient (`to=…`), or any other word. Control tokens
inside the header (`<|channel|>`, `<|constrain|>`, another `<|start|>`) and the closing `<|message|>`
are fed too. In strict mode whatever leaves the grammar raises.

In lenient mode a word is read by what it can be where it stands, knowing which control token ends its
stretch of text, and whatever has no place in the header is set aside, never made a header part:

- the author: a role; a role repeated or glued to a channel word (`assistantassistant`,
  `assistantfinal`); a tool's name (namespaced, or a built-in namespace); any
  other word is reported and the message is the expected role's;
- the channel: the word after `<|channel|>`, with punctuation or dashes glued to it dropped
  (`––commentary`, `final.`); a second `<|channel|>` replaces the first (the later one wins), unless a
  content type word follows it (`<|channel|>code`: the content type); a `<|channel|>` after the content type
  still names the channel; a channel the format does not know is kept and reported (its text is hidden, as
  reasoning is);
- the recipient: a `to=` word anywhere after the author; a second one replaces the first (the later one
  wins); a declared function name with spaces in it is read whole; an assistant message addressed to
  the assistant has none and is reasoning unless it is the answer; the function's name written as the
  content type (`<|constrain|>functions.x`) is the recipient;
- the content type: a known content type, or the word after `<|constrain|>` (a channel word spliced in
  there is dropped: `<|constrain|>analysis code` is `code`);
- anything else (free text before `<|channel|>`, prose after the channel word) is set aside.

Each repair is reported (`report(rule, detail, text, position)`). `complete()` gives the finished
`Header`; `cut()` says what a header cut short by a stop token is (`Cut`).
"""

from __future__ import annotations

import bisect
import enum
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NoReturn

from .._tables import Role
from .._tables import grammar as _grammar
from .._tables import spec as _spec
from ..lalr import GrammarError, IncrementalParser
from ..texts import fill
from .events import described
from .lexer import CONTROL_TERMINALS, SPELLINGS

Report = Callable[[str, str, str, int], None]  # rule, detail, text set aside, position
Fail = Callable[[str, int], NoReturn]  # message, position: raises

T_ROLE = _grammar.LEXER_TERMINAL_ROLE
T_TO = _grammar.LEXER_TERMINAL_RECIPIENT
T_WORD = _grammar.LEXER_TERMINAL_WORD
T_START = CONTROL_TERMINALS[_spec.TOKEN_START]
T_MESSAGE = CONTROL_TERMINALS[_spec.TOKEN_MESSAGE]
T_CHANNEL = CONTROL_TERMINALS[_spec.TOKEN_CHANNEL]
T_CONSTRAIN = CONTROL_TERMINALS[_spec.TOKEN_CONSTRAIN]
_TO = _spec.HEADER_RECIPIENT_KEYWORD
_CONSTRAIN = _spec.SPELLING_CONSTRAIN
_SEPARATOR = _spec.HEADER_NAMESPACE_SEPARATOR
FUNCTIONS_PREFIX = _spec.HEADER_FUNCTION_NAMESPACE + _SEPARATOR
ROLES = {role.value: role for role in Role}
CHANNELS = frozenset(_spec.CHANNELS)
CONTENT_TYPES = {ct.lower(): ct for ct in _spec.CONTENT_TYPES}
BUILTIN_NAMESPACES = frozenset(_spec.TOOL_NAMESPACES)
_WORD_RE = re.compile(r"\S+")
_PARTS = frozenset((_grammar.RULE_AUTHOR, _grammar.RULE_RECIPIENT, _grammar.RULE_CHANNEL, _grammar.RULE_CONTENT_TYPE))
_GLUED_ROLE_RE = re.compile(_spec.HEADER_GLUED_ROLE_PATTERN)
_EDGE_PUNCTUATION_RE = re.compile(r"^[\W_]*(.*?)[\W_]*$", re.DOTALL)
# Where the body of a header without `<|message|>` begins: a word no header word begins with (JSON).
_BODY_START_RE = re.compile(r"(?:^|(?<=\s))[{\[\"]")
NEAR_MISS_IN_HEADER: dict[str, str] = dict(_grammar.NEAR_MISS_SPELLINGS)
"""Near-miss spellings read as their control token inside a header (the spec's `near_miss_spellings`)."""
NEAR_MISS_IN_HEADER_RE = re.compile("|".join(re.escape(s) for s in sorted(NEAR_MISS_IN_HEADER, key=len, reverse=True)))
_NEAR_MISS_LONGEST = max(len(s) for s in NEAR_MISS_IN_HEADER)


@dataclass
class Header:
    """What a complete header says: its author (a role's value, or a tool's name), recipient, channel, type."""

    author: str | None = None
    is_role: bool = False
    recipient: str | None = None
    channel: str | None = None
    content_type: str | None = None


class Cut(enum.Enum):
    """What a header cut short by a stop token is, in lenient mode."""

    MESSAGE = enum.auto()  # a whole header with a recipient: a call with no arguments
    HEADERLESS = enum.auto()  # prose where the header should be, and no header part: a message's body
    JUNK = enum.auto()  # no message: its text is set aside
    NOTHING = enum.auto()  # nothing was read for it


Word = tuple[str, str]  # (terminal, text): the value a lexer terminal carries on the parser's stack


def reduce_header(origin: str, children: list[object]) -> object:
    """The LALR parser's reduce callback: what each header rule contributes (other rules carry nothing)."""
    if origin == _grammar.RULE_HEADER:
        header = Header()
        for child in children:
            if isinstance(child, tuple) and child[0] in _PARTS:
                part, value, is_role = child
                if part == _grammar.RULE_AUTHOR:
                    header.author, header.is_role = value, is_role
                elif part == _grammar.RULE_RECIPIENT:
                    header.recipient = value
                elif part == _grammar.RULE_CHANNEL:
                    header.channel = value
                else:
                    header.content_type = value
        return header
    words = [c for c in children if isinstance(c, tuple)]
    if origin == _grammar.RULE_AUTHOR:
        terminal, text = words[0]
        return (origin, text, terminal == T_ROLE)
    if origin == _grammar.RULE_RECIPIENT:
        return (origin, words[0][1][len(_TO) :], False)
    if origin == _grammar.RULE_CHANNEL:
        return (origin, words[0][1] or None, False)
    if origin == _grammar.RULE_CONTENT_TYPE:
        constrained = len(children) == 2  # `<|constrain|>` and a word
        return (origin, (_CONSTRAIN if constrained else "") + words[0][1], False)
    return None


def channel_of(word: str) -> tuple[str, bool]:
    """A channel word as a model wrote it → the known channel it names and whether anything was dropped.

    `––commentary`, `final.`, `Analysis`, `commentary?commentary?` name a channel; a word naming none is kept
    as is.
    """
    if word in CHANNELS:
        return word, False
    match = _EDGE_PUNCTUATION_RE.match(word)
    core = (match.group(1) if match else word).lower()
    if core in CHANNELS:
        return core, True
    for channel in CHANNELS:
        if core.startswith(channel) and not core[len(channel)].isalnum():
            return channel, True
    return word, False


def role_of(word: str) -> tuple[Role, str | None, str | None] | None:
    """`assistantassistant` → (assistant, None, None); `assistantfinal` → (assistant, final, None);
    `assistantto=functions.f` → (assistant, None, `to=functions.f`); None if the word names no role."""
    match = _GLUED_ROLE_RE.fullmatch(word)
    if match is None:
        return None
    return ROLES[match.group(1)], match.group(2), match.group(3)


class HeaderReader:
    """Reads headers into the shared LALR parser, one at a time (`open` starts the next one)."""

    def __init__(
        self,
        lalr: IncrementalParser,
        lenient: bool,
        role: Role | None,
        report: Report,
        fail: Fail,
        tools: Iterable[str] = (),
    ) -> None:
        self._lalr = lalr
        self._lenient = lenient
        self._role = role  # the completion's first role, and the role a header without an author gets
        self._report = report
        self._fail = fail
        self._tools = frozenset(tools)
        self._spaced_tools = {" ".join(t.split()): t for t in self._tools if len(t.split()) > 1}
        self._snapshot = lalr.copy()  # the parser before the header's <|start|>
        self._text: list[str] = []  # header text not yet split into words
        self._starts: list[int] = []  # where each piece of that text began
        self._raw: list[str] = []  # the header as the input gave it: its text and its control tokens' spellings
        self._words: list[str] = []  # words fed to the parser
        self._said: list[str] = []  # every word the input gave for this header, placed or set aside
        self._terms: list[str] = []  # and their terminals (control terminals too)
        self._virtual = False  # the header's <|start|>ROLE came from the prompt, not the input
        self._pending: list[tuple[str, str, str, int]] = []  # repairs reported when the header is settled
        self._fed_recipient: str | None = None  # the recipient the grammar took
        self._fed_channel: str | None = None  # the channel the grammar took
        self._recipient: str | None = None  # lenient: a recipient the grammar could not take where it stood
        self._channel: str | None = None  # lenient: a channel that replaced the one the grammar took
        self._replacing_channel = False  # a second <|channel|> came: its word replaces the channel
        self._late_channel = False  # a <|channel|> after the content type came: its word is the channel
        self._set_aside = False  # lenient: some of the header's text had no place in it
        self._before: str | None = None  # the control token that ends the stretch of text being placed

    # -- state -----------------------------------------------------------------------------------

    @property
    def virtual(self) -> bool:
        """Whether this header's `<|start|>ROLE` was the prompt's (no control token read for it)."""
        return self._virtual

    @property
    def empty(self) -> bool:
        """No word and no control token fed since `<|start|>`."""
        return not self._terms and not self._words

    @property
    def untouched(self) -> bool:
        """Nothing was read for this header: it is the prompt's `<|start|>ROLE` alone."""
        return self._virtual and self._terms == [T_ROLE] and len(self._words) == 1 and not self._raw

    def spoken_words(self) -> str:
        """The header's words as the input gave them (not the role a completion starts in)."""
        return " ".join(self._said)

    def pending_text(self) -> str:
        return "".join(self._text)

    def raw_text(self) -> str:
        """The header as the input gave it so far: its text, with its control tokens spelled out."""
        return "".join(self._raw)

    def take_pending_text(self) -> str:
        """The header text not yet split into words, taken out of the header."""
        text = "".join(self._text)
        self._text, self._starts = [], []
        return text

    # -- input -----------------------------------------------------------------------------------

    def open(self, role: Role | None = None) -> None:
        """A header begins: after `<|start|>` (fed here), or, given `role`, as if `<|start|>ROLE` had come."""
        self._snapshot = self._lalr.copy()
        self._lalr.feed_token(T_START)
        self._text, self._starts, self._pending, self._said = [], [], [], []
        self._recipient = self._channel = self._fed_recipient = self._fed_channel = None
        self._replacing_channel = self._late_channel = self._set_aside = False
        if role is None:
            self._words, self._terms, self._virtual = [], [], False
            self._raw = [SPELLINGS[T_START]]
            return
        self._lalr.feed_token(T_ROLE, (T_ROLE, role.value))
        self._words, self._terms, self._virtual, self._raw = [role.value], [T_ROLE], True, []

    def abandon(self) -> None:
        """Forget the header: the parser goes back to where it was before the header's `<|start|>`."""
        self._lalr.restore(self._snapshot)
        self._text, self._starts, self._words, self._terms, self._pending, self._raw = [], [], [], [], [], []
        self._said = []

    def body_start(self) -> int | None:
        """Lenient: where, in the text not yet split into words, a word begins that no header word begins
        with (JSON), when the header before it has a channel or a recipient (`<|channel|>final {"a": 1}`)."""
        text = "".join(self._text)
        match = _BODY_START_RE.search(text)
        if match is None:
            return None
        before = text[: match.start()]
        if T_CHANNEL in self._terms or self._fed_recipient or self._recipient or _TO in before:
            return match.start()
        return None

    def split_pending(self, at: int, by_character: bool) -> tuple[str, int]:
        """Take the text not yet split into words from `at` (an offset into it) out of the header: that text,
        and the position it began at (its character, or the token it began in)."""
        offset = 0
        for i, piece in enumerate(self._text):
            if offset + len(piece) > at:
                return self.split_piece(i, at - offset, by_character)
            offset += len(piece)
        return "", 0

    def find_near_miss(self) -> tuple[int, int, str] | None:
        """The first near-miss spelling of a control token that ends in the last piece of the text not yet split
        into words (one ending earlier was found when its own piece came): the piece it begins in, where it
        begins there, and the spelling. Only the last piece and the few characters before it are searched."""
        pieces = self._text
        need = len(pieces[-1]) + _NEAR_MISS_LONGEST - 1 if pieces else 0
        first, got = len(pieces), 0
        while first > 0 and got < need:
            first -= 1
            got += len(pieces[first])
        window = pieces[first] if first == len(pieces) - 1 else "".join(pieces[first:])
        match = NEAR_MISS_IN_HEADER_RE.search(window)
        if match is None:
            return None
        index, cut = first, match.start()
        while cut >= len(pieces[index]):
            cut -= len(pieces[index])
            index += 1
        return index, cut, match.group()

    def split_piece(self, index: int, cut: int, by_character: bool) -> tuple[str, int]:
        """Take the text not yet split into words from offset `cut` of its piece `index` on out of the header:
        that text, and the position it began at (its character, or the token it began in)."""
        pieces, starts = self._text, self._starts
        piece = pieces[index]
        rest = piece[cut:] if index == len(pieces) - 1 else "".join([piece[cut:], *pieces[index + 1 :]])
        position = starts[index] + (cut if by_character else 0)
        self._text = [*pieces[:index], piece[:cut]] if cut else pieces[:index]
        self._starts = starts[: index + 1] if cut else starts[:index]
        remove = len(rest)  # the raw header ends with the same text
        while remove and self._raw:
            last = self._raw[-1]
            if len(last) <= remove:
                self._raw.pop()
                remove -= len(last)
            else:
                self._raw[-1] = last[: len(last) - remove]
                remove = 0
        return rest, position

    def add_text(self, text: str, position: int) -> None:
        self._text.append(text)
        self._starts.append(position)
        self._raw.append(text)

    def flush_words(self, by_character: bool, before: str | None = None) -> None:
        """Split the collected text into words and feed them; a word's position is where it starts
        (its character, or the token it starts in). `before` is the control token that ends the text
        (None: the end of the stream); lenient mode reads the words knowing it."""
        if not self._text:
            return
        pieces, starts = self._text, self._starts
        self._text, self._starts = [], []
        joined = pieces[0] if len(pieces) == 1 else "".join(pieces)
        ends = list(itertools.accumulate(len(piece) for piece in pieces))
        if not self._lenient:
            for match in _WORD_RE.finditer(joined):
                self._said.append(match.group())
                at = match.start()
                index = bisect.bisect_right(ends, at)
                offset = at - (ends[index - 1] if index else 0)
                self._strict_word(match.group(), starts[index] + (offset if by_character else 0))
            return
        spans = [(m.start(), m.end()) for m in _WORD_RE.finditer(joined)]
        if self._spaced_tools:
            spans = self._join_spaced_names(joined, spans)

        def position(at: int) -> int:
            index = bisect.bisect_right(ends, at)
            offset = at - (ends[index - 1] if index else 0)
            return starts[index] + (offset if by_character else 0)

        aside: tuple[int, int] | None = None  # a run of words set aside, reported as the text it spans
        for start, end in spans:
            self._said.append(joined[start:end])
            if self._word(joined[start:end], position(start), before):
                aside = (aside[0] if aside else start, end)
            elif aside:
                self._set_text_aside(joined[aside[0] : aside[1]], position(aside[0]))
                aside = None
        if aside:
            self._set_text_aside(joined[aside[0] : aside[1]], position(aside[0]))

    def control(self, terminal: str, position: int) -> None:
        """`<|channel|>`, `<|constrain|>` or `<|start|>` inside the header."""
        self._raw.append(SPELLINGS[terminal])
        try:
            self._lalr.feed_token(terminal)
        except GrammarError as exc:
            if not self._lenient:
                self._fail(
                    fill(_spec.PARSE_ERR_CONTROL_IN_HEADER, {"token": SPELLINGS[terminal], "reason": str(exc)}),
                    position,
                )
            self._repair_control(terminal, position)
            return
        self._terms.append(terminal)

    def complete(self, position: int) -> Header | None:
        """Feed `<|message|>` (repairing the header first in lenient mode): the header, or None if abandoned."""
        lalr = self._lalr
        self._replacing_channel = False
        try:
            lalr.feed_token(T_MESSAGE)
        except GrammarError as exc:
            if not self._lenient:
                self._fail(fill(_spec.PARSE_ERR_INCOMPLETE_HEADER, {"reason": str(exc)}), position)
            expected = lalr.expected()
            if T_ROLE in expected:
                self._add_missing_role(position)
                return self.complete(position)
            if expected == frozenset({T_WORD}):
                if self._terms[-1:] == [T_CHANNEL]:
                    self._fix_now(_spec.RECOVERY_EMPTY_CHANNEL, position)
                else:
                    detail = fill(_spec.PARSE_DETAIL_CONSTRAIN_WITHOUT_TYPE, {"token": SPELLINGS[T_CONSTRAIN]})
                    self._report(_spec.RECOVERY_STRAY_HEADER_WORD, detail, "", position)
                lalr.feed_token(T_WORD, (T_WORD, ""))
                lalr.feed_token(T_MESSAGE)
            else:  # cannot happen with this grammar; keeps the promise never to raise
                detail = fill(_spec.PARSE_DETAIL_HEADER_ABANDONED, {"reason": str(exc)})
                self._report(_spec.RECOVERY_STRAY_HEADER_WORD, detail, " ".join(self._words), position)
                self.abandon()
                return None
        header = lalr.value_at(-2)
        assert isinstance(header, Header)
        self._terms = []
        if self._lenient:
            self._settle(header, position)
        return header

    def cut(self) -> Cut:
        """What the header is, now that a stop token ends it before `<|message|>` (lenient mode; call
        `flush_words` first). Repairs waiting for the header to be settled are reported only for `MESSAGE`."""
        if self.empty and not self._raw:
            return Cut.NOTHING
        spoken = self._terms[1:] if self._terms[:1] == [T_ROLE] else self._terms
        recipient = self._recipient or self._fed_recipient
        if recipient == Role.ASSISTANT.value:
            recipient = None
        if recipient is not None and not self._set_aside:
            return Cut.MESSAGE
        if self._virtual and T_CHANNEL not in spoken and recipient is None and self.raw_text().strip():
            return Cut.HEADERLESS
        return Cut.JUNK

    def discard_pending(self) -> None:
        """The header is set aside whole: the repairs found in it are not reported one by one."""
        self._pending = []

    # -- words -----------------------------------------------------------------------------------

    def _classify(self, word: str) -> str:
        if word in ROLES and T_ROLE in self._lalr.expected():
            return T_ROLE
        if word.startswith(_TO):
            return T_TO
        return T_WORD

    def _strict_word(self, word: str, position: int) -> None:
        terminal = self._classify(word)
        try:
            self._lalr.feed_token(terminal, (terminal, word))
        except GrammarError as exc:
            self._fail(fill(_spec.PARSE_ERR_HEADER_WORD, {"word": word, "reason": str(exc)}), position)
        self._words.append(word)
        self._terms.append(terminal)

    def _feed(self, terminal: str, word: str) -> bool:
        if not self._lalr.accepts(terminal):
            return False
        self._lalr.feed_token(terminal, (terminal, word))
        self._words.append(word)
        self._terms.append(terminal)
        return True

    def _feed_channel(self, channel: str) -> None:
        """A `<|channel|>` the input lost, and its word."""
        self._lalr.feed_token(T_CHANNEL)
        self._terms.append(T_CHANNEL)
        self._feed(T_WORD, channel)
        self._fed_channel = channel

    def _word(self, word: str, position: int, before: str | None) -> bool:
        """Lenient: place one word by the spec's `word` rows; True when it has no place in the header."""
        self._before = before
        return self._apply(_RULES["word"], word, position)

    def _apply(self, rows: _Rows, item: str, position: int) -> bool:
        """The first row of `rows` whose conditions all hold for `item` (a word, or a control terminal) acts."""
        for conditions, action, repair in rows:
            for condition in conditions:
                if not condition(self, item):
                    break
            else:
                return action(self, item, position, repair)
        return True  # not reached: the generator makes each list end with a row without conditions

    # actions of the spec's `header_actions`: True when the word has no place in the header

    def _do_author(self, word: str, position: int, repair: str | None) -> bool:
        return self._apply(_RULES["author_word"], word, position)

    def _do_recipient(self, word: str, position: int, repair: str | None) -> bool:
        if self._terms[-1:] == [T_CHANNEL]:  # `<|channel|> to=…`: no channel word
            self._fix(_spec.RECOVERY_EMPTY_CHANNEL, position)
            self._feed(T_WORD, "")
        self._set_recipient(word, position)
        return False

    def _do_second_channel_word(self, word: str, position: int, repair: str | None) -> bool:
        self._replacing_channel = False
        content_type = CONTENT_TYPES.get(word.lower())
        if content_type is not None and word not in CHANNELS and self._lalr.accepts(T_WORD):
            channel = self._channel if self._channel is not None else self._fed_channel
            values = {"word": word, "token": SPELLINGS[T_CHANNEL], "channel": channel or ""}
            self._fix(_spec.RECOVERY_CONTENT_TYPE_AFTER_CHANNEL, position, **values)
            self._feed(T_WORD, word)
            return False
        self._replace_channel(word, position)
        return False

    def _do_late_channel_word(self, word: str, position: int, repair: str | None) -> bool:
        self._late_channel = False
        if repair is not None:
            self._fix(repair, position, token=SPELLINGS[T_CHANNEL], word=word)
        self._channel = channel_of(word)[0]
        return False

    def _do_channel_word(self, word: str, position: int, repair: str | None) -> bool:
        channel, trimmed = channel_of(word)
        if trimmed:
            self._fix(_spec.RECOVERY_CHANNEL_PUNCTUATION, position, word=word, channel=channel)
        self._feed(T_WORD, channel)
        self._fed_channel = channel
        return False

    def _do_constrain_word(self, word: str, position: int, repair: str | None) -> bool:
        if word.lower() not in CONTENT_TYPES and channel_of(word)[0] in CHANNELS:  # `<|constrain|>analysis code`
            self._fix(_spec.RECOVERY_SPLICED_CONTENT_TYPE, position, word=word)
            return False
        return not self._feed(T_WORD, word)

    def _do_drop(self, word: str, position: int, repair: str | None) -> bool:
        if repair is not None:
            self._fix(repair, position, word=word)
        return False

    def _do_add_channel_marker(self, word: str, position: int, repair: str | None) -> bool:
        if repair is not None:
            self._fix(repair, position, word=word, token=SPELLINGS[T_CHANNEL])
        self._feed_channel(channel_of(word)[0])
        return False

    def _do_content_type(self, word: str, position: int, repair: str | None) -> bool:
        return not self._feed(T_WORD, word)

    def _do_set_aside(self, word: str, position: int, repair: str | None) -> bool:
        return True

    def _do_role(self, word: str, position: int, repair: str | None) -> bool:
        glued = role_of(word)
        assert glued is not None
        role, channel, recipient = glued
        self._feed(T_ROLE, role.value)
        if word != role.value:
            self._fix(_spec.RECOVERY_GLUED_ROLE, position, word=word, role=role.value)
        if channel is not None and self._lalr.accepts(T_CHANNEL):
            self._feed_channel(channel)
        if recipient is not None:
            self._set_recipient(recipient, position)
        return False

    def _do_recipient_without_role(self, word: str, position: int, repair: str | None) -> bool:
        self._add_missing_role(position)
        self._set_recipient(word, position)
        return False

    def _do_tool_author(self, word: str, position: int, repair: str | None) -> bool:
        self._feed(T_WORD, word)
        return False

    def _do_expected_role(self, word: str, position: int, repair: str | None) -> bool:
        role = self._role or Role.ASSISTANT
        if repair is not None:
            self._fix(repair, position, word=word, role=role.value)
        self._feed(T_ROLE, role.value)
        return False

    def _do_restart_header(self, terminal: str, position: int, repair: str | None) -> bool:
        if repair is not None:
            self._fix_now(repair, position, text=" ".join(self._said))
        self._lalr.restore(self._snapshot)
        self.open()  # the header begins again at this <|start|>
        return False

    def _do_empty_word_then_token(self, terminal: str, position: int, repair: str | None) -> bool:
        if repair is not None:
            self._fix_now(repair, position)
        self._lalr.feed_token(T_WORD, (T_WORD, ""))
        self._terms.append(T_WORD)
        self._raw.pop()
        self.control(terminal, position)
        return False

    def _do_role_then_token(self, terminal: str, position: int, repair: str | None) -> bool:
        self._add_missing_role(position)
        self._raw.pop()
        self.control(terminal, position)
        return False

    def _do_second_channel(self, terminal: str, position: int, repair: str | None) -> bool:
        self._replacing_channel = True
        return False

    def _do_late_channel(self, terminal: str, position: int, repair: str | None) -> bool:
        self._late_channel = True
        return False

    def _do_stray_control(self, terminal: str, position: int, repair: str | None) -> bool:
        detail = fill(_spec.PARSE_DETAIL_STRAY_CONTROL, {"token": SPELLINGS[terminal]})
        self._later(_spec.RECOVERY_STRAY_HEADER_WORD, detail, "", position)
        return False

    def _set_recipient(self, word: str, position: int) -> None:
        earlier = self._recipient if self._recipient is not None else self._fed_recipient
        if earlier is None and self._feed(T_TO, word):
            self._fed_recipient = word[len(_TO) :]
            return
        if earlier is not None:
            self._fix(_spec.RECOVERY_DOUBLED_RECIPIENT, position, word=_TO + earlier)
        else:
            self._fix(_spec.RECOVERY_RECIPIENT_OUT_OF_PLACE, position, word=word)
        self._recipient = word[len(_TO) :]

    def _replace_channel(self, word: str, position: int) -> None:
        channel, trimmed = channel_of(word)
        earlier = self._channel if self._channel is not None else self._fed_channel
        self._fix(_spec.RECOVERY_DOUBLED_CHANNEL, position, word=earlier or "", channel=channel)
        if trimmed:
            self._fix(_spec.RECOVERY_CHANNEL_PUNCTUATION, position, word=word, channel=channel)
        self._channel = channel

    def _join_spaced_names(self, joined: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """`to=functions.Web Search`, where `Web Search` is a declared function: one word."""
        out: list[tuple[int, int]] = []
        i = 0
        while i < len(spans):
            start, end = spans[i]
            word = joined[start:end]
            if word.startswith(_TO):
                name = word[len(_TO) :].removeprefix(FUNCTIONS_PREFIX)
                if name not in self._tools:
                    for j in range(len(spans) - 1, i, -1):
                        candidate = " ".join([name, *(joined[s:e] for s, e in spans[i + 1 : j + 1])])
                        if candidate in self._spaced_tools:
                            self._fix(_spec.RECOVERY_NAME_WITH_SPACE, start, name=self._spaced_tools[candidate])
                            end = spans[j][1]
                            i = j
                            break
            out.append((start, end))
            i += 1
        return out

    # -- repairs ---------------------------------------------------------------------------------

    def _later(self, rule: str, detail: str, text: str, position: int) -> None:
        """A repair reported once the header is settled (a header set aside whole reports only that)."""
        self._pending.append((rule, detail, text, position))

    def _fix(self, rule: str, position: int, text: str | None = None, **values: object) -> None:
        """`_later`, with the detail and the text set aside that the spec's table gives `rule` (`described`)."""
        self._pending.append((rule, *described(rule, values, text), position))

    def _fix_now(self, rule: str, position: int, text: str | None = None, **values: object) -> None:
        """A repair reported at once, as the spec's table describes it."""
        self._report(rule, *described(rule, values, text), position)

    def _set_text_aside(self, text: str, position: int) -> None:
        self._set_aside = True
        self._fix(_spec.RECOVERY_STRAY_HEADER_WORD, position, word=text)

    def _settle(self, header: Header, position: int) -> None:
        """Lenient: apply what the grammar could not hold, then report the header's repairs."""
        if self._recipient is not None:
            header.recipient = self._recipient
        if self._channel is not None:
            header.channel = self._channel
        if header.recipient == Role.ASSISTANT.value and header.is_role and header.author == Role.ASSISTANT.value:
            self._fix(_spec.RECOVERY_RECIPIENT_TO_SELF, position, recipient=header.recipient)
            header.recipient = None
            if header.channel != _spec.CHANNEL_ANSWER:  # a note to itself, not its answer: never shown
                header.channel = _spec.CHANNEL_REASONING
        channel = header.channel
        if (
            channel is not None
            and channel not in CHANNELS
            and header.recipient is None
            and header.is_role
            and header.author == Role.ASSISTANT.value
        ):
            self._fix(_spec.RECOVERY_UNKNOWN_CHANNEL, position, word=channel)  # the bridge makes it reasoning
        content_type = header.content_type or ""
        if header.recipient is None and content_type.startswith(_CONSTRAIN):
            name = content_type[len(_CONSTRAIN) :]
            if name.startswith(FUNCTIONS_PREFIX) or name in self._tools:
                self._fix(_spec.RECOVERY_RECIPIENT_AS_CONTENT_TYPE, position, word=content_type)
                header.recipient = name if name.startswith(FUNCTIONS_PREFIX) else FUNCTIONS_PREFIX + name
                header.content_type = None
        for rule, detail, text, at in self._pending:
            self._report(rule, detail, text, at)
        self._pending = []

    def _add_missing_role(self, position: int) -> None:
        role = self._role or Role.ASSISTANT
        self._fix_now(_spec.RECOVERY_MISSING_ROLE, position, role=role.value)
        self._lalr.feed_token(T_ROLE, (T_ROLE, role.value))
        self._words.append(role.value)
        self._terms.append(T_ROLE)

    def _repair_control(self, terminal: str, position: int) -> None:
        """Lenient: a control token the grammar refuses here, placed by the spec's `control_token` rows."""
        self._apply(_RULES["control_token"], terminal, position)


_Condition = Callable[[HeaderReader, str], bool]
_Action = Callable[[HeaderReader, str, int, str | None], bool]
_Rows = tuple[tuple[tuple[_Condition, ...], _Action, str | None], ...]
_ONLY_WORD = frozenset({T_WORD})
_CONDITIONS: dict[str, _Condition] = {
    "author_expected": lambda r, _: T_ROLE in r._lalr.expected(),
    "recipient": lambda r, word: word.startswith(_TO),
    "after_second_channel": lambda r, _: r._replacing_channel,
    "after_late_channel": lambda r, _: r._late_channel,
    "after_channel_marker": lambda r, _: r._terms[-1:] == [T_CHANNEL],
    "after_constrain": lambda r, _: r._terms[-1:] == [T_CONSTRAIN],
    "repeats_role": lambda r, word: len(r._words) == 1 and word == r._words[0] and r._terms == [T_ROLE],
    "not_before_channel": lambda r, _: r._before != T_CHANNEL,
    "no_channel_yet": lambda r, _: T_CHANNEL not in r._terms and r._channel is None,
    "channel_word": lambda r, word: channel_of(word)[0] in CHANNELS,
    "channel_allowed": lambda r, _: r._lalr.accepts(T_CHANNEL),
    "content_type": lambda r, word: word.lower() in CONTENT_TYPES,
    "role_word": lambda r, word: role_of(word) is not None,
    "tool_name": lambda r, word: _SEPARATOR in word or word in BUILTIN_NAMESPACES,
    "start_token": lambda r, terminal: terminal == T_START,
    "channel_token": lambda r, terminal: terminal == T_CHANNEL,
    "word_expected_only": lambda r, _: r._lalr.expected() == _ONLY_WORD,
    "channel_seen": lambda r, _: T_CHANNEL in r._terms,
    "no_later_channel": lambda r, _: r._channel is None,
}
"""The conditions of the spec's `header_conditions`, on a word (or a control terminal) and the header so far."""
_RULES: dict[str, _Rows] = {
    name: tuple(
        (tuple(_CONDITIONS[c] for c in when), getattr(HeaderReader, "_do_" + then), repair)
        for when, then, repair in rows
    )
    for name, rows in _spec.HEADER_RULES.items()
}
"""The spec's `header_rules`, each condition and action resolved to the reader's method of that name once."""


def apply_declared_tools(header: Header, tools: Iterable[str], report: Report, position: int) -> None:
    """Lenient repairs that need the declared function names: a missing `functions.` prefix, and a
    content type glued to a declared name (`functions.shelljson`, `shelljson`)."""
    declared = frozenset(tools)
    recipient = header.recipient

    def fix(rule: str, position: int, text: str | None = None, **values: object) -> None:
        report(rule, *described(rule, values, text), position)

    if not declared or not recipient:
        return
    if recipient in declared:
        fix(_spec.RECOVERY_MISSING_FUNCTIONS_PREFIX, position, recipient=recipient)
        header.recipient = FUNCTIONS_PREFIX + recipient
        return
    name = recipient.removeprefix(FUNCTIONS_PREFIX)
    if name in declared:
        return
    match = _EDGE_PUNCTUATION_RE.match(name)
    core = match.group(1) if match else name
    if core in declared:  # `to=functions.get_weather,`
        at = name.index(core)
        fix(
            _spec.RECOVERY_RECIPIENT_PUNCTUATION,
            position,
            name[:at] + name[at + len(core) :],
            recipient=recipient,
            name=core,
        )
        header.recipient = FUNCTIONS_PREFIX + core
        return
    parts = name.split(_SEPARATOR)
    for i in range(1, len(parts)):  # `to=function.get_weather`, `to=functions.functions.get_weather`
        rest = _SEPARATOR.join(parts[i:])
        if rest in declared and parts[0] not in BUILTIN_NAMESPACES:
            fix(
                _spec.RECOVERY_WRONG_NAMESPACE,
                position,
                text=_SEPARATOR.join(parts[:i]),
                recipient=recipient,
                name=rest,
            )
            header.recipient = FUNCTIONS_PREFIX + rest
            return
    if name == recipient and _SEPARATOR in name:
        return
    for tool in sorted(declared, key=len, reverse=True):
        rest = name[len(tool) :]
        if name.startswith(tool) and rest.lower() in CONTENT_TYPES:
            fix(_spec.RECOVERY_GLUED_CONTENT_TYPE, position, text=rest, recipient=recipient)
            header.recipient = FUNCTIONS_PREFIX + tool
            if header.content_type is None:
                header.content_type = CONTENT_TYPES[rest.lower()]
            return
