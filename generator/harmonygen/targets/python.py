"""Python target: lowers the IR into named constants and renders templates/python/harmony_responses/_generated/.

Names are made here (the symbol rules of this target), never in templates: a constant is named after the
spec key or the purpose it stands for, never after its value, so a renamed channel or namespace changes
values, not names. Values are printed as canonical literals (`pyprint`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jinja2

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


def symbol(*parts: str) -> str:
    """The Python name of a spec key: `("sys", "knowledge_cutoff")` → `SYS_KNOWLEDGE_CUTOFF`."""
    return "_".join(parts).upper().replace("-", "_").replace(".", "_").replace(":", "_")


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


def _group(prefix: str, pairs: Iterable[tuple[str, Any]]) -> list[Constant]:
    return [constant(symbol(prefix, key), value) for key, value in pairs]


def spec_constants(ir: ProjectIR) -> list[Constant]:
    """`_generated/spec.py`: every fact the runtime reads, by the purpose it serves."""
    enc, tok, fmt, h = ir.encoding, ir.tokens, ir.format, ir.format.header
    out = [
        constant("ENCODING_NAME", enc.name, doc="The reference's name for the encoding."),
        constant("ENCODING_TIKTOKEN_NAME", enc.tiktoken_name),
        constant("PATTERN", enc.pattern, doc="The o200k_base pre-tokenizer split pattern."),
        constant("RANKS_FILE", enc.ranks_file),
        constant("RANKS_SHA256", enc.ranks_sha256),
        constant("RANKS_ENV_VAR", enc.ranks_env_var),
        constant("RANKS_TIKTOKEN_NAME", enc.ranks_tiktoken_name),
        constant("SPELLING_OPEN", tok.spelling_open, doc="Every special token's spelling starts with this."),
        constant("SPELLING_CLOSE", tok.spelling_close, doc="Every special token's spelling ends with this."),
        constant(
            "NAMED_TOKENS",
            {t.spelling: t.id for t in tok.named},
            "dict[str, int]",
            "Special tokens with a spelling of their own; the rest are reserved.",
        ),
        constant("TOKEN_KINDS", {t.id: t.kind for t in tok.named}, "dict[int, str]"),
        constant("RESERVED_RANGES", tok.reserved_ranges, "tuple[tuple[int, int], ...]", "Inclusive id ranges."),
        constant("RESERVED_SPELLING", tok.reserved_spelling),
    ]
    formatted = sorted((t for t in tok.named if t.format_token), key=lambda t: str(t.format_token))
    out += [constant(symbol("token", str(t.format_token)), t.id) for t in formatted]
    out += [constant(symbol("spelling", str(t.format_token)), t.spelling) for t in formatted]
    out += [constant(name.upper(), ids, "tuple[int, ...]") for name, ids in tok.stop_sets.items()]
    out.append(
        constant(
            "TERMINATORS",
            {t.id: t.terminator for t in tok.named if t.terminator},
            "dict[int, str]",
            "Stop token → how a message it ends is said to end.",
        )
    )
    out.append(constant("ROLE_DEBUG_NAMES", {r.value: r.debug_name for r in fmt.roles}, "dict[str, str]"))
    out.append(constant("REASONING_RENDERED", {e.value: e.rendered for e in fmt.reasoning_efforts}, "dict[str, str]"))
    out.append(constant("CHANNELS", tuple(c.name for c in fmt.channels), doc="Every channel, in the spec's order."))
    out += [constant(symbol("channel", p), c.name) for c in fmt.channels for p in c.purposes]
    out.append(
        constant(
            "CHANNEL_BY_PURPOSE",
            {p: c.name for c in fmt.channels for p in c.purposes},
            "dict[str, str]",
            "What a channel is used for → the channel.",
        )
    )
    out.append(constant("HEADER_RENDER_ORDER", h.render_order, doc="Header parts (grammar rules), as rendered."))
    out += _group(
        "header",
        [
            ("author_name_separator", h.author_name_separator),
            ("part_separator", h.part_separator),
            ("recipient_keyword", h.recipient_keyword),
            ("broadcast_recipient", h.broadcast_recipient),
            ("function_namespace", h.function_namespace),
            ("namespace_separator", h.namespace_separator),
        ],
    )
    out.append(constant("CONTENT_TYPES", tuple(c.name for c in h.content_types)))
    out += [constant(symbol("content_type", p), c.name) for c in h.content_types for p in c.purposes]
    defaults = dict(fmt.system_defaults)
    defaults["valid_channels"] = [c.name for c in fmt.channels]
    out += _group("system_default", defaults.items())
    out += _group("sys", fmt.system_sections.items())
    out += _group("dev", fmt.developer_sections.items())
    out += _group("tools", fmt.tools_section.items())
    out += _group("conv", fmt.conversation.items())
    out += _group("err", fmt.errors.items())
    p = ir.parsing
    out.append(constant("PARSE_EOS_TERMINATOR", p.eos_terminator))
    out += _group("parse_event", p.events.items())
    out += _group("parse_unit", p.units.items())
    out += _group("parse_detail", p.details.items())
    out.append(
        constant("RECOVERY_RULES", p.recovery_rules, "dict[str, str]", "Lenient repairs: rule id → what it does.")
    )
    out += [constant(symbol("recovery", rule), rule) for rule in p.recovery_rules]
    out += _group("parse_err", p.errors.items())
    out += _mapping_constants(ir)
    out += _request_constants(ir)
    out.append(
        constant(
            "BUILTIN_NAMESPACES",
            {
                ns.name: {
                    "name": ns.name,
                    "description": ns.description,
                    "tools": [
                        {"name": t.name, "description": t.description, "parameters": t.parameters} for t in ns.tools
                    ],
                }
                for ns in ir.builtin_namespaces
            },
            "dict[str, dict[str, Any]]",
            "Built-in tool namespaces (browser, python) as ToolNamespaceConfig data.",
        )
    )
    return out


def _mapping_constants(ir: ProjectIR) -> list[Constant]:
    m = ir.mapping
    out = [
        constant(
            "ITEM_KINDS",
            {
                item.kind: {
                    "type": item.type,
                    "id_prefix": item.id_prefix,
                    "call_id_prefix": item.call_id_prefix,
                    "channel_purpose": item.channel_purpose,
                    "text": item.text,
                    "arguments": item.arguments,
                    "phases": item.phases,
                }
                for item in m.items
            },
            "dict[str, dict[str, Any]]",
            "Item kind → its wire type, id prefixes, the channel purpose that picks it, and its events.",
        ),
        constant("EVENT_ORDER", m.event_order, "dict[str, tuple[str, ...]]", "Item kind → its events, in order."),
    ]
    out += _group("response", m.response.items())
    for key, value in m.stream.items():
        annotation = "dict[str, str]" if isinstance(value, dict) else ""
        out.append(constant(symbol("stream", key), tuple(value) if isinstance(value, list) else value, annotation))
    out += [constant(symbol("error", e.code), e.code) for e in m.errors]
    out.append(
        constant(
            "ERRORS", {e.code: {"type": e.type, "message": e.message} for e in m.errors}, "dict[str, dict[str, str]]"
        )
    )
    out.append(constant("OPENAI_REASONING_EVENTS", m.openai_reasoning_events, "dict[str, str]"))
    out += _group("sse", m.sse.items())
    out += _group("chat", m.chat.items())
    return out


def _request_constants(ir: ProjectIR) -> list[Constant]:
    r = ir.requests
    out = [
        constant(
            "MAX_JSON_DEPTH", r.max_json_depth, doc="Arrays and objects of untrusted JSON nest at most this deep."
        ),
        constant(
            "MAX_SCHEMA_CHARS", r.max_schema_chars, doc="A schema shown to the model: at most this many characters."
        ),
        constant("REQUEST_ERROR_TYPE", r.error_type),
        constant(
            "REQUEST_ERRORS",
            {e.handle: {"code": e.code, "message": e.message} for e in r.errors},
            "dict[str, dict[str, str]]",
            "Request error by handle → the code a client sees and the message (`{fields}` shown as JSON).",
        ),
    ]
    out += [constant(symbol("request_error", e.handle), e.handle) for e in r.errors]
    out += [
        constant(
            "HONOURED_BY_CALLER",
            tuple((f.field, f.capability, f.neutral, f.why) for f in r.honoured_by_caller),
            "tuple[tuple[str, str | None, tuple[Any, ...], str], ...]",
            "Request fields the bridge honours only with its caller: (field path, capability, neutral values, why).",
        ),
        constant(
            "EXTRA_FIELDS",
            {f.field: (f.capability, f.why) for f in r.extra_fields},
            "dict[str, tuple[str | None, str]]",
            "Fields outside the spec that clients send → (the capability that honours it, why not here).",
        ),
        constant("INCLUDES", r.includes, "dict[str, str | None]", "`include` values → the capability that honours it."),
    ]
    return out


def grammar_constants(ir: ProjectIR) -> list[Constant]:
    g = ir.grammar
    origins = sorted({r.origin for r in g.rules if not r.origin.startswith("_")})  # not lark's helper rules
    out = [
        constant("END", g.end_terminal, doc="The end-of-input terminal."),
        constant("START_RULE", g.start_rule, doc="The rule a whole input reduces to."),
        constant("TERMINALS", g.terminals, "tuple[str, ...]", "Every terminal but END, sorted."),
        constant(
            "CONTROL_TERMINALS",
            dict(g.control_terminals),
            "dict[int, str]",
            "Token id → terminal, for the control tokens the grammar names.",
        ),
    ]
    out += [
        constant(symbol("lexer_terminal", what), terminal, doc=f"The terminal the lexer makes of a {what}.")
        for what, terminal in g.lexer_terminals.items()
    ]
    out += [constant(symbol("rule", origin), origin) for origin in origins]
    out += [
        constant(
            "RULES",
            tuple((r.origin, len(r.expansion)) for r in g.rules),
            "tuple[tuple[str, int], ...]",
            "Rule index → (origin, number of symbols it pops).",
        ),
        constant(
            "RULE_TEXTS",
            tuple(f"{r.origin}: {' '.join(r.expansion)}".rstrip() for r in g.rules),
            "tuple[str, ...]",
            "Rule index → the rule as text, for messages and tests.",
        ),
        constant("START_STATE", g.start_state, doc="The state before any input."),
        constant("ACCEPT_STATE", g.accept_state, doc="The state reached once the start rule is reduced at END."),
        constant(
            "ACTIONS",
            tuple(s.actions for s in g.states),
            "tuple[dict[str, int], ...]",
            "State → symbol → the next state (shift or goto, >= 0) or `~rule` (reduce, < 0).",
        ),
        constant(
            "EXPECTED",
            tuple(frozenset(s.expected) for s in g.states),
            "tuple[frozenset[str], ...]",
            "State → the terminals (END included) that have an action there.",
        ),
    ]
    return out


# Each generated module: its template, the IR sections it reads, and how its context is made.
MODULES: dict[str, tuple[tuple[str, ...], Any]] = {
    "__init__.py": (("generator",), lambda ir: {"format_version": ir.format_version}),
    "spec.py": (
        ("encoding", "tokens", "format", "parsing", "mapping", "requests", "builtin_namespaces"),
        lambda ir: {"constants": spec_constants(ir)},
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
