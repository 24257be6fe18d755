"""Grammar target: compiles grammar/*.lark with lark (LALR) and prints canonical parser tables.

lark numbers states (and orders rules and terminals) differently from process to process, so the
tables are renumbered before printing: states breadth-first from the start state, following
transitions in sorted symbol order; rules sorted by origin and expansion. The same grammar always
prints the same bytes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import jinja2

from ..config import Config
from ..ir import ProjectIR
from .base import Output
from .python import PACKAGE, Constant, constant

GRAMMAR_FILE = "harmony.lark"
TEMPLATE = f"python/{PACKAGE}/_generated/grammar.py.jinja"
END = "$END"
# Terminals that are not control tokens: the lexer makes them from text.
TEXT_TERMINALS = ("ROLE", "TO", "WORD", "TEXT")


class GrammarError(Exception):
    """The grammar does not compile, or does not match the spec."""


@dataclass(frozen=True)
class Tables:
    terminals: tuple[str, ...]  # sorted, without $END
    rules: tuple[tuple[str, tuple[str, ...]], ...]  # (origin, expansion), canonical order
    actions: tuple[dict[str, int], ...]  # state → symbol → shift target (>= 0) or ~rule (< 0)
    start_state: int
    accept_state: int

    def expected(self, state: int) -> frozenset[str]:
        return frozenset(s for s in self.actions[state] if s == END or s.isupper())


def _null_lexer() -> type:
    from lark.lexer import Lexer

    class NullLexer(Lexer):  # the runtime brings its own lexer; lark only builds the tables
        def __init__(self, conf: Any) -> None:
            pass

        def lex(self, data: Any) -> Any:
            return iter(data)

    return NullLexer


def compile_grammar(text: str) -> Tables:
    """LALR tables for the grammar text, in canonical numbering."""
    from lark import Lark
    from lark.exceptions import GrammarError as LarkGrammarError

    try:
        lark = Lark(text, parser="lalr", lexer=_null_lexer(), start="start")
    except LarkGrammarError as exc:
        raise GrammarError(str(exc)) from None
    table = lark.parser.parser.parser.parse_table
    start, accept = table.start_states["start"], table.end_states["start"]

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
    return Tables(
        terminals=tuple(t for t in terminals if t != END),
        rules=tuple(rule_keys),
        actions=tuple(actions),
        start_state=0,
        accept_state=order[accept],
    )


def lower(tables: Tables, project: ProjectIR) -> list[Constant]:
    by_format = {name.upper(): tid for name, tid in project.harmony.format_token_ids()}
    control = {}
    for terminal in tables.terminals:
        if terminal in TEXT_TERMINALS:
            continue
        if terminal not in by_format:
            raise GrammarError(
                f"grammar/{GRAMMAR_FILE}: terminal {terminal} is neither a text terminal {TEXT_TERMINALS} "
                "nor the upper-cased format_token of a token in spec/harmony/tokens.json"
            )
        control[by_format[terminal]] = terminal
    missing = sorted(set(TEXT_TERMINALS) - set(tables.terminals))
    if missing:
        raise GrammarError(f"grammar/{GRAMMAR_FILE}: text terminals {missing} are not used")

    return [
        constant("END", END, "str", "The end-of-input terminal."),
        constant("TERMINALS", tables.terminals, "tuple[str, ...]", "Every terminal but END, sorted."),
        constant(
            "CONTROL_TERMINALS",
            dict(sorted(control.items())),
            "dict[int, str]",
            "Token id → terminal, for the control tokens the grammar names.",
        ),
        constant(
            "RULES",
            tuple((origin, len(expansion)) for origin, expansion in tables.rules),
            "tuple[tuple[str, int], ...]",
            "Rule index → (origin, number of symbols it pops).",
        ),
        constant(
            "RULE_TEXTS",
            tuple(f"{origin}: {' '.join(expansion)}".rstrip() for origin, expansion in tables.rules),
            "tuple[str, ...]",
            "Rule index → the rule as text, for messages and tests.",
        ),
        constant("START_STATE", tables.start_state, "int", "The state before any input."),
        constant("ACCEPT_STATE", tables.accept_state, "int", "The state reached once `start` is reduced at END."),
        constant(
            "ACTIONS",
            tables.actions,
            "tuple[dict[str, int], ...]",
            "State → symbol → the next state (shift or goto, >= 0) or `~rule` (reduce, < 0).",
        ),
        constant(
            "EXPECTED",
            tuple(tables.expected(s) for s in range(len(tables.actions))),
            "tuple[frozenset[str], ...]",
            "State → the terminals (END included) that have an action there.",
        ),
    ]


def emit(project: ProjectIR, env: jinja2.Environment, config: Config) -> list[Output]:
    rel = f"{config.grammar}/{GRAMMAR_FILE}"
    path = config.path(rel)
    if not path.is_file():
        return []
    tables = compile_grammar(path.read_text(encoding="utf-8"))
    text = env.get_template(TEMPLATE).render(constants=lower(tables, project), grammar=rel)
    return [
        Output(
            path=f"python/{PACKAGE}/_generated/grammar.py",
            text=text,
            sources=(rel, *project.harmony.sources),
            template=f"{config.templates}/{TEMPLATE}",
        )
    ]
