"""The IR lowered into named facts: what every target's data modules hold, listed once.

A target prints these facts, under these names, in its own syntax (`pyprint`, `tsprint`) and with its
own types (protobuf hands each language plugin the same request in the same way). Names are made here:
a fact is named after the spec key or the purpose it stands for, never after its value, so a renamed
channel or namespace changes values, not names.

A target infers a fact's type from its value, except where the value alone cannot say it (an empty list,
a `null` that stands for a string, a pair rather than a list, a set): there `shape` states it in a small
language-neutral notation that each target maps to its own types:

- `"str"`, `"int"`, `"bool"`, `"scalar"` (a string, number, boolean or null), `"json"` (any JSON value);
- `("opt", S)`: S or null; `("seq", S)`: a sequence of S; `("set", S)`: a set of S (printed sorted);
- `("pair", S1, S2, ...)`: a fixed tuple; `("map", K, V)`: a table; `("record", ((field, S), ...))`: an object.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .ir import EVENT_REPEATS, ProjectIR

Shape = Any  # str | tuple: the notation above


@dataclass(frozen=True)
class Fact:
    name: str
    value: Any
    doc: str = ""
    shape: Shape = None  # None: the type follows from the value
    keyed: bool = False  # a table whose keys a runtime types by (TypeScript: their union is the key type)


def symbol(*parts: str) -> str:
    """A fact's name from spec keys: `("sys", "knowledge_cutoff")` → `SYS_KNOWLEDGE_CUTOFF`."""
    return "_".join(parts).upper().replace("-", "_").replace(".", "_").replace(":", "_")


def _group(prefix: str, pairs: Iterable[tuple[str, Any]]) -> list[Fact]:
    return [Fact(symbol(prefix, key), value) for key, value in pairs]


def _literal(text: str) -> str:
    """`text` as a regular expression both runtimes read alike (JavaScript's `u` flag refuses needless escapes)."""
    return re.sub(r"[\\^$.|?*+()\[\]{}]", r"\\\g<0>", text)


def _glued_role_pattern(ir: ProjectIR) -> str:
    """Roles longest first (a role may begin another), then any repeats, a channel (longest first), a recipient."""
    roles = [r.value for r in ir.format.roles]
    channels = [c.name for c in ir.format.channels]

    def longest_first(words: list[str]) -> str:
        return "|".join(_literal(w) for w in sorted(words, key=len, reverse=True))

    recipient = _literal(ir.format.header.recipient_keyword)
    return f"({longest_first(roles)})(?:{'|'.join(map(_literal, roles))})*({longest_first(channels)})?({recipient}.+)?"


def spec_facts(ir: ProjectIR) -> list[Fact]:
    """The facts every runtime reads: tokens, format texts, the parser's vocabulary, the mapping, the requests
    (`server_facts` holds those only a server reads)."""
    enc, tok, fmt, h = ir.encoding, ir.tokens, ir.format, ir.format.header
    out = [
        Fact("ENCODING_NAME", enc.name, "The reference's name for the encoding."),
        Fact("ENCODING_TIKTOKEN_NAME", enc.tiktoken_name),
        Fact("PATTERN", enc.pattern, "The o200k_base pre-tokenizer split pattern."),
        Fact("RANKS_FILE", enc.ranks_file),
        Fact("RANKS_SHA256", enc.ranks_sha256),
        Fact("RANKS_ENV_VAR", enc.ranks_env_var),
        Fact("RANKS_TIKTOKEN_NAME", enc.ranks_tiktoken_name),
        Fact("SPELLING_OPEN", tok.spelling_open, "Every special token's spelling starts with this."),
        Fact("SPELLING_CLOSE", tok.spelling_close, "Every special token's spelling ends with this."),
        Fact(
            "NAMED_TOKENS",
            {t.spelling: t.id for t in tok.named},
            "Special tokens with a spelling of their own; the rest are reserved.",
        ),
        Fact("TOKEN_KINDS", {t.id: t.kind for t in tok.named}),
        Fact("RESERVED_RANGES", tok.reserved_ranges, "Inclusive id ranges.", ("seq", ("pair", "int", "int"))),
        Fact("RESERVED_SPELLING", tok.reserved_spelling),
    ]
    formatted = sorted((t for t in tok.named if t.format_token), key=lambda t: str(t.format_token))
    out += [Fact(symbol("token", str(t.format_token)), t.id) for t in formatted]
    out += [Fact(symbol("spelling", str(t.format_token)), t.spelling) for t in formatted]
    out += [Fact(name.upper(), ids, shape=("seq", "int")) for name, ids in tok.stop_sets.items()]
    out.append(
        Fact(
            "TERMINATORS",
            {t.id: t.terminator for t in tok.named if t.terminator},
            "Stop token → how a message it ends is said to end.",
        )
    )
    out.append(Fact("ROLE_DEBUG_NAMES", {r.value: r.debug_name for r in fmt.roles}))
    out.append(Fact("REASONING_RENDERED", {e.value: e.rendered for e in fmt.reasoning_efforts}))
    out.append(Fact("CHANNELS", tuple(c.name for c in fmt.channels), "Every channel, in the spec's order."))
    out += [Fact(symbol("channel", p), c.name) for c in fmt.channels for p in c.purposes]
    out.append(
        Fact(
            "CHANNEL_BY_PURPOSE",
            {p: c.name for c in fmt.channels for p in c.purposes},
            "What a channel is used for → the channel.",
        )
    )
    out.append(Fact("HEADER_RENDER_ORDER", h.render_order, "Header parts (grammar rules), as rendered."))
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
    out.append(
        Fact(
            "HEADER_GLUED_ROLE_PATTERN",
            _glued_role_pattern(ir),
            "A header word that is a role, perhaps repeated, then perhaps a channel and a recipient glued to it"
            " (`assistantfinal`); its groups: the role, the channel, the recipient. Matched against the whole word.",
        )
    )
    out.append(Fact("CONTENT_TYPES", tuple(c.name for c in h.content_types)))
    out += [Fact(symbol("content_type", p), c.name) for c in h.content_types for p in c.purposes]
    defaults = dict(fmt.system_defaults)
    defaults["valid_channels"] = [c.name for c in fmt.channels]
    out += [
        Fact(symbol("system_default", k), v, shape=("opt", "str") if v is None else None) for k, v in defaults.items()
    ]
    out += _group("sys", fmt.system_sections.items())
    out += _group("dev", fmt.developer_sections.items())
    out += _group("tools", fmt.tools_section.items())
    out += _group("conv", fmt.conversation.items())
    r = fmt.text_rules
    out += [
        Fact(
            "WHITESPACE_RANGES",
            r.whitespace,
            "White space (inclusive code-point ranges): what stripping, word splitting and blank tests use.",
            ("seq", ("pair", "int", "int")),
        ),
        Fact("JSON_SYNTAX_ERROR", r.json_syntax_error, "The one text of a JSON syntax error (no position)."),
        Fact("JSON_MAX_INTEGER_DIGITS", r.json_max_integer_digits, "A JSON integer of more digits is refused."),
    ]
    out += _group("err", fmt.errors.items())
    p = ir.parsing
    out.append(Fact("PARSE_EOS_TERMINATOR", p.eos_terminator))
    out += _group("parse_event", p.events.items())
    out += _group("parse_unit", p.units.items())
    out += _group("parse_detail", p.details.items())
    out.append(Fact("RECOVERY_RULES", p.recovery_rules, "Lenient repairs: rule id → what it does."))
    repair = ("record", (("detail", "str"), ("sets_aside", ("opt", "str"))))
    out.append(
        Fact(
            "REPAIRS",
            {rule: {"detail": r.detail, "sets_aside": r.sets_aside} for rule, r in p.repairs.items()},
            "Rule id → the detail text its repair reports and the placeholder whose value it sets aside in `text`.",
            ("map", "str", repair),
        )
    )
    out += [Fact(symbol("recovery", rule), rule) for rule in p.recovery_rules]
    out.append(
        Fact(
            "HEADER_RULES",
            {name: tuple((r.when, r.then, r.repair) for r in rows) for name, rows in p.header_rules.items()},
            "How lenient mode places a header word (`word`, `author_word`) or a control token the grammar refuses "
            "there (`control_token`): rows of (conditions, action, repair or null); the first that holds acts.",
            ("map", "str", ("seq", ("pair", ("seq", "str"), "str", ("opt", "str")))),
        )
    )
    out += _group("parse_err", p.errors.items())
    out += _mapping_facts(ir)
    out += _request_facts(ir)
    out += _group("encrypted_reasoning", ir.server.encrypted_reasoning.items())  # the bridge's
    tool = ("record", (("name", "str"), ("description", "str"), ("parameters", "json")))
    namespace = ("record", (("name", "str"), ("description", ("opt", "str")), ("tools", ("seq", tool))))
    out.append(
        Fact(
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
            "Built-in tool namespaces (browser, python) as ToolNamespaceConfig data.",
            ("map", "str", namespace),
        )
    )
    builtin = {ns.name for ns in ir.builtin_namespaces} | {i.namespace for i in ir.mapping.items if i.namespace}
    out.append(
        Fact(
            "TOOL_NAMESPACES",
            tuple(sorted(builtin)),
            "The built-in tools' namespaces, and those the item table gives their own items (container included).",
            ("seq", "str"),
        )
    )
    return out


def _mapping_facts(ir: ProjectIR) -> list[Fact]:
    m = ir.mapping
    out = [
        Fact(
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
                    "namespace": item.namespace,
                }
                for item in m.items
            },
            "Item kind → its wire type, id prefixes, the channel purpose or namespace that picks it, its events.",
        ),
        Fact(
            "EVENT_ORDER",
            m.event_order,
            "Item kind → its events, in order: those before the repeated one (the deltas) go out when the item opens"
            " (the first alone when none repeats), the rest when it ends; each event's fields are its model's.",
        ),
        Fact("EVENT_REPEATS", EVENT_REPEATS, "The mark ending an `EVENT_ORDER` entry that repeats (the deltas)."),
        Fact(
            "HOSTED_KINDS",
            m.hosted,
            "Hosted tool kind → its request tool types, output item type and id prefix, Harmony namespace (or null),"
            " the events before the tool runs and after it answered or failed, its `include` values, and (web search)"
            " `search_context_size` → tokens per browser display with the default size.",
            ("map", "str", "json"),
        ),
    ]
    out += _group("input", m.input.items())
    out += _group("response", m.response.items())
    out += [
        Fact(symbol("stream", key), tuple(value) if isinstance(value, list) else value)
        for key, value in m.stream.items()
    ]
    out += [Fact(symbol("error", e.code), e.code) for e in m.errors]
    out.append(
        Fact(
            "ERRORS",
            {e.code: {"type": e.type, "message": e.message} for e in m.errors},
            "Error code → its type and message.",
        )
    )
    out.append(Fact("OPENAI_REASONING_EVENTS", m.openai_reasoning_events))
    out += _group("sse", m.sse.items())
    out.append(
        Fact(
            "ARGUMENT_ERRORS",
            m.arguments,
            "A strict tool's argument errors: JSON Schema keyword → its text (`other`: any other).",
        )
    )
    out += _group("chat", m.chat.items())
    return out


def _request_facts(ir: ProjectIR) -> list[Fact]:
    r = ir.requests
    field_row = (
        "record",
        (
            ("rule", "str"),
            ("capability", ("opt", "str")),
            ("neutral", ("seq", "scalar")),
            ("error", ("opt", "str")),
            ("why", "str"),
            ("feeds", "str"),
        ),
    )
    out = [
        Fact("MAX_JSON_DEPTH", r.max_json_depth, "Arrays and objects of untrusted JSON nest at most this deep."),
        Fact("MAX_SCHEMA_CHARS", r.max_schema_chars, "A schema shown to the model: at most this many characters."),
        Fact("REQUEST_ERROR_TYPE", r.error_type),
        Fact(
            "REQUEST_ERRORS",
            {e.handle: {"code": e.code, "message": e.message} for e in r.errors},
            "Request error by handle → the code a client sees and the message (`{fields}` shown as JSON).",
            ("map", "str", ("record", (("code", "str"), ("message", "str")))),
        ),
    ]
    out += [Fact(symbol("request_error", e.handle), e.handle) for e in r.errors]
    out.append(
        Fact(
            "VALIDATION_TEXTS",
            r.validation,
            "A schema error's kind → its text: the message, what was expected, how a value found is shown.",
            ("map", "str", "str"),
        )
    )
    out += [
        Fact(
            "REQUEST_FIELDS",
            {
                f.field: {
                    "rule": f.rule,
                    "capability": f.capability,
                    "neutral": f.neutral,
                    "error": f.error,
                    "why": f.why,
                    "feeds": f.feeds,
                }
                for f in r.fields
            },
            "Request field path → its rule (honoured, refused, label), and for a refused one the capability that "
            "honours it, the values that ask for nothing and the error told (with `why`); the plan part it feeds. "
            "The refused fields of the spec are checked in this order.",
            ("map", "str", field_row),
        ),
        Fact(
            "LABEL_FIELDS",
            {f.field: f.why for f in r.fields if f.rule == "label"},
            "Request fields that only label a request → what they label: accepted with any value, kept.",
            ("map", "str", "str"),
        ),
        Fact(
            "INCLUDES", r.includes, "`include` values → the capability that honours it.", ("map", "str", ("opt", "str"))
        ),
        Fact(
            "CAPABILITIES",
            r.capabilities,
            "What a caller of the bridge may add → what it does (each a flag of the runtime's Capabilities).",
            ("map", "str", "str"),
            keyed=True,
        ),
        Fact(
            "HOSTED_TOOL_REASONS",
            r.hosted_tools,
            "Why a declared tool the server would run is left out (`omitted`) or refused (`refused`).",
            ("map", "str", "str"),
        ),
    ]
    return out


def server_facts(ir: ProjectIR) -> list[Fact]:
    """The facts only the HTTP server reads: its own errors, limits, objects and probes (spec/mapping/server.json)
    and the hosted browser's display (format.json's `browser_display`). A target whose language has no server
    leaves them out; `spec_facts` holds the rest."""
    sv = ir.server
    error = ("record", (("status", ("opt", "int")), ("type", "str"), ("code", "str")))
    out = [
        Fact(
            "SERVER_ERRORS",
            {e.handle: {"status": e.status, "type": e.type, "code": e.code} for e in sv.errors},
            "The server's own errors by handle → HTTP status (null: only a stored response's error), type, code.",
            ("map", "str", error),
        ),
        Fact("INTERRUPTED_ERROR", sv.interrupted, "The error of a response whose server stopped before it ended."),
    ]
    create = ir.responses.schemas["WebSocketResponseCreateEvent"]  # its own fields, then all of CreateResponseBody's
    own = [field for part in create.get("allOf", [create]) for field in part.get("properties", {}).items()]
    out.append(
        Fact(
            "WEBSOCKET_HTTP_ONLY_FIELDS",
            tuple(name for name, field in own if field.get("x-openresponses-disallowed")),
            "Request fields a WebSocket `response.create` must not carry (the spec's `x-openresponses-disallowed`).",
            ("seq", "str"),
        )
    )
    out.append(
        Fact(
            "SAMPLING_RANGES",
            sv.sampling,
            "Sampling field → the closed range the server accepts (the schema leaves it open; the engines do not).",
            ("map", "str", ("pair", "int", "int")),
        )
    )
    out += _group("server_object", sv.objects.items())
    out += _group("probe", sv.probes.items())
    out += _group("input_items", sv.list_paging.items())
    out += _group("input_item_id_prefix", sv.input_item_id_prefixes.items())
    out += _group("compaction", sv.compaction.items())
    out += _group("background", sv.background.items())
    b = ir.format.browser_display
    out += [
        Fact("BROWSER_LINK_OPEN", b.link_open, "The browser's link opens with this (and the model's citations)."),
        Fact("BROWSER_LINK_SEPARATOR", b.link_separator, "Between a link's id, text and domain."),
        Fact("BROWSER_LINK_CLOSE", b.link_close, "The browser's link closes with this."),
        Fact("BROWSER_LINK_OPEN_IN_TEXT", b.link_open_in_text, "What page text spelling BROWSER_LINK_OPEN shows."),
        Fact("BROWSER_LINK_CLOSE_IN_TEXT", b.link_close_in_text, "What page text spelling BROWSER_LINK_CLOSE shows."),
        Fact(
            "BROWSER_SEPARATOR_IN_LINK_TEXT",
            b.separator_in_link_text,
            "What link text spelling BROWSER_LINK_SEPARATOR shows.",
        ),
        Fact("BROWSER_WRAP_WIDTH", b.wrap_width, "The browser wraps page lines at this many columns."),
    ]
    out += _group("browser", b.texts.items())
    return out


def _near_misses(ir: ProjectIR) -> dict[str, str]:
    """Each control token's spellings with the bars `parsing.near_miss_bars` says left out → its terminal."""
    tok = ir.tokens
    lt, bar = tok.spelling_open[:1], tok.spelling_open[1:]
    gt = tok.spelling_close[len(bar) :]
    spelling = {t.id: t.spelling for t in tok.named}
    out: dict[str, str] = {}
    for tid, terminal in ir.grammar.control_terminals:
        name = spelling[tid][len(tok.spelling_open) : len(spelling[tid]) - len(tok.spelling_close)]
        forms = {"open": lt + name + bar + gt, "close": lt + bar + name + gt, "both": lt + name + gt}
        out.update({forms[b]: terminal for b in ir.parsing.near_miss_bars})
    return out


def _control_triggers(ir: ProjectIR) -> dict[str, dict[str, dict[str, str]]]:
    """`parsing.control_triggers` with each token kind spelled as the terminals it stands for (`stop`: every stop)."""
    kind = {t.id: "stop" if t.kind == "stop" else t.format_token or "" for t in ir.tokens.named}
    return {
        mode: {
            region: {terminal: row[kind[tid]] for tid, terminal in ir.grammar.control_terminals}
            for region, row in regions.items()
        }
        for mode, regions in ir.parsing.control_triggers.items()
    }


def grammar_facts(ir: ProjectIR) -> list[Fact]:
    """The grammar's canonical LALR tables, and the names the runtime knows its terminals and rules by."""
    g = ir.grammar
    token = {t.id: t for t in ir.tokens.named}
    origins = sorted({r.origin for r in g.rules if not r.origin.startswith("_")})  # not lark's helper rules
    out = [
        Fact("END", g.end_terminal, "The end-of-input terminal."),
        Fact("START_RULE", g.start_rule, "The rule a whole input reduces to."),
        Fact("TERMINALS", g.terminals, "Every terminal but END, sorted.", ("seq", "str")),
        Fact(
            "CONTROL_TERMINALS",
            dict(g.control_terminals),
            "Token id → terminal, for the control tokens the grammar names.",
        ),
        Fact(
            "CONTROL_SPELLINGS",
            {terminal: token[tid].spelling for tid, terminal in g.control_terminals},
            "Control terminal → the spelling of its token.",
            ("map", "str", "str"),
        ),
        Fact(
            "STOP_TERMINATORS",
            {terminal: token[tid].terminator for tid, terminal in g.control_terminals if token[tid].terminator},
            "Control terminal of a stop token → how a message it ends is said to end.",
            ("map", "str", "str"),
        ),
        Fact(
            "NEAR_MISS_SPELLINGS",
            _near_misses(ir),
            "A near-miss spelling of a control token (a bar left out) → its terminal, read as that token in a header.",
            ("map", "str", "str"),
        ),
    ]
    out.append(
        Fact(
            "CONTROL_TRIGGERS",
            _control_triggers(ir),
            "Mode (lenient, strict) → region → control terminal → the action the token triggers there.",
            ("map", "str", ("map", "str", ("map", "str", "str"))),
        )
    )
    out += [
        Fact(symbol("lexer_terminal", what), terminal, f"The terminal the lexer makes of a {what}.")
        for what, terminal in g.lexer_terminals.items()
    ]
    out += [Fact(symbol("rule", origin), origin) for origin in origins]
    out += [
        Fact(
            "RULES",
            tuple((r.origin, len(r.expansion)) for r in g.rules),
            "Rule index → (origin, number of symbols it pops).",
            ("seq", ("pair", "str", "int")),
        ),
        Fact(
            "RULE_TEXTS",
            tuple(f"{r.origin}: {' '.join(r.expansion)}".rstrip() for r in g.rules),
            "Rule index → the rule as text, for messages and tests.",
            ("seq", "str"),
        ),
        Fact("START_STATE", g.start_state, "The state before any input."),
        Fact("ACCEPT_STATE", g.accept_state, "The state reached once the start rule is reduced at END."),
        Fact(
            "ACTIONS",
            tuple(s.actions for s in g.states),
            "State → symbol → the next state (shift or goto, >= 0) or `~rule` (reduce, < 0).",
            ("seq", ("map", "str", "int")),
        ),
        Fact(
            "EXPECTED",
            tuple(frozenset(s.expected) for s in g.states),
            "State → the terminals (END included) that have an action there.",
            ("seq", ("set", "str")),
        ),
    ]
    return out
