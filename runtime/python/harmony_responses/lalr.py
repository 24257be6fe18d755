"""An interactive LALR parser driven by the tables harmonygen compiles from grammar/harmony.lark.

It knows nothing of Harmony itself: `feed_token(terminal, value)`, `feed_eof()`, `copy()`,
`accepts(terminal)` and `expected()` over `_grammar.ACTIONS`. Values are built by a reduce callback
`(origin, children) -> value`, so callers decide what a rule means and what is kept in memory.
"""

from __future__ import annotations

from collections.abc import Callable

from ._tables import grammar as _grammar
from ._tables import spec as _spec
from .errors import HarmonyError
from .texts import fill

Reducer = Callable[[str, list[object]], object]

_ACTIONS = _grammar.ACTIONS
_RULES = _grammar.RULES
_END = _grammar.END
_START_RULE = _grammar.START_RULE


class GrammarError(HarmonyError):
    """The input does not follow the grammar: which terminal came, which were expected."""

    def __init__(self, terminal: str, expected: frozenset[str]) -> None:
        self.terminal = terminal
        self.expected = expected
        listed = ", ".join(sorted(expected)) or _spec.PARSE_ERR_NOTHING
        super().__init__(fill(_spec.PARSE_ERR_UNEXPECTED_TERMINAL, terminal=terminal, expected=listed))


def _no_value(origin: str, children: list[object]) -> object:
    return None


class IncrementalParser:
    """Feed terminals one at a time; the state stack is the whole parse state."""

    __slots__ = ("_states", "_values", "_reduce")

    def __init__(self, reduce: Reducer | None = None) -> None:
        self._states: list[int] = [_grammar.START_STATE]
        self._values: list[object] = []
        self._reduce: Reducer = reduce if reduce is not None else _no_value

    @property
    def state(self) -> int:
        return self._states[-1]

    def value_at(self, index: int) -> object:
        """The value on the stack at `index` (negative: from the top)."""
        return self._values[index]

    def expected(self) -> frozenset[str]:
        """Terminals with an action in the current state (a superset of what `accepts` allows)."""
        return _grammar.EXPECTED[self._states[-1]]

    def accepts(self, terminal: str) -> bool:
        """Whether `terminal` would be shifted (after any reductions) without an error."""
        action = _ACTIONS[self._states[-1]].get(terminal)
        if action is None or action >= 0:  # no action, or a shift: no need to simulate reductions
            return action is not None
        states = list(self._states)
        while True:
            action = _ACTIONS[states[-1]].get(terminal)
            if action is None:
                return False
            if action >= 0:
                return True
            origin, size = _RULES[~action]
            if size:
                del states[-size:]
            if terminal == _END and origin == _START_RULE and len(states) == 1:
                return True
            states.append(_ACTIONS[states[-1]][origin])

    def copy(self) -> IncrementalParser:
        twin = IncrementalParser(self._reduce)
        twin.restore(self)
        return twin

    def restore(self, other: IncrementalParser) -> None:
        """Go back to the state `other` (a copy taken earlier) is in."""
        self._states = list(other._states)
        self._values = list(other._values)

    def _pop(self, size: int) -> list[object]:
        """Take the children of a `size`-symbol rule off both stacks."""
        if not size:
            return []
        children = self._values[-size:]
        del self._values[-size:]
        del self._states[-size:]
        return children

    def feed_token(self, terminal: str, value: object = None) -> None:
        """Shift `terminal`, reducing first as the tables say; raises GrammarError if it cannot."""
        states = self._states
        values = self._values
        while True:
            action = _ACTIONS[states[-1]].get(terminal)
            if action is None:
                raise GrammarError(terminal, _grammar.EXPECTED[states[-1]])
            if action >= 0:
                states.append(action)
                values.append(value)
                return
            origin, size = _RULES[~action]
            values.append(self._reduce(origin, self._pop(size)))
            states.append(_ACTIONS[states[-1]][origin])

    def feed_eof(self) -> object:
        """End the input: reduce to `start` and return its value; raises GrammarError if incomplete."""
        states = self._states
        values = self._values
        while True:
            action = _ACTIONS[states[-1]].get(_END)
            if action is None or action >= 0:
                raise GrammarError(_END, _grammar.EXPECTED[states[-1]])
            origin, size = _RULES[~action]
            value = self._reduce(origin, self._pop(size))
            if origin == _START_RULE and len(states) == 1:
                states.append(_grammar.ACCEPT_STATE)
                values.append(value)
                return value
            values.append(value)
            states.append(_ACTIONS[states[-1]][origin])
