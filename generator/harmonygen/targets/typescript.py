"""TypeScript target: the IR → `typescript/src/`, the generated modules of the package rooted in runtime/typescript.

Two parts:
- data modules (`src/_generated/*.ts`) lowered from the IR here and rendered from templates/typescript/;
- the Open Responses types (`src/types/index.ts`), compiled from the IR's schemas by json-schema-to-typescript
  (pinned in generator/node, run with node) and completed by a template.

The package itself (package.json, tsconfig.json, lock, README) is runtime/typescript's own; its build copies
`typescript/src/` into `runtime/typescript/src/generated/` (see `make ts-build`), which its `#generated/*` and
`#types` import aliases point at, so the published paths are the package's (`dist/index.js`).

Names are made here, never in templates: constants keep the Python target's names (the purpose of a fact,
never its value), enum members are PascalCase. Output is a pure function of the IR and those two files.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from ..errors import SpecError
from ..facts import Fact, Shape, grammar_facts, spec_facts
from ..ir import ProjectIR
from ..responses_ir import lower_bundle
from ..tsprint import ts_literal, ts_string, ts_type
from .base import Output

TARGET = "typescript"
TEMPLATE_DIR = TARGET
DATA_DIR = "src/_generated"
TYPES_DIR = "src/types"
INDEX_MODULE = "index"
# The generator's own node tool (beside the harmonygen package, not in the project it generates).
NODE_TOOL = Path(__file__).resolve().parents[2] / "node" / "schema-to-ts.mjs"
TYPES_ROOT_NAME = "OpenResponses"
JSON_VALUE = "JsonValue"


class GenerationError(SpecError):
    """The TypeScript target cannot be built from what it was given (a missing tool)."""


@dataclass(frozen=True)
class Constant:
    name: str
    type: str
    literal: str
    doc: str


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


_TS_NAMES = {"str": "string", "int": "number", "bool": "boolean", "scalar": "string | number | boolean | null"}


def type_of_shape(shape: Shape) -> str:
    """The TypeScript type of a fact's shape (see `facts`): read-only, as every generated table is."""
    if isinstance(shape, str):
        return JSON_VALUE if shape == "json" else _TS_NAMES[shape]
    kind, *args = shape
    if kind == "opt":
        return f"{type_of_shape(args[0])} | null"
    if kind in ("seq", "set"):
        element = type_of_shape(args[0])
        return (
            f"readonly ({element})[]"
            if " | " in element or element.startswith("readonly ")
            else f"readonly {element}[]"
        )
    if kind == "pair":
        return "readonly [" + ", ".join(type_of_shape(a) for a in args) + "]"
    if kind == "map":
        return f"Readonly<Record<{type_of_shape(args[0])}, {type_of_shape(args[1])}>>"
    return "{ " + "; ".join(f"readonly {name}: {type_of_shape(field)}" for name, field in args[0]) + " }"


def constant_of(fact: Fact) -> Constant:
    if fact.keyed:
        # a table keyed by the names a runtime types by: its key type is their union (`keyof typeof spec.CAPABILITIES`)
        if not (isinstance(fact.shape, tuple) and fact.shape[0] == "map"):
            raise GenerationError(f"{fact.name} is keyed but not a map: only a map's keys can be a key type")
        keys = " | ".join(ts_string(str(k)) for k in fact.value)
        return constant(fact.name, fact.value, f"Readonly<Record<{keys}, {type_of_shape(fact.shape[2])}>>", fact.doc)
    return constant(fact.name, fact.value, type_of_shape(fact.shape) if fact.shape is not None else "", fact.doc)


def spec_constants(ir: ProjectIR) -> list[Constant]:
    """`src/_generated/spec.ts`: every fact the runtime reads, named as every target names it (`facts`), and
    the split pattern in JavaScript syntax besides. The server's facts (`server_facts`) are not printed: this
    runtime has no server, and a language gets only what it reads."""
    out = [constant_of(fact) for fact in spec_facts(ir)]
    pattern = next(i for i, c in enumerate(out) if c.name == "PATTERN")
    enc = ir.encoding
    version = enc.pattern_unicode_version
    fast = js_pattern(enc.pattern)
    unsure = _unsure_class(version, enc.pattern_recategorized_later)
    out[pattern + 1 : pattern + 1] = [
        constant(
            "PATTERN_JS",
            fast,
            doc="The same pattern in JavaScript syntax (flags `gu`): inline `(?i:…)` groups spelled out, and "
            "`\\s` as Unicode White_Space (JavaScript's `\\s` adds U+FEFF and lacks U+0085). Its `\\p{…}` mean "
            "node's Unicode: exact for a text without a character of `PATTERN_UNSURE_JS`.",
        ),
        constant(
            "PATTERN_JS_EXACT",
            _spell_categories(fast, version),
            doc=f"`PATTERN_JS` with each `\\p{{…}}` spelled out as the code points it has in Unicode {version} "
            "(the reference's): exact whatever node's Unicode, but V8 runs a pattern this long several times slower.",
        ),
        constant(
            "PATTERN_UNSURE_JS",
            unsure,
            doc=f"The characters node may class otherwise than Unicode {version} does (flag `u`): those it leaves "
            "unassigned, and those whose category changed after it.",
        ),
        constant("PATTERN_UNICODE_VERSION", version, doc="The Unicode version of the split pattern's `\\p{…}`."),
    ]
    return out


@dataclass(frozen=True)
class RowType:
    """A named type for the rows of one table (a record type per row kind): `ITEM_KINDS` → `ItemKindsRow`."""

    name: str
    type: str
    table: str


_ROW_TABLE = re.compile(r"^(Readonly<Record<(?:string|number), )(\{ .* \})(>>)$")


def row_types(constants: list[Constant]) -> tuple[list[Constant], list[RowType]]:
    """Each table whose rows are records gets its row type by name; the table's type then names it."""
    out: list[Constant] = []
    rows: list[RowType] = []
    for c in constants:
        m = _ROW_TABLE.match(c.type)
        if m is None:
            out.append(c)
            continue
        row = RowType(member(c.name) + "Row", m.group(2), c.name)
        rows.append(row)
        out.append(Constant(c.name, m.group(1) + row.name + m.group(3), c.literal, c.doc))
    return out, rows


def spec_context(ir: ProjectIR) -> dict[str, Any]:
    constants, rows = row_types(spec_constants(ir))
    return {"constants": constants, "rows": rows, "json_value": JSON_VALUE}


def grammar_constants(ir: ProjectIR) -> list[Constant]:
    return [constant_of(fact) for fact in grammar_facts(ir)]


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


_CATEGORY = re.compile(r"\\p\{([A-Z][a-z]?)\}")


@functools.cache
def _category_runs(version: str) -> tuple[tuple[int, int, str], ...]:
    """The code points in runs of one General_Category (first, last, category) in Unicode `version`, read from
    unicodedata2 (the gen extra pins it to that version)."""
    try:
        import unicodedata2
    except ImportError as e:
        raise GenerationError(
            f"the split pattern is read under Unicode {version}: install unicodedata2=={version}"
        ) from e
    if unicodedata2.unidata_version != version:
        raise GenerationError(
            f"the split pattern is read under Unicode {version}, unicodedata2 has {unicodedata2.unidata_version}: "
            f"install unicodedata2=={version}"
        )
    category: Callable[[str], str] = unicodedata2.category
    runs: list[tuple[int, int, str]] = []
    for cp in range(sys.maxunicode + 1):
        cat = category(chr(cp))
        if runs and runs[-1][2] == cat:
            runs[-1] = (runs[-1][0], cp, cat)
        else:
            runs.append((cp, cp, cat))
    return tuple(runs)


def _class_text(ranges: list[tuple[int, int]]) -> str:
    """Sorted inclusive code-point ranges as the items of a JavaScript `u`-mode class, adjacent ones joined."""
    joined: list[list[int]] = []
    for first, last in ranges:
        if joined and joined[-1][1] + 1 == first:
            joined[-1][1] = last
        else:
            joined.append([first, last])
    return "".join(f"\\u{{{a:X}}}" + ("" if a == b else f"-\\u{{{b:X}}}") for a, b in joined)


def _class_items(names: list[str], version: str) -> str:
    """The code points of the General_Category groups `names` (`L`, `Lu`, `M`) in Unicode `version`."""
    runs = _category_runs(version)
    return _class_text([(first, last) for first, last, cat in runs if any(cat.startswith(name) for name in names)])


def _unsure_class(version: str, later: tuple[int, ...]) -> str:
    """A class of the code points Unicode `version` leaves unassigned, and of `later` (recategorized since)."""
    unassigned = [(first, last) for first, last, cat in _category_runs(version) if cat == "Cn"]
    return "[" + _class_text(sorted(unassigned + [(cp, cp) for cp in later])) + "]"


def _spell_categories(pattern: str, version: str) -> str:
    """`\\p{…}` inside a class → the ranges of every `\\p{…}` of that class, together; `\\p{…}` outside one →
    a class of its ranges."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            m = _CATEGORY.match(pattern, i)
            out.append(f"[{_class_items([m.group(1)], version)}]" if m else pattern[i : i + 2])
            i = m.end() if m else i + 2
        elif pattern[i] == "[":
            end = i + 1
            while pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            body = pattern[i + 1 : end]
            names = _CATEGORY.findall(body)
            rest = _CATEGORY.sub("", body)
            out.append("[" + rest + (_class_items(names, version) if names else "") + "]")
            i = end + 1
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out)


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


# -- rendering --------------------------------------------------------------------------------------------

MODULES: dict[str, tuple[tuple[str, ...], Any]] = {
    "index.ts": (("generator",), lambda ir: {"format_version": ir.format_version}),
    "spec.ts": (
        ("encoding", "tokens", "format", "parsing", "mapping", "requests", "server", "builtin_namespaces"),
        spec_context,
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


def emit(ir: ProjectIR, env: jinja2.Environment, templates: str) -> list[Output]:
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
    return outputs
