"""TypeScript target: the IR → `typescript/`, an ESM package whose hand-written half is runtime/typescript.

The package is assembled from three parts:
- data modules (`src/_generated/*.ts`) lowered from the IR here and rendered from templates/typescript/;
- the Open Responses types (`src/types/index.ts`), compiled from the IR's schemas by json-schema-to-typescript
  (pinned in generator/node, run with node) and completed by a template;
- `package.json`, `package-lock.json` and `tsconfig.json`, built as JSON from the runtime's manifest
  (`runtime/typescript/package.json`: name, version, dependencies; its lock is copied) plus what the layout
  decides: where the compiled runtime and data modules land, the `#generated/*` import alias, `bin`, `exports`.

Names are made here, never in templates: constants keep the Python target's names (the purpose of a fact,
never its value), enum members are PascalCase. Output is a pure function of the IR and those two files.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from ..errors import SpecError
from ..ir import ProjectIR
from ..responses_ir import lower_bundle
from ..tsprint import ts_literal, ts_type
from .base import Output

TARGET = "typescript"
TEMPLATE_DIR = TARGET
DATA_DIR = "src/_generated"
TYPES_DIR = "src/types"
GENERATED_ALIAS = "#generated/*"
TYPES_ALIAS = "#types"
BIN_NAME = "harmony-responses"
BIN_MODULE = "bin"
INDEX_MODULE = "index"
OUT_DIR = "dist"
# The generator's own node tool (beside the harmonygen package, not in the project it generates).
NODE_TOOL = Path(__file__).resolve().parents[2] / "node" / "schema-to-ts.mjs"
TYPES_ROOT_NAME = "OpenResponses"
JSON_VALUE = "JsonValue"
# The runtime's manifest fields the package keeps as they are; the rest of package.json is the layout's.
MANIFEST_FIELDS = ("name", "version", "license", "type", "engines", "dependencies", "devDependencies")
DESCRIPTION = "OpenAI's Harmony format and the Open Responses protocol, generated from a spec by harmonygen"


class GenerationError(SpecError):
    """The TypeScript target cannot be built from what it was given (missing tool, stale lock)."""


@dataclass(frozen=True)
class Constant:
    name: str
    type: str
    literal: str
    doc: str


def symbol(*parts: str) -> str:
    """A constant's name from spec keys: `("sys", "knowledge_cutoff")` → `SYS_KNOWLEDGE_CUTOFF`."""
    return "_".join(parts).upper().replace("-", "_").replace(".", "_").replace(":", "_")


def member(name: str) -> str:
    """An enum member's name: `END_DONE_SAMPLING` → `EndDoneSampling`."""
    return "".join(part.capitalize() for part in name.lower().split("_") if part)


def values_name(enum: str) -> str:
    """The constant listing an enum's members: `ReasoningEffort` → `REASONING_EFFORT_VALUES`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum).upper() + "_VALUES"


def _enum(name: str, doc: str, members: list[tuple[str, str]]) -> tuple[str, str, str, list[tuple[str, str]]]:
    return (name, values_name(name), doc, members)


def constant(name: str, value: Any, type_: str = "", doc: str = "") -> Constant:
    return Constant(name, type_ or ts_type(value), ts_literal(value), doc)


def _group(prefix: str, pairs: Iterable[tuple[str, Any]]) -> list[Constant]:
    return [constant(symbol(prefix, key), value) for key, value in pairs]


def spec_constants(ir: ProjectIR) -> list[Constant]:
    """`src/_generated/spec.ts`: every fact the runtime reads, named as the Python target names it."""
    enc, tok, fmt, h = ir.encoding, ir.tokens, ir.format, ir.format.header
    out = [
        constant("ENCODING_NAME", enc.name, doc="The reference's name for the encoding."),
        constant("ENCODING_TIKTOKEN_NAME", enc.tiktoken_name),
        constant("PATTERN", enc.pattern, doc="The o200k_base pre-tokenizer split pattern, as the spec writes it."),
        constant(
            "PATTERN_JS",
            js_pattern(enc.pattern),
            doc="The same pattern in JavaScript syntax (flags `gu`): inline `(?i:…)` groups spelled out, and "
            "`\\s` as Unicode White_Space (JavaScript's `\\s` adds U+FEFF and lacks U+0085).",
        ),
        constant("RANKS_FILE", enc.ranks_file),
        constant("RANKS_SHA256", enc.ranks_sha256),
        constant("RANKS_ENV_VAR", enc.ranks_env_var),
        constant("RANKS_TIKTOKEN_NAME", enc.ranks_tiktoken_name),
        constant("SPELLING_OPEN", tok.spelling_open, doc="Every special token's spelling starts with this."),
        constant("SPELLING_CLOSE", tok.spelling_close, doc="Every special token's spelling ends with this."),
        constant(
            "NAMED_TOKENS",
            {t.spelling: t.id for t in tok.named},
            doc="Special tokens with a spelling of their own; the rest are reserved.",
        ),
        constant("TOKEN_KINDS", {t.id: t.kind for t in tok.named}),
        constant("RESERVED_RANGES", tok.reserved_ranges, "readonly (readonly [number, number])[]", "Inclusive."),
        constant("RESERVED_SPELLING", tok.reserved_spelling),
    ]
    formatted = sorted((t for t in tok.named if t.format_token), key=lambda t: str(t.format_token))
    out += [constant(symbol("token", str(t.format_token)), t.id) for t in formatted]
    out += [constant(symbol("spelling", str(t.format_token)), t.spelling) for t in formatted]
    out += [constant(name.upper(), ids, "readonly number[]") for name, ids in tok.stop_sets.items()]
    out.append(
        constant(
            "TERMINATORS",
            {t.id: t.terminator for t in tok.named if t.terminator},
            doc="Stop token → how a message it ends is said to end.",
        )
    )
    out.append(constant("ROLE_DEBUG_NAMES", {r.value: r.debug_name for r in fmt.roles}))
    out.append(constant("REASONING_RENDERED", {e.value: e.rendered for e in fmt.reasoning_efforts}))
    out.append(constant("CHANNELS", tuple(c.name for c in fmt.channels), doc="Every channel, in the spec's order."))
    out += [constant(symbol("channel", p), c.name) for c in fmt.channels for p in c.purposes]
    out.append(
        constant(
            "CHANNEL_BY_PURPOSE",
            {p: c.name for c in fmt.channels for p in c.purposes},
            doc="What a channel is used for → the channel.",
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
    out += [constant(symbol("system_default", k), v, "string | null" if v is None else "") for k, v in defaults.items()]
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
    out.append(constant("RECOVERY_RULES", p.recovery_rules, doc="Lenient repairs: rule id → what it does."))
    out += [constant(symbol("recovery", rule), rule) for rule in p.recovery_rules]
    out += _group("parse_err", p.errors.items())
    out += _mapping_constants(ir)
    out += _request_constants(ir)
    namespace_type = (
        "Readonly<Record<string, { readonly name: string; readonly description: string | null; "
        f"readonly tools: readonly {{ readonly name: string; readonly description: string; "
        f"readonly parameters: {JSON_VALUE} }}[] }}>>"
    )
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
            namespace_type,
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
            doc="Item kind → its wire type, id prefixes, the channel purpose that picks it, and its events.",
        ),
        constant("EVENT_ORDER", m.event_order, doc="Item kind → its events, in order."),
    ]
    out += _group("response", m.response.items())
    out += [constant(symbol("stream", key), value) for key, value in m.stream.items()]
    out += [constant(symbol("error", e.code), e.code) for e in m.errors]
    out.append(constant("ERRORS", {e.code: {"type": e.type, "message": e.message} for e in m.errors}))
    out.append(constant("OPENAI_REASONING_EVENTS", m.openai_reasoning_events))
    out += _group("sse", m.sse.items())
    out += _group("chat", m.chat.items())
    return out


def _request_constants(ir: ProjectIR) -> list[Constant]:
    """What the request bridge accepts, refuses and says: the Python target's names and values."""
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
            "Readonly<Record<string, { readonly code: string; readonly message: string }>>",
            "Request error by handle → the code a client sees and the message (`{fields}` shown as JSON).",
        ),
    ]
    out += [constant(symbol("request_error", e.handle), e.handle) for e in r.errors]
    out += [
        constant(
            "HONOURED_BY_CALLER",
            tuple((f.field, f.capability, f.neutral, f.why) for f in r.honoured_by_caller),
            "readonly (readonly [string, string | null, readonly (string | number | boolean | null)[], string])[]",
            "Request fields the bridge honours only with its caller: (field path, capability, neutral values, why).",
        ),
        constant(
            "EXTRA_FIELDS",
            {f.field: (f.capability, f.why) for f in r.extra_fields},
            "Readonly<Record<string, readonly [string | null, string]>>",
            "Fields outside the spec that clients send → (the capability that honours it, why not here).",
        ),
        constant(
            "INCLUDES",
            r.includes,
            "Readonly<Record<string, string | null>>",
            "`include` values → the capability that honours it.",
        ),
    ]
    return out


def grammar_constants(ir: ProjectIR) -> list[Constant]:
    g = ir.grammar
    origins = sorted({r.origin for r in g.rules if not r.origin.startswith("_")})  # not lark's helper rules
    out = [
        constant("END", g.end_terminal, doc="The end-of-input terminal."),
        constant("START_RULE", g.start_rule, doc="The rule a whole input reduces to."),
        constant("TERMINALS", g.terminals, "readonly string[]", "Every terminal but END, sorted."),
        constant(
            "CONTROL_TERMINALS",
            dict(g.control_terminals),
            doc="Token id → terminal, for the control tokens the grammar names.",
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
            "readonly (readonly [string, number])[]",
            "Rule index → (origin, number of symbols it pops).",
        ),
        constant(
            "RULE_TEXTS",
            tuple(f"{r.origin}: {' '.join(r.expansion)}".rstrip() for r in g.rules),
            "readonly string[]",
            "Rule index → the rule as text, for messages and tests.",
        ),
        constant("START_STATE", g.start_state, doc="The state before any input."),
        constant("ACCEPT_STATE", g.accept_state, doc="The state reached once the start rule is reduced at END."),
        constant(
            "ACTIONS",
            tuple(s.actions for s in g.states),
            "readonly Readonly<Record<string, number>>[]",
            "State → symbol → the next state (shift or goto, >= 0) or `~rule` (reduce, < 0).",
        ),
        constant(
            "EXPECTED",
            tuple(tuple(s.expected) for s in g.states),
            "readonly (readonly string[])[]",
            "State → the terminals (END included) that have an action there.",
        ),
    ]
    return out


# Keys of the synced schemas that are prose for readers, not constraints a runtime checks.
DEFS = "$defs"
SCHEMA_PROSE = frozenset({"$schema", "description", "examples", "title"})
JSON_SCHEMA = "JsonSchema"


def responses_constants(ir: ProjectIR) -> list[Constant]:
    """`src/_generated/responses.ts`: the Open Responses schemas the runtime validates requests and writes
    events by (prose left out), and the item unions' (type, role) tables."""
    r = ir.responses
    schemas = {name: _strip(schema) for name, schema in lower_bundle(r)[DEFS].items()}
    unions = {
        u.name: {
            "variants": [{"type": v.type, "role": v.role, "model": v.model} for v in u.variants],
            "models": list(u.models),
            "fallback": u.fallback,
        }
        for u in r.item_unions
    }
    union_type = (
        "Readonly<Record<string, { readonly variants: readonly { readonly type: string | null; "
        "readonly role: string | null; readonly model: string }[]; readonly models: readonly string[]; "
        "readonly fallback: string }>>"
    )
    return [
        constant("VERSION", r.version, doc="The Open Responses version the schemas were synced from."),
        constant(
            "SCHEMAS",
            schemas,
            f"Readonly<Record<string, {JSON_SCHEMA}>>",
            "Component name → its JSON Schema as the model generators read it (`lower_bundle`: references "
            f"`#/{DEFS}/NAME`, disallowed keys `null`, tag defaults lifted), key order kept, prose left out.",
        ),
        constant(
            "ITEM_UNIONS",
            unions,
            union_type,
            "Item unions: the model each (type, role) picks, and the model of vendor-prefixed types.",
        ),
        constant("NAMED_UNIONS", r.named_unions, "readonly string[]", "Unions the types name."),
        constant(
            "STREAMING_EVENT_TYPES",
            r.streaming_event_types,
            "readonly string[]",
            "Every event `type` of the StreamingEvent union.",
        ),
    ]


def _strip(schema: Any, in_properties: bool = False) -> Any:
    """`schema` without its prose; the keys of a `properties` map are field names, never prose."""
    if isinstance(schema, dict):
        return {
            k: _strip(v, in_properties=(k == "properties" and not in_properties))
            for k, v in schema.items()
            if in_properties or k not in SCHEMA_PROSE
        }
    if isinstance(schema, list):
        return [_strip(v) for v in schema]
    return schema


# -- the split pattern in JavaScript syntax -------------------------------------------------------------

# Unicode White_Space, which `\s` means in the Rust regex tiktoken uses (and in Python's `re` for str).
_WHITE_SPACE = "\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
_INLINE_I = re.compile(r"\(\?i:((?:[^()\\]|\\.)*)\)")


def _fold_class(ch: str) -> str:
    """Every character a case-insensitive match of `ch` accepts (simple case folding), as a class."""
    if not ch.isalpha():
        return ch  # the group's own syntax (`|`) and plain characters
    variants = {c for c in (ch, ch.lower(), ch.upper()) if len(c) == 1}
    # Characters outside ASCII whose case mapping lands on this letter (U+017F ſ → s, U+212A K → k).
    variants |= {c for c in ("\u017f", "\u212a") if c.upper() in variants or c.lower() in variants}
    return "[" + "".join(sorted(variants)) + "]" if len(variants) > 1 else ch


def js_pattern(pattern: str) -> str:
    """The spec's split pattern (Python/Rust syntax) in JavaScript syntax with the same meaning."""

    def spell_out(m: re.Match[str]) -> str:
        body = m.group(1)
        if re.search(r"\\|\[", body):
            raise GenerationError(f"the split pattern's (?i:…) group {m.group(0)!r} holds classes or escapes")
        return "(?:" + "".join(_fold_class(c) for c in body) + ")"

    out = _INLINE_I.sub(spell_out, pattern)
    if "(?" in out.replace("(?:", "").replace("(?!", "").replace("(?=", ""):
        raise GenerationError("the split pattern uses an inline flag JavaScript has no spelling for")
    # `\s` and `\S`, inside and outside classes. `[^\s...]` stays a negated class with the ranges inside.
    result = []
    in_class = False
    i = 0
    while i < len(out):
        c = out[i]
        if c == "\\" and i + 1 < len(out):
            nxt = out[i + 1]
            if nxt == "s":
                result.append(_WHITE_SPACE if in_class else f"[{_WHITE_SPACE}]")
            elif nxt == "S":
                if in_class:
                    raise GenerationError("the split pattern uses \\S inside a class")
                result.append(f"[^{_WHITE_SPACE}]")
            else:
                result.append(out[i : i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class:
            in_class = False
        result.append(c)
        i += 1
    return "".join(result)


# -- the Open Responses types -----------------------------------------------------------------------------

_REFERENCED_BY = re.compile(
    r"/\*\*\n \* This interface was referenced by `[^`]+`'s JSON-Schema\n"
    r" \* via the `definition` \"[^\"]+\"\.\n \*/\n"
)


def run_schema_to_ts(bundle: dict[str, Any]) -> str:
    tool = NODE_TOOL
    node = shutil.which("node")
    if node is None:
        raise GenerationError("node is not on PATH: the TypeScript target compiles its types with node")
    if not (tool.parent / "node_modules" / "json-schema-to-typescript").is_dir():
        raise GenerationError(f"{tool.parent}/node_modules is missing: run `npm ci` there (the Makefile does)")
    done = subprocess.run(
        [node, str(tool)],
        input=json.dumps({"bundle": bundle, "name": TYPES_ROOT_NAME}, ensure_ascii=False),
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
    )
    if done.returncode != 0:
        raise GenerationError(f"{tool.name} failed: {done.stderr.strip()[-2000:]}")
    # The tool's "referenced by" note above every declaration says nothing a reader needs.
    return _REFERENCED_BY.sub("", done.stdout)


# -- the package files ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Where things are, relative to the generated package folder."""

    root_dir: str  # the folder both halves share: tsc mirrors it under dist/
    runtime_src: str  # the hand-written sources
    runtime_dir: str  # the runtime folder (tests, bench, manifest)
    runtime_out: str  # where tsc writes the compiled runtime
    data_out: str  # where tsc writes the compiled data modules
    types_out: str


def layout(package_dir: Path, runtime_dir: Path) -> Layout:
    common = Path(os.path.commonpath([package_dir, runtime_dir]))

    def rel(p: Path) -> str:
        return Path(os.path.relpath(p, package_dir)).as_posix()

    def out(p: Path) -> str:
        return f"{OUT_DIR}/{p.relative_to(common).as_posix()}"

    return Layout(
        root_dir=rel(common) or ".",
        runtime_src=rel(runtime_dir / "src"),
        runtime_dir=rel(runtime_dir),
        runtime_out=out(runtime_dir / "src"),
        data_out=out(package_dir / DATA_DIR),
        types_out=out(package_dir / TYPES_DIR),
    )


def package_json(manifest: dict[str, Any], lay: Layout) -> dict[str, Any]:
    missing = [f for f in MANIFEST_FIELDS if f not in manifest]
    if missing:
        raise GenerationError(f"runtime/typescript/package.json lacks {missing}")
    entry = f"./{lay.runtime_out}/{INDEX_MODULE}"
    types_entry = f"./{lay.types_out}/{INDEX_MODULE}"
    return {
        "name": manifest["name"],
        "version": manifest["version"],
        "description": DESCRIPTION,
        "license": manifest["license"],
        "type": manifest["type"],
        "engines": manifest["engines"],
        "bin": {BIN_NAME: f"{lay.runtime_out}/{BIN_MODULE}.js"},
        "exports": {
            ".": {"types": f"{entry}.d.ts", "default": f"{entry}.js"},
            "./types": {"types": f"{types_entry}.d.ts", "default": f"{types_entry}.js"},
        },
        "imports": {
            GENERATED_ALIAS: f"./{lay.data_out}/*",
            TYPES_ALIAS: f"{types_entry}.js",
        },
        "files": [lay.runtime_out, lay.data_out, lay.types_out],
        "scripts": {"build": "tsc -p .", "test": f"node --test {OUT_DIR}/"},
        "dependencies": manifest["dependencies"],
        "devDependencies": manifest["devDependencies"],
    }


def tsconfig_json(lay: Layout) -> dict[str, Any]:
    return {
        "compilerOptions": {
            "target": "ES2022",
            "lib": ["ES2022"],
            "module": "NodeNext",
            "moduleResolution": "NodeNext",
            "types": ["node"],
            "strict": True,
            "noUncheckedIndexedAccess": True,
            "noImplicitOverride": True,
            "noImplicitReturns": True,
            "noFallthroughCasesInSwitch": True,
            "noUnusedLocals": True,
            "noUnusedParameters": True,
            "exactOptionalPropertyTypes": True,
            "useUnknownInCatchVariables": True,
            "verbatimModuleSyntax": True,
            "forceConsistentCasingInFileNames": True,
            "skipLibCheck": True,
            "declaration": True,
            "sourceMap": True,
            "inlineSources": True,
            "rootDir": lay.root_dir,
            "outDir": OUT_DIR,
            "paths": {
                GENERATED_ALIAS: [f"./{DATA_DIR}/*"],
                TYPES_ALIAS: [f"./{TYPES_DIR}/{INDEX_MODULE}.ts"],
            },
        },
        "include": [
            f"{DATA_DIR}/*.ts",
            f"{TYPES_DIR}/*.ts",
            f"{lay.runtime_dir}/src",
            f"{lay.runtime_dir}/test",
            f"{lay.runtime_dir}/bench",
        ],
    }


def _lock(root: Path, runtime_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    lock_path = runtime_dir / "package-lock.json"
    try:
        lock = json.loads(lock_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GenerationError(f"{lock_path.relative_to(root)} is missing: run `npm install` in that folder") from None
    top = lock.get("packages", {}).get("", {})
    for field in ("name", "version", "dependencies", "devDependencies"):
        if top.get(field) != manifest.get(field):
            raise GenerationError(
                f"{lock_path.relative_to(root)} is stale ({field} differs from package.json): "
                "run `npm install` in that folder"
            )
    return dict(lock)


def _json_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# -- rendering --------------------------------------------------------------------------------------------

MODULES: dict[str, tuple[tuple[str, ...], Any]] = {
    "index.ts": (("generator",), lambda ir: {"format_version": ir.format_version}),
    "spec.ts": (
        ("encoding", "tokens", "format", "parsing", "mapping", "requests", "builtin_namespaces"),
        lambda ir: {"constants": spec_constants(ir), "json_value": JSON_VALUE},
    ),
    "responses.ts": (
        ("responses",),
        lambda ir: {"constants": responses_constants(ir), "json_schema": JSON_SCHEMA},
    ),
    "grammar.ts": (("grammar",), lambda ir: {"constants": grammar_constants(ir), "grammar": ir.grammar.source}),
    "enums.ts": (
        ("encoding", "format", "mapping"),
        lambda ir: {
            "enums": [
                _enum("Role", "Who wrote a message.", [(member(r.name), r.value) for r in ir.format.roles]),
                _enum(
                    "ReasoningEffort",
                    "How hard the model should think; rendered lower-case in the system message.",
                    [(member(e.name), e.value) for e in ir.format.reasoning_efforts],
                ),
                _enum(
                    "HarmonyEncodingName",
                    "Names accepted by `loadHarmonyEncoding`.",
                    [(member(ir.encoding.enum_member), ir.encoding.name)],
                ),
                _enum(
                    "ItemKind",
                    "The kinds of output item a Harmony message becomes (see `ITEM_KINDS` in `spec`).",
                    [(member(i.kind), i.kind) for i in ir.mapping.items],
                ),
                _enum(
                    "Terminator",
                    "How a parsed message ended: by which stop token, or by the end of the stream.",
                    [(member(str(t.format_token)), t.terminator) for t in ir.tokens.named if t.terminator]
                    + [(member(ir.parsing.eos_terminator), ir.parsing.eos_terminator)],
                ),
            ]
        },
    ),
}


def emit(
    ir: ProjectIR, env: jinja2.Environment, templates: str, root: Path, runtime_dir: Path, output_dir: Path
) -> list[Output]:
    package_dir = output_dir / TARGET
    ts_runtime = runtime_dir / TARGET
    outputs: list[Output] = []
    for name, (sections, make_context) in MODULES.items():
        template = f"{TEMPLATE_DIR}/{DATA_DIR}/{name}.jinja"
        outputs.append(
            Output(
                path=f"{TARGET}/{DATA_DIR}/{name}",
                text=env.get_template(template).render(**make_context(ir)),
                sources=ir.sources_of(*sections),
                template=f"{templates}/{template}",
            )
        )
    types_template = f"{TEMPLATE_DIR}/{TYPES_DIR}/{INDEX_MODULE}.ts.jinja"
    compiled = run_schema_to_ts(lower_bundle(ir.responses))
    outputs.append(
        Output(
            path=f"{TARGET}/{TYPES_DIR}/{INDEX_MODULE}.ts",
            text=env.get_template(types_template).render(
                spec_version=ir.responses.version, compiled=compiled, unions=ir.responses.item_unions
            ),
            sources=ir.sources_of("responses"),
            template=f"json-schema-to-typescript (generator/node) + {templates}/{types_template}",
        )
    )
    manifest_path = ts_runtime / "package.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    lay = layout(package_dir, ts_runtime)
    manifest_rel = manifest_path.relative_to(root).as_posix()
    outputs += [
        Output(
            f"{TARGET}/package.json",
            _json_text(package_json(manifest, lay)),
            (manifest_rel,),
            "harmonygen's TypeScript target (package_json)",
        ),
        Output(
            f"{TARGET}/tsconfig.json",
            _json_text(tsconfig_json(lay)),
            (manifest_rel,),
            "harmonygen's TypeScript target (tsconfig_json)",
        ),
        Output(
            f"{TARGET}/package-lock.json",
            _json_text(_lock(root, ts_runtime, manifest)),
            ((ts_runtime / "package-lock.json").relative_to(root).as_posix(),),
            "npm's lock of runtime/typescript, copied",
        ),
    ]
    return outputs
