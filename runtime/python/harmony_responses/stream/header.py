"""One message header: its text split into words, the words fed to the grammar, and the repairs of lenient mode.

`HeaderReader` collects a header's text until a control token closes a stretch of it, splits it into
words at whitespace and feeds each word to the shared LALR parser as a terminal: the lexer terminal
for a role (when a role can come there), for a recipient (`to=…`), or any other word. Control tokens
inside the header (`<|channel|>`, `<|constrain|>`, another `<|start|>`) and the closing `<|message|>`
are fed too. In strict mode whatever leaves the grammar raises; in lenient mode each repair is reported
(`report(rule, detail, text, position)`) and parsing goes on. `complete()` gives the finished `Header`.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NoReturn

from .._tables import Role
from .._tables import grammar as _grammar
from .._tables import spec as _spec
from ..lalr import GrammarError, IncrementalParser
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
FUNCTIONS_PREFIX = _spec.HEADER_FUNCTION_NAMESPACE + _spec.HEADER_NAMESPACE_SEPARATOR
ROLES = {role.value: role for role in Role}
_WORD_RE = re.compile(r"\S+")
_PARTS = frozenset((_grammar.RULE_AUTHOR, _grammar.RULE_RECIPIENT, _grammar.RULE_CHANNEL, _grammar.RULE_CONTENT_TYPE))


@dataclass
class Header:
    """What a complete header says: its author (a role's value, or a tool's name), recipient, channel, type."""

    author: str | None = None
    is_role: bool = False
    recipient: str | None = None
    channel: str | None = None
    content_type: str | None = None


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


class HeaderReader:
    """Reads headers into the shared LALR parser, one at a time (`open` starts the next one)."""

    def __init__(self, lalr: IncrementalParser, lenient: bool, role: Role | None, report: Report, fail: Fail) -> None:
        self._lalr = lalr
        self._lenient = lenient
        self._role = role  # the completion's first role, and the role a header without an author gets
        self._report = report
        self._fail = fail
        self._snapshot = lalr.copy()  # the parser before the header's <|start|>
        self._text: list[str] = []  # header text not yet split into words
        self._starts: list[int] = []  # where each piece of that text began
        self._words: list[str] = []  # words fed to the parser
        self._terms: list[str] = []  # and their terminals (control terminals too)
        self._virtual = False  # the header's <|start|>ROLE came from the prompt, not the input
        self._skipping_channel = False

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
        return self._virtual and self._terms == [T_ROLE] and len(self._words) == 1 and not self._text

    def spoken_words(self) -> str:
        """The header's words as the input gave them (not the role a completion starts in)."""
        words = self._words[1:] if self._virtual else self._words
        return " ".join(words)

    def pending_text(self) -> str:
        return "".join(self._text)

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
        self._text, self._starts = [], []
        self._skipping_channel = False
        if role is None:
            self._words, self._terms, self._virtual = [], [], False
            return
        self._lalr.feed_token(T_ROLE, (T_ROLE, role.value))
        self._words, self._terms, self._virtual = [role.value], [T_ROLE], True

    def abandon(self) -> None:
        """Forget the header: the parser goes back to where it was before the header's `<|start|>`."""
        self._lalr.restore(self._snapshot)
        self._text, self._starts, self._words, self._terms = [], [], [], []

    def add_text(self, text: str, position: int) -> None:
        self._text.append(text)
        self._starts.append(position)

    def flush_words(self, by_character: bool) -> None:
        """Split the collected text into words and feed them; a word's position is where it starts
        (its character, or the token it starts in)."""
        if not self._text:
            return
        pieces, starts = self._text, self._starts
        self._text, self._starts = [], []
        ends = list(itertools.accumulate(len(piece) for piece in pieces))
        for match in _WORD_RE.finditer("".join(pieces)):
            index = bisect.bisect_right(ends, match.start())
            offset = match.start() - (ends[index - 1] if index else 0)
            self._word(match.group(), starts[index] + (offset if by_character else 0))

    def control(self, terminal: str, position: int) -> None:
        """`<|channel|>`, `<|constrain|>` or `<|start|>` inside the header."""
        try:
            self._lalr.feed_token(terminal)
        except GrammarError as exc:
            if not self._lenient:
                self._fail(_spec.PARSE_ERR_CONTROL_IN_HEADER.format(token=SPELLINGS[terminal], reason=exc), position)
            self._repair_control(terminal, position)
            return
        self._terms.append(terminal)

    def complete(self, position: int) -> Header | None:
        """Feed `<|message|>` (repairing the header first in lenient mode): the header, or None if abandoned."""
        lalr = self._lalr
        self._skipping_channel = False
        try:
            lalr.feed_token(T_MESSAGE)
        except GrammarError as exc:
            if not self._lenient:
                self._fail(_spec.PARSE_ERR_INCOMPLETE_HEADER.format(reason=exc), position)
            expected = lalr.expected()
            if T_ROLE in expected:
                self._add_missing_role(position)
                return self.complete(position)
            if expected == frozenset({T_WORD}):
                if self._terms[-1:] == [T_CHANNEL]:
                    self._report(_spec.RECOVERY_EMPTY_CHANNEL, _spec.PARSE_DETAIL_EMPTY_CHANNEL, "", position)
                else:
                    detail = _spec.PARSE_DETAIL_CONSTRAIN_WITHOUT_TYPE.format(token=SPELLINGS[T_CONSTRAIN])
                    self._report(_spec.RECOVERY_STRAY_HEADER_WORD, detail, "", position)
                lalr.feed_token(T_WORD, (T_WORD, ""))
                lalr.feed_token(T_MESSAGE)
            else:  # cannot happen with this grammar; keeps the promise never to raise
                detail = _spec.PARSE_DETAIL_HEADER_ABANDONED.format(reason=exc)
                self._report(_spec.RECOVERY_STRAY_HEADER_WORD, detail, " ".join(self._words), position)
                self.abandon()
                return None
        header = lalr.value_at(-2)
        assert isinstance(header, Header)
        self._terms = []
        return header

    # -- words -----------------------------------------------------------------------------------

    def _classify(self, word: str) -> str:
        if word in ROLES and T_ROLE in self._lalr.expected():
            return T_ROLE
        if word.startswith(_TO):
            return T_TO
        return T_WORD

    def _word(self, word: str, position: int) -> None:
        terminal = self._classify(word)
        if self._lenient:
            if len(self._words) == 1 and word == self._words[0] and len(self._terms) == 1:
                detail = _spec.PARSE_DETAIL_DOUBLED_ROLE.format(word=word)
                self._report(_spec.RECOVERY_DOUBLED_ROLE, detail, word, position)
                return
            if self._skipping_channel:
                self._skipping_channel = False
                detail = _spec.PARSE_DETAIL_DOUBLED_CHANNEL.format(word=word)
                self._report(_spec.RECOVERY_DOUBLED_CHANNEL, detail, word, position)
                return
        try:
            self._lalr.feed_token(terminal, (terminal, word))
        except GrammarError as exc:
            if not self._lenient:
                self._fail(_spec.PARSE_ERR_HEADER_WORD.format(word=word, reason=exc), position)
            if self._terms[-1:] == [T_CHANNEL]:
                self._fill_empty_channel(position)
                self._word(word, position)
            elif terminal == T_TO and T_TO in self._terms:
                detail = _spec.PARSE_DETAIL_DOUBLED_RECIPIENT.format(word=word)
                self._report(_spec.RECOVERY_DOUBLED_RECIPIENT, detail, word, position)
            else:
                detail = _spec.PARSE_DETAIL_STRAY_WORD.format(word=word)
                self._report(_spec.RECOVERY_STRAY_HEADER_WORD, detail, word, position)
            return
        self._words.append(word)
        self._terms.append(terminal)

    # -- repairs ---------------------------------------------------------------------------------

    def _fill_empty_channel(self, position: int) -> None:
        self._report(_spec.RECOVERY_EMPTY_CHANNEL, _spec.PARSE_DETAIL_EMPTY_CHANNEL, "", position)
        self._lalr.feed_token(T_WORD, (T_WORD, ""))
        self._terms.append(T_WORD)

    def _add_missing_role(self, position: int) -> None:
        role = self._role or Role.ASSISTANT
        detail = _spec.PARSE_DETAIL_MISSING_ROLE.format(role=role.value)
        self._report(_spec.RECOVERY_MISSING_ROLE, detail, "", position)
        self._lalr.feed_token(T_ROLE, (T_ROLE, role.value))
        self._words.append(role.value)
        self._terms.append(T_ROLE)

    def _repair_control(self, terminal: str, position: int) -> None:
        expected = self._lalr.expected()
        if terminal == T_START:
            abandoned = " ".join(self._words[1:] if self._virtual else self._words)
            self._report(_spec.RECOVERY_REPEATED_START, _spec.PARSE_DETAIL_REPEATED_START, abandoned, position)
            self._lalr.restore(self._snapshot)
            self._lalr.feed_token(terminal)
            self._words, self._terms, self._virtual = [], [], False
            return
        if expected == frozenset({T_WORD}) and self._terms[-1:] == [T_CHANNEL]:
            self._fill_empty_channel(position)
            self.control(terminal, position)
            return
        if T_ROLE in expected:
            self._add_missing_role(position)
            self.control(terminal, position)
            return
        if terminal == T_CHANNEL and T_CHANNEL in self._terms:
            self._skipping_channel = True
            return
        detail = _spec.PARSE_DETAIL_STRAY_CONTROL.format(token=SPELLINGS[terminal])
        self._report(_spec.RECOVERY_STRAY_HEADER_WORD, detail, "", position)


def apply_declared_tools(header: Header, tools: Iterable[str], report: Report, position: int) -> None:
    """Lenient repairs that need the declared function names: a missing `functions.` prefix, and a
    content type glued to a declared name (`functions.shelljson`)."""
    declared = frozenset(tools)
    if header.recipient in declared:
        detail = _spec.PARSE_DETAIL_MISSING_FUNCTIONS_PREFIX.format(recipient=header.recipient)
        report(_spec.RECOVERY_MISSING_FUNCTIONS_PREFIX, detail, "", position)
        header.recipient = FUNCTIONS_PREFIX + (header.recipient or "")
    recipient = header.recipient
    if declared and recipient and recipient.startswith(FUNCTIONS_PREFIX):
        name = recipient[len(FUNCTIONS_PREFIX) :]
        if name not in declared:
            for tool in sorted(declared, key=len, reverse=True):
                rest = name[len(tool) :]
                if name.startswith(tool) and rest.isalnum():
                    detail = _spec.PARSE_DETAIL_GLUED_CONTENT_TYPE.format(recipient=recipient)
                    report(_spec.RECOVERY_GLUED_CONTENT_TYPE, detail, rest, position)
                    header.recipient = FUNCTIONS_PREFIX + tool
                    if header.content_type is None:
                        header.content_type = rest
                    break
