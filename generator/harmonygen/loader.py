"""spec/ and grammar/ → the IR. Errors name the file and the JSON path; the files are checked against
each other (a name one file uses must be defined by the file that owns it)."""

from __future__ import annotations

import json
import re
import string
from typing import Any

from . import __version__
from .config import Config
from .errors import SpecError
from .ir import (
    EVENT_REPEATS,
    FORMAT_VERSION,
    REQUEST_FIELD_RULES,
    BrowserDisplayIR,
    EffortIR,
    EncodingIR,
    ErrorIR,
    FormatIR,
    HeaderIR,
    HeaderRuleIR,
    ItemKindIR,
    MappingIR,
    NamedWithPurposes,
    NamespaceIR,
    ParsingIR,
    ProjectIR,
    RepairIR,
    RequestErrorIR,
    RequestFieldIR,
    RequestsIR,
    RoleIR,
    ServerErrorIR,
    ServerIR,
    SpecialToken,
    TextRulesIR,
    TokensIR,
    ToolIR,
)
from .lalr_tables import GrammarError, compile_grammar
from .responses_ir import load_responses

__all__ = ["SpecError", "load_project"]

TOKENS = "harmony/tokens.json"
FORMAT = "harmony/format.json"
PARSING = "harmony/parsing.json"
BUILTINS = "harmony/builtin_tools.json"
MAPPING = "mapping/harmony_responses.json"
REQUESTS = "mapping/requests.json"
SERVER = "mapping/server.json"
GRAMMAR_FILE = "harmony.lark"
# What the runtime relies on a channel or a content type being there for.
CHANNEL_PURPOSES = ("reasoning", "preamble", "tool_calls", "answer")
CONTENT_TYPE_PURPOSES = ("function_arguments",)
# The texts a runtime fills, by spec file and top-level sections (None: the whole file but `texts` and `$` keys),
# checked against format.json's placeholder rule.
FILLED_TEXTS: tuple[tuple[str, tuple[str, ...] | None], ...] = (
    (FORMAT, None),
    (PARSING, ("details", "errors")),
    (MAPPING, None),
    (REQUESTS, None),
    (SERVER, None),
)
TEXTS_SECTION = "texts"
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(?::(json|pyrepr))?\}")


class _Doc:
    """A spec file; `get` walks a JSON path and checks the type found there."""

    def __init__(self, config: Config, name: str) -> None:
        self.rel = f"{config.spec.rstrip('/')}/{name}"
        try:
            self.data = json.loads(config.path(self.rel).read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise SpecError(f"{self.rel}: file not found") from exc
        except json.JSONDecodeError as exc:
            raise SpecError(f"{self.rel}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc

    def where(self, path: tuple[str | int, ...]) -> str:
        return "$" + "".join(f"[{k!r}]" if isinstance(k, str) else f"[{k}]" for k in path)

    def get(self, *path: str | int, kind: type | tuple[type, ...] = object) -> Any:
        node: Any = self.data
        for i, key in enumerate(path):
            try:
                node = node[key]
            except (KeyError, IndexError, TypeError) as exc:
                raise SpecError(f"{self.rel}: {self.where(path[: i + 1])} is missing") from exc
        if not isinstance(node, kind) or (kind is int and isinstance(node, bool)):
            raise SpecError(f"{self.rel}: {self.where(path)} should be {_kind_name(kind)}, found {type(node).__name__}")
        return node

    def opt(self, *path: str | int, kind: type | tuple[type, ...] = object) -> Any:
        try:
            return self.get(*path, kind=kind)
        except SpecError:
            parent = self.get(*path[:-1], kind=dict)
            if path[-1] not in parent:
                return None
            raise

    def table(self, *path: str | int) -> dict[str, Any]:
        return {k: v for k, v in self.get(*path, kind=dict).items() if not k.startswith("$")}

    def strings(self, *path: str | int) -> dict[str, str]:
        out = self.table(*path)
        for key, value in out.items():
            if not isinstance(value, str):
                raise SpecError(f"{self.rel}: {self.where((*path, key))} should be a string")
        return out

    def fail(self, path: tuple[str | int, ...], message: str) -> SpecError:
        return SpecError(f"{self.rel}: {self.where(path)} {message}")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer", bool: "a boolean"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _tokens(tok: _Doc) -> tuple[EncodingIR, TokensIR]:
    enc = tok.get("encoding", kind=dict)
    ranks = tok.get("encoding", "base_ranks", kind=dict)
    encoding = EncodingIR(
        name=tok.get("encoding", "name", kind=str),
        enum_member=tok.get("encoding", "enum_member", kind=str),
        tiktoken_name=tok.get("encoding", "tiktoken_name", kind=str),
        pattern=enc["pattern"],
        pattern_unicode_version=tok.get("encoding", "pattern_unicode_version", kind=str),
        pattern_recategorized_later=tuple(
            int(cp.removeprefix("U+"), 16) for cp in tok.get("encoding", "pattern_recategorized_later", kind=list)
        ),
        ranks_file=ranks["file"],
        ranks_sha256=ranks["sha256"],
        ranks_env_var=ranks["env_var"],
        ranks_tiktoken_name=ranks["tiktoken_name"],
    )
    opening = tok.get("spelling_affixes", "open", kind=str)
    closing = tok.get("spelling_affixes", "close", kind=str)
    named = []
    for i in range(len(tok.get("named", kind=list))):
        spelling = tok.get("named", i, "spelling", kind=str)
        if not (spelling.startswith(opening) and spelling.endswith(closing)):
            raise tok.fail(("named", i, "spelling"), f"does not start with {opening!r} and end with {closing!r}")
        named.append(
            SpecialToken(
                id=tok.get("named", i, "id", kind=int),
                spelling=spelling,
                kind=tok.get("named", i, "kind", kind=str),
                format_token=tok.opt("named", i, "format_token", kind=(str, type(None))),
                terminator=tok.opt("named", i, "terminator", kind=(str, type(None))),
            )
        )
    named.sort(key=lambda t: t.id)
    by_format = {t.format_token: t.id for t in named if t.format_token}
    stop_sets = {}
    for name, members in sorted(tok.table("stop_sets").items()):
        missing = [m for m in members if m not in by_format]
        if missing:
            raise tok.fail(("stop_sets", name), f"names unknown format tokens {missing}")
        stop_sets[name] = tuple(sorted(by_format[m] for m in members))
    ranges = tuple((int(lo), int(hi)) for lo, hi in tok.get("reserved", "ranges", kind=list))
    ids = [t.id for t in named] + [i for lo, hi in ranges for i in range(lo, hi + 1)]
    if len(ids) != len(set(ids)):
        raise SpecError(f"{tok.rel}: a token id is listed twice (named and reserved ranges overlap)")
    reserved = tok.get("reserved", "spelling", kind=str)
    if not (reserved.startswith(opening) and reserved.endswith(closing) and "{id}" in reserved):
        raise tok.fail(("reserved", "spelling"), f"should be {opening}…{{id}}…{closing}")
    for t in named:
        if (t.terminator is not None) != (t.kind == "stop"):
            raise SpecError(f"{tok.rel}: token {t.spelling} has a terminator if and only if it is a stop token")
    return encoding, TokensIR(opening, closing, tuple(named), reserved, ranges, stop_sets)


def _purposed(doc: _Doc, path: tuple[str, ...], required: tuple[str, ...]) -> tuple[NamedWithPurposes, ...]:
    out = []
    seen: dict[str, str] = {}
    for i in range(len(doc.get(*path, kind=list))):
        name = doc.get(*path, i, "name", kind=str)
        purposes = tuple(doc.get(*path, i, "purposes", kind=list))
        for purpose in purposes:
            if purpose in seen:
                raise doc.fail((*path, i), f"purpose {purpose!r} is also {seen[purpose]!r}'s")
            seen[purpose] = name
        out.append(NamedWithPurposes(name, purposes))
    missing = [p for p in required if p not in seen]
    if missing:
        raise doc.fail(path, f"has no entry for the purposes {missing}")
    return tuple(out)


def _format(fmt: _Doc) -> FormatIR:
    roles = tuple(
        RoleIR(
            fmt.get("roles", i, "name", kind=str),
            fmt.get("roles", i, "value", kind=str),
            fmt.get("roles", i, "debug_name", kind=str),
        )
        for i in range(len(fmt.get("roles", kind=list)))
    )
    efforts = tuple(
        EffortIR(
            fmt.get("reasoning_efforts", i, "name", kind=str),
            fmt.get("reasoning_efforts", i, "value", kind=str),
            fmt.get("reasoning_efforts", i, "rendered", kind=str),
        )
        for i in range(len(fmt.get("reasoning_efforts", kind=list)))
    )
    h = fmt.table("header")
    header = HeaderIR(
        render_order=tuple(fmt.get("header", "render_order", kind=list)),
        author_name_separator=fmt.get("header", "author_name_separator", kind=str),
        part_separator=fmt.get("header", "part_separator", kind=str),
        recipient_keyword=fmt.get("header", "recipient_keyword", kind=str),
        broadcast_recipient=fmt.get("header", "broadcast_recipient", kind=str),
        function_namespace=fmt.get("header", "function_namespace", kind=str),
        namespace_separator=fmt.get("header", "namespace_separator", kind=str),
        content_types=_purposed(fmt, ("header", "content_types"), CONTENT_TYPE_PURPOSES),
    )
    extra = sorted(set(h) - {f for f in HeaderIR.__dataclass_fields__})
    if extra:
        raise fmt.fail(("header",), f"has unknown keys {extra}")
    defaults = fmt.table("system_defaults")
    if defaults.get("reasoning_effort") not in {e.value for e in efforts}:
        raise fmt.fail(("system_defaults", "reasoning_effort"), "is not a reasoning effort's value")
    return FormatIR(
        roles=roles,
        reasoning_efforts=efforts,
        channels=_purposed(fmt, ("channels",), CHANNEL_PURPOSES),
        header=header,
        system_defaults=defaults,
        system_sections=fmt.strings("system_sections"),
        developer_sections=fmt.strings("developer_sections"),
        tools_section=fmt.strings("tools_section"),
        conversation=fmt.table("conversation"),
        browser_display=_browser_display(fmt),
        text_rules=_text_rules(fmt),
        errors=fmt.strings("errors"),
    )


def _text_rules(fmt: _Doc) -> TextRulesIR:
    """The text rules: white space as ascending, disjoint code-point ranges, and JSON's error text and limit."""
    path = ("text_rules",)
    extra = sorted(set(fmt.table(*path)) - {f for f in TextRulesIR.__dataclass_fields__} - {"$comment"})
    if extra:
        raise fmt.fail(path, f"has unknown keys {extra}")
    ranges: list[tuple[int, int]] = []
    for i, pair in enumerate(fmt.get(*path, "whitespace", kind=list)):
        ok = isinstance(pair, list) and len(pair) == 2 and all(type(n) is int for n in pair)
        if not ok or not 0 <= pair[0] <= pair[1] <= 0x10FFFF or (ranges and pair[0] <= ranges[-1][1] + 1):
            raise fmt.fail((*path, "whitespace", i), "is not a code-point range [first, last] after the one before")
        ranges.append((pair[0], pair[1]))
    return TextRulesIR(
        whitespace=tuple(ranges),
        json_syntax_error=fmt.get(*path, "json_syntax_error", kind=str),
        json_max_integer_digits=fmt.get(*path, "json_max_integer_digits", kind=int),
    )


BROWSER_CHARACTERS = (
    "link_open",
    "link_separator",
    "link_close",
    "link_open_in_text",
    "link_close_in_text",
    "separator_in_link_text",
)


def _browser_display(fmt: _Doc) -> BrowserDisplayIR:
    """The browser's display form: its link characters (one each, all different), wrap width and texts (their
    `$link_open`, `$link_separator`, `$link_close` replaced by the characters)."""
    path = ("browser_display",)
    chars = {key: fmt.get(*path, key, kind=str) for key in BROWSER_CHARACTERS}
    for key, char in chars.items():
        if len(char) != 1:
            raise fmt.fail((*path, key), f"should be one character, found {char!r}")
    if len(set(chars.values())) != len(chars):
        raise fmt.fail(path, f"has link characters that are the same: {chars}")
    known = set(BROWSER_CHARACTERS) | {"wrap_width", "texts"}
    extra = sorted(set(fmt.table(*path)) - known)
    if extra:
        raise fmt.fail(path, f"has unknown keys {extra}")
    width = fmt.get(*path, "wrap_width", kind=int)
    if width < 1:
        raise fmt.fail((*path, "wrap_width"), f"should be a positive number of columns, found {width}")
    links = {key: chars[key] for key in ("link_open", "link_separator", "link_close")}
    texts = {}
    for key, text in fmt.strings(*path, "texts").items():
        try:
            texts[key] = string.Template(text).substitute(links)
        except (KeyError, ValueError) as exc:
            raise fmt.fail((*path, "texts", key), f"names {exc}, which is none of {sorted(links)}") from None
    return BrowserDisplayIR(
        link_open=chars["link_open"],
        link_separator=chars["link_separator"],
        link_close=chars["link_close"],
        link_open_in_text=chars["link_open_in_text"],
        link_close_in_text=chars["link_close_in_text"],
        separator_in_link_text=chars["separator_in_link_text"],
        wrap_width=width,
        texts=texts,
    )


def _builtins(bi: _Doc) -> tuple[NamespaceIR, ...]:
    namespaces = []
    for n in range(len(bi.get("namespaces", kind=list))):
        tools = tuple(
            ToolIR(
                name=bi.get("namespaces", n, "tools", t, "name", kind=str),
                description=bi.get("namespaces", n, "tools", t, "description", kind=str),
                parameters=bi.opt("namespaces", n, "tools", t, "parameters", kind=dict),
            )
            for t in range(len(bi.get("namespaces", n, "tools", kind=list)))
        )
        namespaces.append(
            NamespaceIR(
                name=bi.get("namespaces", n, "name", kind=str),
                description=bi.opt("namespaces", n, "description", kind=(str, type(None))),
                tools=tools,
            )
        )
    return tuple(namespaces)


def _facts(tokens: TokensIR, fmt: FormatIR) -> dict[str, str]:
    """The facts a sentence of the spec may name as `$name`: control tokens by their format_token, the
    function namespace and its separator, the recipient keyword, channels and content types by their
    purposes, roles by their values."""
    facts = {t.format_token: t.spelling for t in tokens.named if t.format_token}
    h = fmt.header
    facts.update(namespace=h.function_namespace, separator=h.namespace_separator, recipient_keyword=h.recipient_keyword)
    facts.update({p: c.name for c in (*fmt.channels, *h.content_types) for p in c.purposes})
    facts.update({r.value: r.value for r in fmt.roles})
    return facts


def _sentences(doc: _Doc, path: str, facts: dict[str, str]) -> dict[str, str]:
    """A table of texts, each `$name` in them replaced by the fact it names."""
    out = {}
    for key, text in doc.strings(path).items():
        try:
            out[key] = string.Template(text).substitute(facts)
        except (KeyError, ValueError) as exc:
            raise doc.fail((path, key), f"names {exc}, which is not a fact; known: {sorted(facts)}") from None
    return out


def _repairs(par: _Doc, rules: dict[str, str], details: dict[str, str]) -> dict[str, RepairIR]:
    """Each rule with a detail text → that text and the placeholder it sets aside (`repairs` names the exceptions)."""
    given = par.table("repairs")
    for rule in given:
        if rule not in rules:
            raise par.fail(("repairs", rule), f"is not a rule of recovery_rules; known: {sorted(rules)}")
    out = {}
    for rule in rules:
        row = given.get(rule, {})
        key = par.get("repairs", rule, "detail", kind=str) if "detail" in row else rule
        if key not in details:
            if "detail" in row:
                raise par.fail(("repairs", rule, "detail"), f"names {key!r}, which is not a key of details")
            continue
        aside = par.get("repairs", rule, "sets_aside", kind=str) if "sets_aside" in row else None
        if aside is not None and "{" + aside not in details[key]:
            raise par.fail(("repairs", rule, "sets_aside"), f"names {aside!r}, which is no placeholder of its detail")
        out[rule] = RepairIR(details[key], aside)
    return out


_BARS = ("open", "close", "both")


def _near_miss_bars(par: _Doc) -> tuple[str, ...]:
    bars = par.get("near_miss_spellings", "bars_left_out", kind=list)
    for i, bar in enumerate(bars):
        if bar not in _BARS or bars.index(bar) != i:
            raise par.fail(("near_miss_spellings", "bars_left_out", i), f"should be one of {list(_BARS)}, once each")
    return tuple(bars)


def fill(template: str, /, **values: object) -> str:
    """`template` filled under format.json's placeholder rule (the docs templates' `fill` filter)."""

    def one(match: re.Match[str]) -> str:
        name, form = match.group(1), match.group(2)
        if name is None:
            return match.group(0)[0]
        value = values[name]
        if form is None:
            return str(value)
        return repr(value) if form == "pyrepr" else json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    return _PLACEHOLDER.sub(one, template)


def _strings_in(node: Any, path: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    if isinstance(node, str):
        return [(path, node)]
    if isinstance(node, dict):
        items: list[tuple[str | int, Any]] = [(k, v) for k, v in node.items() if not k.startswith("$")]
    elif isinstance(node, list):
        items = list(enumerate(node))
    else:
        return []
    return [found for key, value in items for found in _strings_in(value, (*path, key))]


def _check_texts(docs: dict[str, _Doc]) -> None:
    """Every filled text uses only the placeholder rule's forms; `{name:pyrepr}` only the reference's texts."""
    fmt = docs[FORMAT]
    allowed = set(fmt.get(TEXTS_SECTION, "pyrepr_texts", kind=list))
    for name, sections in FILLED_TEXTS:
        doc = docs[name]
        roots = sections if sections is not None else tuple(k for k in doc.data if k != TEXTS_SECTION)
        for root in roots:
            for path, text in _strings_in(doc.get(root), (root,)):
                dotted = ".".join(str(p) for p in path)
                for match in _PLACEHOLDER.finditer(text):
                    if match.group(2) == "pyrepr" and not (name == FORMAT and dotted in allowed):
                        raise doc.fail(path, f"uses {match.group(0)}, which only {FORMAT}'s texts.pyrepr_texts may use")
                rest = _PLACEHOLDER.sub("", text)
                if "{" in rest or "}" in rest:
                    at = min(i for i in (rest.find("{"), rest.find("}")) if i >= 0)
                    near = rest[max(0, at - 10) : at + 12]
                    rule = f"{FORMAT}'s texts rule: write {{name}}, {{name:json}}, {{{{ or }}}}"
                    raise doc.fail(path, f"has a brace that is no placeholder near {near!r}; {rule}")


REGIONS = ("outside", "header", "body", "stripped", "stopped")
MODES = ("lenient", "strict")
HEADER_RULE_LISTS = ("word", "author_word", "control_token")


def _control_triggers(par: _Doc, tokens: TokensIR, actions: dict[str, str]) -> dict[str, dict[str, dict[str, str]]]:
    """Mode → region → token kind → action; every region and kind in `lenient`, `strict` rows replacing them."""
    kinds = sorted({"stop"} | {t.format_token for t in tokens.named if t.format_token and t.kind != "stop"})
    out: dict[str, dict[str, dict[str, str]]] = {}
    for mode in MODES:
        table = par.table("control_triggers", mode)
        rows: dict[str, dict[str, str]] = {}
        for region in REGIONS:
            if region not in table and mode == "lenient":
                raise par.fail(("control_triggers", mode), f"has no row for region {region!r}")
            given = par.strings("control_triggers", mode, region) if region in table else {}
            for kind, action in given.items():
                if kind not in kinds:
                    raise par.fail(("control_triggers", mode, region, kind), f"is no token kind; known: {kinds}")
                if action not in actions:
                    raise par.fail(("control_triggers", mode, region, kind), f"names {action!r}, not an action")
            missing = [k for k in kinds if k not in given]
            if mode == "lenient" and missing:
                raise par.fail(("control_triggers", mode, region), f"has no action for {missing}")
            rows[region] = {**out["lenient"][region], **given} if mode == "strict" else dict(given)
        for region in table:
            if region not in REGIONS:
                raise par.fail(("control_triggers", mode, region), f"is no region; known: {list(REGIONS)}")
        out[mode] = rows
    return out


def _header_rules(par: _Doc, rules: dict[str, str]) -> dict[str, tuple[HeaderRuleIR, ...]]:
    """`header_rules`: each list's rows, their conditions, actions and repairs checked against the vocabularies."""
    conditions, actions = par.strings("header_conditions"), par.strings("header_actions")
    out = {}
    for name in HEADER_RULE_LISTS:
        rows = par.get("header_rules", name, kind=list)
        parsed = []
        for i, row in enumerate(rows):
            path = ("header_rules", name, i)
            when = tuple(par.get(*path, "when", kind=list))
            for j, condition in enumerate(when):
                if condition not in conditions:
                    raise par.fail((*path, "when", j), f"names {condition!r}, which is not a key of header_conditions")
            then = par.get(*path, "then", kind=str)
            if then not in actions:
                raise par.fail((*path, "then"), f"names {then!r}, which is not a key of header_actions")
            repair = par.get(*path, "repair", kind=str) if "repair" in row else None
            if repair is not None and repair not in rules:
                raise par.fail((*path, "repair"), f"names {repair!r}, which is not a rule of recovery_rules")
            parsed.append(HeaderRuleIR(when, then, repair))
        if not parsed or parsed[-1].when:
            raise par.fail(("header_rules", name), "should end with a row without conditions (what else happens)")
        out[name] = tuple(parsed)
    return out


def _parsing(par: _Doc, facts: dict[str, str], tokens: TokensIR) -> ParsingIR:
    rules = _sentences(par, "recovery_rules", facts)
    details = _sentences(par, "details", facts)
    control_actions = _sentences(par, "control_actions", facts)
    return ParsingIR(
        eos_terminator=par.get("eos_terminator", kind=str),
        events=par.strings("events"),
        units=par.strings("units"),
        recovery_rules=rules,
        repairs=_repairs(par, rules, details),
        near_miss_bars=_near_miss_bars(par),
        control_triggers=_control_triggers(par, tokens, control_actions),
        control_actions=control_actions,
        header_rules=_header_rules(par, rules),
        header_conditions=_sentences(par, "header_conditions", facts),
        header_actions=_sentences(par, "header_actions", facts),
        details=details,
        errors=_sentences(par, "errors", facts),
        peer_decisions=_sentences(par, "peer_decisions", facts),
    )


def _mapping(mp: _Doc, fmt: FormatIR, responses: Any) -> MappingIR:
    event_types, item_types = responses.streaming_event_types, _output_item_types(responses)
    purposes = {p for c in fmt.channels for p in c.purposes}
    known_events = set(event_types)

    def event(path: tuple[str | int, ...]) -> str:
        name: str = mp.get(*path, kind=str)
        if name not in known_events:
            raise mp.fail(path, f"names {name!r}, which is not an event of spec/responses' StreamingEvent")
        return name

    items = []
    for kind, raw in mp.table("items").items():
        path: tuple[str, ...] = ("items", kind)
        item_type = mp.get(*path, "type", kind=str)
        if item_type not in item_types and ":" not in item_type:
            raise mp.fail((*path, "type"), f"{item_type!r} is neither an output item type nor vendor-prefixed")
        text = arguments = None
        if "text" in raw:
            text = {"part": mp.get(*path, "text", "part", kind=str)}
            text.update({key: event((*path, "text", key)) for key in ("delta", "done")})
        if "arguments" in raw:
            arguments = {key: event((*path, "arguments", key)) for key in ("delta", "done")}
        phases = mp.strings(*path, "phases") if "phases" in raw else None
        for purpose in [*(phases or {}), *([raw["channel_purpose"]] if "channel_purpose" in raw else [])]:
            if purpose not in purposes:
                raise mp.fail(path, f"names channel purpose {purpose!r}, which no channel in {FORMAT} has")
        items.append(
            ItemKindIR(
                kind=kind,
                type=item_type,
                id_prefix=mp.get(*path, "id_prefix", kind=str),
                channel_purpose=mp.opt(*path, "channel_purpose", kind=str),
                call_id_prefix=mp.opt(*path, "call_id_prefix", kind=str),
                text=text,
                arguments=arguments,
                phases=phases,
                namespace=mp.opt(*path, "namespace", kind=str),
            )
        )
    stream = mp.table("stream")
    for key, value in stream.items():
        if isinstance(value, str):
            event(("stream", key))
        elif isinstance(value, list):
            for i in range(len(value)):
                event(("stream", key, i))
        else:
            for sub in value:
                event(("stream", key, sub))
    errors = tuple(
        ErrorIR(code, mp.get("errors", code, "type", kind=str), mp.get("errors", code, "message", kind=str))
        for code in mp.table("errors")
    )
    order: dict[str, tuple[str, ...]] = {}
    for item in items:
        seq = [stream["item_added"]]
        if item.text is not None:
            seq += [stream["part_added"], item.text["delta"] + EVENT_REPEATS, item.text["done"], stream["part_done"]]
        if item.arguments is not None:
            seq += [item.arguments["delta"] + EVENT_REPEATS, item.arguments["done"]]
        order[item.kind] = (*seq, stream["item_done"])
    response = mp.strings("response")
    _check_header_fields(mp, response, responses)
    hosted: dict[str, dict[str, Any]] = {}
    for kind in mp.table("hosted"):
        path = ("hosted", kind)
        item_type = mp.get(*path, "item", kind=str)
        if item_type not in item_types:
            raise mp.fail((*path, "item"), f"{item_type!r} is no output item type of spec/responses or its overrides")
        hosted[kind] = {
            "tool_types": [
                mp.get(*path, "tool_types", i, kind=str) for i in range(len(mp.get(*path, "tool_types", kind=list)))
            ],
            "item": item_type,
            "id_prefix": mp.get(*path, "id_prefix", kind=str),
            "namespace": mp.opt(*path, "namespace", kind=str),
            **{
                key: [event((*path, key, i)) for i in range(len(mp.get(*path, key, kind=list)))]
                for key in ("before", "completed", "failed")
            },
            "includes": [
                mp.get(*path, "includes", i, kind=str) for i in range(len(mp.get(*path, "includes", kind=list)))
            ],
        }
        if mp.opt(*path, "search_context_tokens", kind=dict) is not None:
            hosted[kind].update(_search_context(mp, path))
    return MappingIR(
        items=tuple(items),
        input=_input(mp, items, responses),
        response=response,
        stream=stream,
        errors=errors,
        openai_reasoning_events=mp.strings("openai_reasoning_events"),
        sse=mp.strings("sse"),
        arguments=mp.strings("arguments", "errors"),
        chat=mp.table("chat"),
        event_order=order,
        hosted=hosted,
    )


def _search_context(mp: _Doc, path: tuple[str, ...]) -> dict[str, Any]:
    """A hosted kind's `search_context_size` → tokens per display (positive integers), and its default size."""
    tokens = mp.table(*path, "search_context_tokens")
    for size in tokens:
        if mp.get(*path, "search_context_tokens", size, kind=int) < 1:
            raise mp.fail((*path, "search_context_tokens", size), "should be a positive number of tokens")
    default = mp.get(*path, "search_context_default", kind=str)
    if default not in tokens:
        raise mp.fail((*path, "search_context_default"), f"names {default!r}, which is none of {sorted(tokens)}")
    return {"search_context_tokens": tokens, "search_context_default": default}


INPUT_KEYS = ("call_schema", "tool_output_type", "tool_output_schema")
# The fields of `response` in which output items keep the header the model wrote, and the input items that read
# them back (each must declare the field: the synced schemas lack them, spec/overrides/responses.json adds them).
HEADER_FIELDS = {
    "channel_field": ("FunctionCallItemParam", "AssistantMessageItemParam"),
    "content_type_field": ("FunctionCallItemParam", "AssistantMessageItemParam", "ReasoningItemParam"),
}


def _input(mp: _Doc, items: list[ItemKindIR], responses: Any) -> dict[str, str]:
    """How the emitted items come back as input: the schemas named must exist, the output type be vendor-prefixed
    and no output item's type."""
    table = mp.strings("input")
    if sorted(table) != sorted(INPUT_KEYS):
        raise mp.fail(("input",), f"should have exactly the keys {sorted(INPUT_KEYS)}, found {sorted(table)}")
    for key in ("call_schema", "tool_output_schema"):
        if table[key] not in responses.schemas:
            raise mp.fail(("input", key), f"names {table[key]!r}, which spec/responses and its overrides lack")
    kind = table["tool_output_type"]
    if ":" not in kind or kind in {item.type for item in items}:
        raise mp.fail(("input", "tool_output_type"), f"{kind!r} should be vendor-prefixed and no output item's type")
    return table


def _check_header_fields(mp: _Doc, response: dict[str, str], responses: Any) -> None:
    """The fields output items keep their header in must be fields of the input items that read them back."""
    for key, schemas in HEADER_FIELDS.items():
        for name in schemas:
            props = responses.schemas.get(name, {}).get("properties", {})
            if key in response and response[key] not in props:
                raise mp.fail(
                    ("response", key),
                    f"names {response[key]!r}, which {name} lacks: add it in spec/overrides/responses.json",
                )


_NO_CAPABILITY = "which is none of `capabilities`"


def _requests(rq: _Doc, responses: Any) -> RequestsIR:
    errors = tuple(
        RequestErrorIR(
            handle, rq.get("errors", handle, "code", kind=str), rq.get("errors", handle, "message", kind=str)
        )
        for handle in rq.table("errors")
    )
    capabilities = rq.strings("capabilities")
    plan_parts = rq.strings("plan_parts")
    fields = _request_fields(rq, responses, {e.handle for e in errors}, capabilities, plan_parts)
    for include, capability in rq.table("includes").items():
        if capability is not None and capability not in capabilities:
            raise rq.fail(("includes", include), f"names the capability {capability!r}, {_NO_CAPABILITY}")
    hosted_tools = rq.strings("hosted_tools")
    if set(hosted_tools) != {"omitted", "refused"}:
        raise rq.fail(
            ("hosted_tools",), f"should hold the reasons 'omitted' and 'refused', found {sorted(hosted_tools)}"
        )
    return RequestsIR(
        max_json_depth=rq.get("limits", "max_json_depth", kind=int),
        max_schema_chars=rq.get("limits", "max_schema_chars", kind=int),
        error_type=rq.get("error_type", kind=str),
        errors=errors,
        validation=rq.strings("validation"),
        fields=fields,
        plan_parts=plan_parts,
        includes=dict(rq.table("includes")),
        capabilities=capabilities,
        hosted_tools=hosted_tools,
    )


def _request_fields(
    rq: _Doc, responses: Any, errors: set[str], capabilities: dict[str, str], plan_parts: dict[str, str]
) -> tuple[RequestFieldIR, ...]:
    """The `fields` table: one row per field of the request (an object field's fields by their paths), each with a
    known rule, plan part, capability and error; a field outside the spec is a top-level one, and any value of it
    asks for what it needs."""
    from .responses_ir import schema

    def props_of(node: Any) -> dict[str, Any]:
        """The properties an object schema node offers (through nullable unions and `$ref`s)."""
        props: dict[str, Any] = {}
        for branch in [node, *node.get("anyOf", []), *node.get("oneOf", [])]:
            if "$ref" in branch:
                branch = schema(responses, branch["$ref"].removesuffix(".json"))
            props.update(branch.get("properties", {}))
        return props

    body = props_of(schema(responses, "CreateResponseBody"))
    out: list[RequestFieldIR] = []
    for field in rq.table("fields"):
        path = ("fields", field)
        rule = rq.get(*path, "rule", kind=str)
        if rule not in REQUEST_FIELD_RULES:
            raise rq.fail((*path, "rule"), f"should be one of {list(REQUEST_FIELD_RULES)}, found {rule!r}")
        refused = rule == "refused"
        head, *rest = field.split(".")
        node = body.get(head)
        for part in rest:
            node = props_of(node).get(part) if node is not None else None
        if node is None and (rest or head in body):
            raise rq.fail(path, f"names {field!r}, which is not a field of an Open Responses request")
        capability = rq.opt(*path, "capability", kind=(str, type(None)))
        neutral = rq.opt(*path, "neutral", kind=list)
        error = rq.opt(*path, "error", kind=str)
        if not refused and (capability is not None or neutral is not None or error is not None):
            raise rq.fail(path, f"is {rule!r}: only a refused field has a capability, neutral values or an error")
        if refused and neutral is None:
            raise rq.fail((*path, "neutral"), "is missing: a refused field lists the values that ask for nothing")
        if node is None and refused and neutral:
            raise rq.fail((*path, "neutral"), "should be empty: any value of a field outside the spec asks")
        if capability is not None and capability not in capabilities:
            raise rq.fail((*path, "capability"), f"names the capability {capability!r}, {_NO_CAPABILITY}")
        if node is None and rule == "honoured":
            raise rq.fail((*path, "rule"), "is 'honoured', but the bridge reads no field outside the spec")
        if refused:
            error = error or "not_honoured"
            if error not in errors:
                raise rq.fail((*path, "error"), f"names {error!r}, which is none of `errors`")
        feeds = rq.get(*path, "feeds", kind=str)
        if feeds not in plan_parts:
            raise rq.fail((*path, "feeds"), f"names {feeds!r}, which is none of `plan_parts`")
        why = rq.get(*path, "why", kind=str)
        out.append(RequestFieldIR(field, rule, capability, tuple(neutral or ()), error, why, feeds, node is not None))
    listed = {f.field for f in out}
    for name, prop in body.items():
        inner = [f"{name}.{sub}" for sub in props_of(prop)]
        if name not in listed and not (inner and all(sub in listed for sub in inner)):
            raise rq.fail(("fields",), f"has no row for the request field {name!r} (nor for each of its fields)")
        if name in listed and any(sub in listed for sub in inner):
            raise rq.fail(("fields", name), "has a row, and so do fields of it: one row per field")
    return tuple(out)


def _check_browser_description(
    bi: _Doc, namespaces: tuple[NamespaceIR, ...], mapping: MappingIR, display: BrowserDisplayIR
) -> None:
    """The browser namespace's description (the reference's text, shown to the model) states the citation form
    with format.json's link characters: the two files must not disagree on them."""
    name = mapping.hosted.get("web_search", {}).get("namespace")
    namespace = next((ns for ns in namespaces if ns.name == name), None)
    if namespace is None:
        raise SpecError(f"{MAPPING}: the web_search namespace {name!r} is no namespace of {bi.rel}")
    cited = display.link_open + "{cursor}" + display.link_separator
    if cited not in (namespace.description or "") or display.link_close not in (namespace.description or ""):
        raise SpecError(
            f"{bi.rel}: the {name!r} namespace's description does not state the citation form {cited}…"
            f"{display.link_close} of {FORMAT}'s browser_display"
        )


def _range(doc: _Doc, *path: str) -> tuple[int, int]:
    """A closed range `[low, high]` of integers, low first."""
    bounds = doc.get(*path, kind=list)
    if len(bounds) != 2 or not all(type(b) is int for b in bounds) or bounds[0] > bounds[1]:
        raise doc.fail(path, f"expected [low, high], two integers with low <= high, found {bounds!r}")
    return bounds[0], bounds[1]


def _server(sv: _Doc, requests: RequestsIR, mapping: MappingIR) -> ServerIR:
    """The server's errors, resolving those the bridge or the mapping already names to their type and code."""
    bridge = {e.handle: e for e in requests.errors}
    named = {e.code: e for e in mapping.errors}
    errors = []
    for handle in sv.table("errors"):
        path = ("errors", handle)
        status = sv.get(*path, "status", kind=(int, type(None)))
        request_error = sv.opt(*path, "request_error", kind=str)
        mapping_error = sv.opt(*path, "mapping_error", kind=str)
        if request_error is not None:
            if request_error not in bridge:
                raise sv.fail((*path, "request_error"), f"names {request_error!r}, which {REQUESTS} has no error for")
            type_, code = requests.error_type, bridge[request_error].code
        elif mapping_error is not None:
            if mapping_error not in named:
                raise sv.fail((*path, "mapping_error"), f"names {mapping_error!r}, which {MAPPING} has no error for")
            type_, code = named[mapping_error].type, named[mapping_error].code
        else:
            type_, code = sv.get(*path, "type", kind=str), sv.get(*path, "code", kind=str)
        errors.append(ServerErrorIR(handle, status, type_, code, sv.get(*path, "when", kind=str)))
    return ServerIR(
        errors=tuple(errors),
        interrupted=sv.strings("interrupted"),
        objects=sv.strings("objects"),
        probes=sv.strings("probes"),
        list_paging=sv.table("list"),
        sampling={field: _range(sv, "sampling", field) for field in sv.table("sampling")},
        input_item_id_prefixes=sv.strings("input_item_id_prefixes"),
        compaction=sv.strings("compaction"),
        encrypted_reasoning=sv.strings("encrypted_reasoning"),
        background=sv.strings("background"),
    )


def _output_item_types(responses: Any) -> set[str]:
    from .responses_ir import _enum_of, schema

    out = set()
    for ref in schema(responses, "ItemField")["oneOf"]:
        values, _ = _enum_of(schema(responses, ref["$ref"].removesuffix(".json")).get("properties", {}).get("type"))
        out.update(values)
    return out


def load_project(config: Config) -> ProjectIR:
    tok, fmt_doc = _Doc(config, TOKENS), _Doc(config, FORMAT)
    par, bi, mp = _Doc(config, PARSING), _Doc(config, BUILTINS), _Doc(config, MAPPING)
    rq, sv = _Doc(config, REQUESTS), _Doc(config, SERVER)
    _check_texts({FORMAT: fmt_doc, MAPPING: mp, REQUESTS: rq, SERVER: sv, PARSING: par})
    encoding, tokens = _tokens(tok)
    fmt = _format(fmt_doc)
    parsing = _parsing(par, _facts(tokens, fmt), tokens)
    grammar_rel = f"{config.grammar.rstrip('/')}/{GRAMMAR_FILE}"
    try:
        grammar_text = config.path(grammar_rel).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SpecError(f"{grammar_rel}: file not found") from exc
    try:
        grammar = compile_grammar(
            grammar_text,
            grammar_rel,
            control_terminals={t.id: t.format_token.upper() for t in tokens.named if t.format_token},
            lexer_terminals=par.strings("lexer_terminals"),
        )
    except GrammarError as exc:
        raise SpecError(str(exc)) from exc
    rules = {r.origin for r in grammar.rules}
    unknown = [part for part in fmt.header.render_order if part not in rules]
    if unknown:
        raise fmt_doc.fail(("header", "render_order"), f"names {unknown}, which are not rules of {grammar_rel}")
    responses, responses_sources = load_responses(config)
    mapping = _mapping(mp, fmt, responses)
    builtins = _builtins(bi)
    _check_browser_description(bi, builtins, mapping, fmt.browser_display)
    requests = _requests(rq, responses)
    return ProjectIR(
        format_version=FORMAT_VERSION,
        generator_version=__version__,
        sources={
            "generator": ("generator/harmonygen/ir.py",),
            "encoding": (tok.rel,),
            "tokens": (tok.rel,),
            "format": (fmt_doc.rel,),
            "builtin_namespaces": (bi.rel,),
            "grammar": (grammar_rel, tok.rel, par.rel),
            "parsing": (par.rel,),
            "mapping": (mp.rel, *responses_sources),
            "requests": (rq.rel, *responses_sources),
            "server": (sv.rel, rq.rel, mp.rel),
            "responses": responses_sources,
        },
        encoding=encoding,
        tokens=tokens,
        format=fmt,
        builtin_namespaces=builtins,
        grammar=grammar,
        parsing=parsing,
        mapping=mapping,
        requests=requests,
        server=_server(sv, requests, mapping),
        responses=responses,
    )
