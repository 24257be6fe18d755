"""grammar/*.lark → canonical LALR tables, compiled by lark.

lark numbers states (and orders rules and terminals) differently from process to process, so the
tables are renumbered: states breadth-first from the start state, following transitions in sorted
symbol order; rules sorted by origin and expansion. The same grammar always gives the same tables.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any

from .ir import GrammarIR, RuleIR, StateIR

START_RULE = "start"
END = "$END"


class GrammarError(Exception):
    """The grammar does not compile, or does not match the spec."""


def _null_lexer() -> type:
    from lark.lexer import Lexer, LexerState, Token

    class NullLexer(Lexer):  # the runtime brings its own lexer; lark only builds the tables, never lexes
        __future_interface__ = 2  # lark calls lex() with the base class's arguments, not with the bare text

        def __init__(self, conf: Any) -> None:
            pass

        def lex(self, lexer_state: LexerState, parser_state: Any) -> Iterator[Token]:
            return iter(())

    return NullLexer


def compile_grammar(
    text: str,
    source: str,
    control_terminals: dict[int, str] | None = None,
    lexer_terminals: dict[str, str] | None = None,
) -> GrammarIR:
    """LALR tables for the grammar text, in canonical numbering.

    `control_terminals` (token id → terminal) and `lexer_terminals` (what the lexer makes from text →
    terminal) must together name every terminal of the grammar, and each of them must be used.
    """
    from lark import Lark
    from lark.exceptions import GrammarError as LarkGrammarError

    try:
        lark = Lark(text, parser="lalr", lexer=_null_lexer(), start=START_RULE)
    except LarkGrammarError as exc:
        raise GrammarError(str(exc)) from None
    table = lark.parser.parser.parser.parse_table
    start, accept = table.start_states[START_RULE], table.end_states[START_RULE]

    def rule_key(rule: Any) -> tuple[str, tuple[str, ...]]:
        return str(rule.origin.name), tuple(str(sym.name) for sym in rule.expansion)

    rule_keys = sorted({rule_key(r) for r in lark.rules})
    rule_index = {key: i for i, key in enumerate(rule_keys)}
    order: dict[Any, int] = {start: 0}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for symbol in sorted(table.states[state], key=str):
            action, arg = table.states[state][symbol]
            if action.name == "Shift" and arg not in order:
                order[arg] = len(order)
                queue.append(arg)
    if len(order) != len(table.states):
        raise GrammarError(f"{len(table.states) - len(order)} LALR states are unreachable from the start state")
    actions: list[dict[str, int]] = [{} for _ in order]
    for old, new in order.items():
        row = {}
        for symbol in sorted(table.states[old], key=str):
            action, arg = table.states[old][symbol]
            row[str(symbol)] = order[arg] if action.name == "Shift" else ~rule_index[rule_key(arg)]
        actions[new] = row
    terminals = sorted({str(t.name) for t in lark.terminals} | {s for row in actions for s in row if s.isupper()})
    terminals = [t for t in terminals if t != END]
    controls = dict(sorted((control_terminals or {}).items()))
    lexed = dict(lexer_terminals or {})
    named = set(controls.values()) | set(lexed.values())
    unknown = sorted(set(terminals) - named)
    if unknown:
        raise GrammarError(
            f"{source}: terminals {unknown} are neither the upper-cased format_token of a token in "
            "spec/harmony/tokens.json nor a lexer terminal of spec/harmony/parsing.json"
        )
    unused = sorted(set(lexed.values()) - set(terminals))
    if unused:
        raise GrammarError(f"{source}: lexer terminals {unused} are not used by the grammar")
    return GrammarIR(
        source=source,
        start_rule=START_RULE,
        end_terminal=END,
        terminals=tuple(terminals),
        rules=tuple(RuleIR(origin, expansion) for origin, expansion in rule_keys),
        start_state=0,
        accept_state=order[accept],
        states=tuple(
            StateIR(actions=row, expected=tuple(sorted(s for s in row if s == END or s.isupper()))) for row in actions
        ),
        control_terminals=tuple((tid, term) for tid, term in controls.items() if term in terminals),
        lexer_terminals=lexed,
    )
