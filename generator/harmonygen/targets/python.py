"""Python target: lowers the IR into named constants and renders templates/python/harmony_responses/_generated/.

Names are made here (the symbol rules of this target), never in templates: a constant is named after the
spec key or the purpose it stands for, never after its value, so a renamed channel or namespace changes
values, not names. Values are printed as canonical literals (`pyprint`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2

from ..facts import Fact, Shape, grammar_facts, server_facts, spec_facts, symbol
from ..ir import ProjectIR
from ..pyprint import py_literal
from .base import Output

PACKAGE = "harmony_responses"
TEMPLATE_DIR = f"python/{PACKAGE}/_generated"


@dataclass(frozen=True)
class Constant:
    name: str
    annotation: str
    literal: str
    doc: str


def constant(name: str, value: Any, annotation: str = "", doc: str = "") -> Constant:
    """A named constant, its value printed as a canonical Python literal."""
    return Constant(name, annotation or annotation_of(value), py_literal(value), doc)


def annotation_of(value: Any) -> str:
    if value is None:
        return "str | None"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, str)):
        return type(value).__name__
    if isinstance(value, tuple):
        kinds = {annotation_of(v) for v in value}
        return f"tuple[{kinds.pop() if len(kinds) == 1 else 'Any'}, ...]"
    if isinstance(value, list):
        kinds = {annotation_of(v) for v in value}
        return f"list[{kinds.pop() if len(kinds) == 1 else 'Any'}]"
    if isinstance(value, dict):
        keys = {annotation_of(k) for k in value} or {"str"}
        values = {annotation_of(v) for v in value.values()} or {"str"}
        key = keys.pop() if len(keys) == 1 else "Any"
        return f"dict[{key}, {values.pop() if len(values) == 1 else 'Any'}]"
    return "Any"


_PY_NAMES = {"str": "str", "int": "int", "bool": "bool", "scalar": "Any", "json": "Any"}


def annotation_of_shape(shape: Shape) -> str:
    """The Python annotation of a fact's shape (see `facts`)."""
    if isinstance(shape, str):
        return _PY_NAMES[shape]
    kind, *args = shape
    if kind == "opt":
        return f"{annotation_of_shape(args[0])} | None"
    if kind == "seq":
        return f"tuple[{annotation_of_shape(args[0])}, ...]"
    if kind == "set":
        return f"frozenset[{annotation_of_shape(args[0])}]"
    if kind == "pair":
        return "tuple[" + ", ".join(annotation_of_shape(a) for a in args) + "]"
    if kind == "map":
        return f"dict[{annotation_of_shape(args[0])}, {annotation_of_shape(args[1])}]"
    fields = {annotation_of_shape(field) for _, field in args[0]}  # a record: a dict of its fields' type
    return f"dict[str, {fields.pop() if len(fields) == 1 else 'Any'}]"


def constant_of(fact: Fact) -> Constant:
    annotation = annotation_of_shape(fact.shape) if fact.shape is not None else annotation_of(fact.value)
    return Constant(fact.name, annotation, py_literal(fact.value), fact.doc)


def spec_constants(ir: ProjectIR) -> list[Constant]:
    """`_generated/spec.py`: every fact the runtime reads, by the purpose it serves."""
    return [constant_of(fact) for fact in spec_facts(ir)]


def grammar_constants(ir: ProjectIR) -> list[Constant]:
    return [constant_of(fact) for fact in grammar_facts(ir)]


# Each generated module: its template, the IR sections it reads, and how its context is made.
MODULES: dict[str, tuple[tuple[str, ...], Any]] = {
    "__init__.py": (("generator",), lambda ir: {"format_version": ir.format_version}),
    "spec.py": (
        ("encoding", "tokens", "format", "parsing", "mapping", "requests", "server", "builtin_namespaces"),
        lambda ir: {"constants": spec_constants(ir)},
    ),
    # Only the server reads these (`server_facts`); `spec` re-exports them, so `spec.NAME` still finds them.
    "server.py": (
        ("server", "format", "responses"),
        lambda ir: {"constants": [constant_of(fact) for fact in server_facts(ir)]},
    ),
    "grammar.py": (("grammar",), lambda ir: {"constants": grammar_constants(ir), "grammar": ir.grammar.source}),
    "enums.py": (
        ("encoding", "format", "mapping"),
        lambda ir: {
            "roles": ir.format.roles,
            "reasoning_efforts": ir.format.reasoning_efforts,
            "encoding": ir.encoding,
            "item_kinds": [(symbol(i.kind), i.kind) for i in ir.mapping.items],
            "terminators": [
                (symbol(str(t.format_token)), t.terminator) for t in ir.tokens.named if t.terminator is not None
            ]
            + [(symbol(ir.parsing.eos_terminator), ir.parsing.eos_terminator)],
        },
    ),
}


def emit(ir: ProjectIR, env: jinja2.Environment, templates: str) -> list[Output]:
    outputs = []
    for name, (sections, make_context) in MODULES.items():
        template = f"{TEMPLATE_DIR}/{name}.jinja"
        outputs.append(
            Output(
                path=f"{TEMPLATE_DIR}/{name}",
                text=env.get_template(template).render(**make_context(ir)),
                sources=ir.sources_of(*sections),
                template=f"{templates}/{template}",
            )
        )
    return outputs
