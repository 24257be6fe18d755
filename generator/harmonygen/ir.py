"""The language-neutral intermediate representation between the sources and the emitters.

`load_project` (loader.py) reads spec/ and grammar/ into a `ProjectIR`; `ProjectIR.to_json` gives its
canonical form, written to `generated/ir.json` and validated against `ir.schema.json`. The engine hands
every target the IR read back from that JSON (`ProjectIR.from_json`), so an emitter sees exactly the
facts a port in another language reads, and nothing else.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from typing import Any

FORMAT_VERSION = 1
"""The layout of the IR and of the tables printed from it; runtimes check it at import. Bump it when a
table changes shape."""


@dataclass(frozen=True)
class SpecialToken:
    id: int
    spelling: str
    kind: str  # "stop" | "structural"
    format_token: str | None  # the token's role in the format, when it has one
    terminator: str | None  # for a stop token: how a message it ends is said to end


@dataclass(frozen=True)
class TokensIR:
    spelling_open: str  # every special token's spelling starts with this
    spelling_close: str  # ... and ends with this
    named: tuple[SpecialToken, ...]  # by id
    reserved_spelling: str  # with `{id}`
    reserved_ranges: tuple[tuple[int, int], ...]  # inclusive
    stop_sets: dict[str, tuple[int, ...]]


@dataclass(frozen=True)
class EncodingIR:
    name: str
    enum_member: str
    tiktoken_name: str
    pattern: str
    pattern_unicode_version: str  # the Unicode version whose General_Category `\p{…}` means
    pattern_recategorized_later: tuple[int, ...]  # code points whose category changed after that version
    ranks_file: str
    ranks_sha256: str
    ranks_env_var: str
    ranks_tiktoken_name: str


@dataclass(frozen=True)
class RoleIR:
    name: str  # the enum member
    value: str  # as rendered and in JSON
    debug_name: str  # as the reference's error texts print it


@dataclass(frozen=True)
class EffortIR:
    name: str
    value: str
    rendered: str


@dataclass(frozen=True)
class NamedWithPurposes:
    """A channel or a content type: its name, and what the runtime uses it for."""

    name: str
    purposes: tuple[str, ...]


@dataclass(frozen=True)
class HeaderIR:
    render_order: tuple[str, ...]  # header parts, named like the grammar's rules
    author_name_separator: str
    part_separator: str
    recipient_keyword: str
    broadcast_recipient: str
    function_namespace: str
    namespace_separator: str
    content_types: tuple[NamedWithPurposes, ...]


@dataclass(frozen=True)
class BrowserDisplayIR:
    """How gpt-oss's browser tool shows pages and links, and how the model cites them."""

    link_open: str
    link_separator: str
    link_close: str
    link_open_in_text: str  # what page text spelling `link_open` shows instead
    link_close_in_text: str
    separator_in_link_text: str  # what link text spelling `link_separator` shows instead
    wrap_width: int  # columns
    texts: dict[str, str]  # with the link characters in place; placeholders under format.json's texts rule


@dataclass(frozen=True)
class TextRulesIR:
    """How every runtime reads and writes text where languages' libraries differ (format.json's text_rules)."""

    whitespace: tuple[tuple[int, int], ...]  # inclusive code-point ranges
    json_syntax_error: str
    json_max_integer_digits: int


@dataclass(frozen=True)
class FormatIR:
    roles: tuple[RoleIR, ...]
    reasoning_efforts: tuple[EffortIR, ...]
    channels: tuple[NamedWithPurposes, ...]
    header: HeaderIR
    system_defaults: dict[str, Any]
    system_sections: dict[str, str]
    developer_sections: dict[str, str]
    tools_section: dict[str, str]
    conversation: dict[str, Any]
    browser_display: BrowserDisplayIR
    text_rules: TextRulesIR
    errors: dict[str, str]


@dataclass(frozen=True)
class ToolIR:
    name: str
    description: str
    parameters: Any  # JSON Schema (an object) or None; key order is significant and kept


@dataclass(frozen=True)
class NamespaceIR:
    name: str
    description: str | None
    tools: tuple[ToolIR, ...]


@dataclass(frozen=True)
class RuleIR:
    origin: str
    expansion: tuple[str, ...]


@dataclass(frozen=True)
class StateIR:
    actions: dict[str, int]  # symbol → the next state (shift or goto, >= 0) or ~rule (reduce, < 0)
    expected: tuple[str, ...]  # the terminals (end of input included) that have an action here, sorted


@dataclass(frozen=True)
class GrammarIR:
    """Canonical LALR tables: states numbered breadth-first in sorted symbol order, rules sorted."""

    source: str
    start_rule: str
    end_terminal: str
    terminals: tuple[str, ...]  # every terminal but the end of input, sorted
    rules: tuple[RuleIR, ...]
    start_state: int
    accept_state: int
    states: tuple[StateIR, ...]
    control_terminals: tuple[tuple[int, str], ...]  # token id → terminal, by id
    lexer_terminals: dict[str, str]  # what the lexer makes from text (role, recipient, word, text) → terminal


@dataclass(frozen=True)
class RepairIR:
    detail: str  # the detail text it reports (its placeholders filled where the repair is made)
    sets_aside: str | None  # the placeholder whose value goes into the event's `text`, or None


@dataclass(frozen=True)
class HeaderRuleIR:
    when: tuple[str, ...]  # conditions of `header_conditions`, all of which must hold
    then: str  # an action of `header_actions`
    repair: str | None  # the recovery rule the action reports, when the row names one


@dataclass(frozen=True)
class ParsingIR:
    eos_terminator: str
    events: dict[str, str]  # start, delta, end, recovered → the event's type
    units: dict[str, str]  # input kind (tokens, text) → what a position counts
    recovery_rules: dict[str, str]  # rule id → what the repair does
    repairs: dict[str, RepairIR]  # rule id → what it reports (every rule with a detail text)
    near_miss_bars: tuple[str, ...]  # which bars a near-miss spelling of a control token leaves out (open, close, both)
    control_triggers: dict[str, dict[str, dict[str, str]]]  # mode → region → token kind → action (strict: whole)
    control_actions: dict[str, str]  # action → what it does
    header_rules: dict[str, tuple[HeaderRuleIR, ...]]  # word, author, control → rows, first match wins
    header_conditions: dict[str, str]  # condition → what it says
    header_actions: dict[str, str]  # action → what it does
    details: dict[str, str]  # what a repair reports, by situation
    errors: dict[str, str]
    peer_decisions: dict[str, str]  # a case of tests/peers/ → why this project reads it otherwise than the peer


@dataclass(frozen=True)
class ItemKindIR:
    kind: str  # the runtime's handle
    type: str  # the item's `type` on the wire
    id_prefix: str
    channel_purpose: str | None = None
    call_id_prefix: str | None = None
    text: dict[str, str] | None = None  # part, delta, done
    arguments: dict[str, str] | None = None  # delta, done
    phases: dict[str, str] | None = None  # channel purpose → message phase
    namespace: str | None = None  # the recipient namespace that picks this kind (extension items of built-in tools)


@dataclass(frozen=True)
class ErrorIR:
    code: str
    type: str
    message: str


EVENT_REPEATS = "*"  # the mark ending an `event_order` entry that repeats (an item's deltas)


@dataclass(frozen=True)
class MappingIR:
    """Harmony → Open Responses: item kinds, the stream's opening and closing events, errors, SSE, Chat."""

    items: tuple[ItemKindIR, ...]
    input: dict[str, str]  # how emitted items come back as input: the schemas of extension items, the output type
    response: dict[str, str]
    stream: dict[str, Any]
    errors: tuple[ErrorIR, ...]
    openai_reasoning_events: dict[str, str]
    sse: dict[str, str]
    arguments: dict[str, str]  # a strict tool's argument errors: JSON Schema keyword → its text
    chat: dict[str, Any]
    event_order: dict[str, tuple[str, ...]]  # item shape (text, arguments, plain) → its events in order
    hosted: dict[str, dict[str, Any]]  # hosted tool kind → its tool types, item type and prefix, namespace, events


@dataclass(frozen=True)
class RequestErrorIR:
    handle: str  # the runtime's name for the error
    code: str  # what a client sees
    message: str  # `{fields}` filled with values shown as JSON


REQUEST_FIELD_RULES = ("honoured", "refused", "label")


@dataclass(frozen=True)
class RequestFieldIR:
    """A request field (or one outside the spec that clients send): honoured, refused or a label."""

    field: str  # a path into the request (`reasoning.summary`)
    rule: str  # one of REQUEST_FIELD_RULES
    capability: str | None  # refused: the caller's capability that honours it; None: nothing here does
    neutral: tuple[Any, ...]  # refused: the values that ask for nothing (empty: every value asks)
    error: str | None  # refused: the request error told without the capability; None for the other rules
    why: str  # what the field does, or why it is refused (the error's `why`)
    feeds: str  # the part of the request's plan it feeds (one of `plan_parts`)
    in_spec: bool  # a field of an Open Responses request (else one outside the spec)


@dataclass(frozen=True)
class RequestsIR:
    """What the request bridge accepts, refuses and says."""

    max_json_depth: int
    max_schema_chars: int
    error_type: str
    errors: tuple[RequestErrorIR, ...]
    validation: dict[str, str]  # a schema error's kind → its text (what was expected, how a value found is shown)
    fields: tuple[RequestFieldIR, ...]  # in check order: the refused fields of the spec are checked in this order
    plan_parts: dict[str, str]  # a part of a request's plan → what it is
    includes: dict[str, str | None]  # an `include` value → the capability that honours it
    capabilities: dict[str, str]  # what a caller of the bridge may add → what it does
    hosted_tools: dict[str, str]  # why a declared hosted tool is left out (`omitted`) or refused (`refused`)


@dataclass(frozen=True)
class ServerErrorIR:
    handle: str  # the runtime's name for the error
    status: int | None  # the HTTP status; None: only ever the error a stored response carries
    type: str
    code: str
    when: str  # when a client gets it, for the docs


@dataclass(frozen=True)
class ServerIR:
    """The HTTP server's contract beyond the request bridge."""

    errors: tuple[ServerErrorIR, ...]
    interrupted: dict[str, str]  # the error (code, message) of a response its server never finished
    objects: dict[str, str]  # `object` names of bodies the OpenAPI document leaves out
    probes: dict[str, str]  # the `status` words of /health and /ready
    list_paging: dict[str, Any]  # `input_items` paging: limit_default, limit_max, order_default
    sampling: dict[str, tuple[int, int]]  # sampling field → the closed range the server accepts
    input_item_id_prefixes: dict[str, str]
    compaction: dict[str, str]  # prompt, summary_frame, seal
    encrypted_reasoning: dict[str, str]  # seal: the version prefix of reasoning items' `encrypted_content`
    background: dict[str, str]  # what background responses say (the cancelled error, the events' retention)


@dataclass(frozen=True)
class UnionVariantIR:
    type: str | None  # the `type` tag; None: the key may be absent or null
    role: str | None  # the `role` tag, when `type` alone does not pick the variant
    model: str


@dataclass(frozen=True)
class ItemUnionIR:
    name: str
    variants: tuple[UnionVariantIR, ...]
    models: tuple[str, ...]  # the member models, in the spec's order
    fallback: str  # the model for vendor-prefixed types


@dataclass(frozen=True)
class SchemaOverrideIR:
    """One departure from the synced schemas (spec/overrides/responses.json), already applied to `schemas`."""

    schema: str  # the schema it changes, or the one it adds
    property: str | None  # the property replaced or added; None: `replacement` is a whole added schema
    synced: Any  # the property as synced (None: the override adds it, or adds a whole schema)
    replacement: Any  # the property's JSON Schema, or the added schema (`required`: `{"required": [...]}`)
    reason: str
    keyword: str = "properties"  # what it replaces: a property, the schema's `required` list ("required"), or a
    # member added to a union's `oneOf` ("members": `replacement` is the member's `$ref`)


@dataclass(frozen=True)
class ResponsesIR:
    version: str
    schemas: dict[str, Any]  # component name → the synced JSON Schema (overrides applied), key order kept
    named_unions: tuple[str, ...]
    item_unions: tuple[ItemUnionIR, ...]
    streaming_event_types: tuple[str, ...]  # every event `type` of the StreamingEvent union
    overrides: tuple[SchemaOverrideIR, ...]  # where `schemas` departs from the synced copy, and why


@dataclass(frozen=True)
class ProjectIR:
    format_version: int
    generator_version: str
    sources: dict[str, tuple[str, ...]]  # section → the files it was read from
    encoding: EncodingIR
    tokens: TokensIR
    format: FormatIR
    builtin_namespaces: tuple[NamespaceIR, ...]
    grammar: GrammarIR
    parsing: ParsingIR
    mapping: MappingIR
    requests: RequestsIR
    server: ServerIR
    responses: ResponsesIR

    def sources_of(self, *sections: str) -> tuple[str, ...]:
        """The files the named sections were read from, sorted, without repeats."""
        return tuple(sorted({path for s in sections for path in self.sources[s]}))

    def format_token_ids(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted((t.format_token, t.id) for t in self.tokens.named if t.format_token))

    def all_special_tokens(self) -> tuple[SpecialToken, ...]:
        out = list(self.tokens.named)
        for lo, hi in self.tokens.reserved_ranges:
            for i in range(lo, hi + 1):
                out.append(SpecialToken(i, self.tokens.reserved_spelling.format(id=i), "reserved", None, None))
        return tuple(sorted(out, key=lambda t: t.id))

    def to_data(self) -> Any:
        return _to_data(self)

    def to_json(self) -> str:
        """The canonical form: keys in the order of the IR's definitions and of the sources (JSON Schema
        property order is meaningful), one space of indent, UTF-8 kept, a final newline."""
        return json.dumps(self.to_data(), indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ProjectIR:
        data = json.loads(text)
        data.pop("@generated", None)
        return typing.cast(ProjectIR, _from_data(cls, data))


def _to_data(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_to_data(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _to_data(v) for k, v in value.items()}
    return value


def _from_data(hint: Any, data: Any) -> Any:
    """Rebuild a value of type `hint` from its JSON data (the inverse of `_to_data`)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return None if data is None else _from_data(options[0], data)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = typing.get_type_hints(hint)
        return hint(**{f.name: _from_data(hints[f.name], data[f.name]) for f in dataclasses.fields(hint)})
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_from_data(args[0], v) for v in data)
        return tuple(_from_data(a, v) for a, v in zip(args, data, strict=True))
    if origin is dict:
        _, value_hint = typing.get_args(hint)
        return {k: _from_data(value_hint, v) for k, v in data.items()}
    return data
