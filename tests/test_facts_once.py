"""Every fact once: the runtime holds no literal of the format; it reads the facts from the generated tables.

`format_facts` lists the strings the IR defines as facts of the format (control-token spellings and
their affixes, roles, channels, the function namespace, the recipient keyword, content types, grammar
terminals and rules, terminators, the event parser's event types and repair rules, item kinds and types,
Open Responses event names, error codes, the SSE end marker, the browser tool's display texts). The test
reads every hand-written runtime source and fails on any string constant equal to one of them. Facts of one
character (the separators `.`, `:`, ` `) cannot be told apart from ordinary punctuation by a scan; the
spec-mutation test covers the namespace separator instead. The browser tool's characters (its link brackets
and separator, and what page text shows in their place: `format.browser_display`) are no punctuation of
ordinary code: a string constant that holds one anywhere (a regex, a piece of an f-string) is flagged.
Docstrings are prose and are not scanned; neither is the value of a `mode=` keyword argument (pydantic's
`model_dump(mode="json")` is not the `json` content type).

A few plain words are grammar rule names or event types and also the field names of JSON forms the
runtime reads and writes (`JSON_FIELDS`, each with its form): such a word is allowed only where it
names a field (a dict key, a subscript, the key argument of `get`/`pop`/`setdefault`, an `in` test, or a
tuple of keys a loop walks), and flagged anywhere else.

The TypeScript runtime (runtime/typescript/src) is held to the same list by the same policy: its string
literals, template pieces and literal types are read with the TypeScript compiler's parser
(runtime/typescript/test/literals.ts, built by `make ts-build`), each marked when it stands where a field's
name stands (an object key, a subscript, the left of `in`, the key of a map's `get`/`has`/`set`/`delete`,
an element of an array a `for … of` walks); the first argument of a Node event method (`on("error", …)`)
belongs to the library, as `mode=` does in Python.

Other protocols have words that are spelled like Harmony's (Chat Completions' roles, llama.cpp's
`stop_type: "eos"`, vLLM's `{"json": schema}`): a module that speaks such a protocol declares those
words once, in a module-level table named `WIRE`, and uses them from there; values inside `Literal[...]`
types (a protocol's type, checked by mypy and pydantic) are not scanned either.
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path
from typing import Any

from conftest import ROOT

RUNTIME = ROOT / "runtime" / "python" / "harmony_responses"
TS_RUNTIME = ROOT / "runtime" / "typescript" / "src"
TS_LITERALS = ROOT / "runtime" / "typescript" / "build" / "test" / "literals.js"
IR = ROOT / "generated" / "ir.json"
# Keyword arguments whose string values belong to a library's API, not to the format.
LIBRARY_KEYWORDS = {"mode"}
# Words that are also field names of JSON forms, and the forms that use them.
JSON_FIELDS = {
    "channel": "the reference's message JSON (`Message.to_dict`)",
    "recipient": "the reference's message JSON",
    "content_type": "the reference's message JSON",
    "author": "the reference's parser state JSON (`StreamableParser.state_data`)",
    "header": "the reference's parser state JSON",
    "terminator": "a parsed message's JSON (`ParsedMessage.to_dict`)",
    "message": "Open Responses and Chat Completions error objects and Chat choices; the spec's error table",
    "error": "Open Responses and Chat Completions error bodies",
    "code": "Open Responses and Chat Completions error objects",
    "reasoning": "the Open Responses request's `reasoning` object",
    "body": "ASGI messages (`http.response.body`)",
    "engine_timeout": "the server's settings (`Settings.engine_timeout`, `--engine-timeout`)",
}
WIRE_TABLE = "WIRE"  # a module's table of another protocol's words
_KEY_METHODS = {"get", "pop", "setdefault"}


def format_facts(ir: dict[str, Any]) -> dict[str, str]:
    """Fact → what it is."""
    facts: dict[str, str] = {}

    def add(value: str | None, what: str) -> None:
        if value and len(value) > 1:
            facts.setdefault(value, what)

    tokens = ir["tokens"]
    add(tokens["spelling_open"], "the control-token prefix")
    add(tokens["spelling_close"], "the control-token suffix")
    add(tokens["reserved_spelling"], "the reserved-token spelling")
    for t in tokens["named"]:
        add(t["spelling"], "a control-token spelling")
        add(t["terminator"], "a terminator name")
    fmt = ir["format"]
    for role in fmt["roles"]:
        add(role["value"], "a role")
    for channel in fmt["channels"]:
        add(channel["name"], "a channel name")
    header = fmt["header"]
    add(header["function_namespace"], "the function namespace")
    add(header["recipient_keyword"], "the recipient keyword")
    for ct in header["content_types"]:
        add(ct["name"], "a content type")
    grammar = ir["grammar"]
    add(grammar["end_terminal"], "the end-of-input terminal")
    for terminal in grammar["terminals"]:
        add(terminal, "a grammar terminal")
    for rule in grammar["rules"]:
        if not rule["origin"].startswith("_"):
            add(rule["origin"], "a grammar rule name")
    parsing = ir["parsing"]
    add(parsing["eos_terminator"], "a terminator name")
    for event in parsing["events"].values():
        add(event, "an event-parser event type")
    for rule in parsing["recovery_rules"]:
        add(rule, "a recovery rule id")
    mapping = ir["mapping"]
    for item in mapping["items"]:
        add(item["kind"], "an item kind")
        add(item["type"], "an item type")
        for events in (item["text"] or {}, item["arguments"] or {}):
            for key, event in events.items():
                add(event, "a content part type" if key == "part" else "an event name")
        for phase in (item["phases"] or {}).values():
            add(phase, "a message phase")
    add(mapping["input"]["tool_output_type"], "an item type")
    for event in ir["responses"]["streaming_event_types"]:
        add(event, "an event name")
    for error in mapping["errors"]:
        add(error["code"], "an error code")
    for error in ir["requests"]["errors"]:
        add(error["code"], "a request error code")
    add(mapping["sse"]["done"], "the SSE end marker")
    server = ir["server"]
    for error in server["errors"]:
        add(error["code"], "a server error code")
    add(server["interrupted"]["message"], "the interrupted response's error message")
    add(server["objects"]["deleted"], "an object name")
    for kind, prefix in server["input_item_id_prefixes"].items():
        if kind != "other":  # `item` is also a plain word and a field name
            add(prefix, "an input item id prefix")
    for text in server["compaction"].values():
        add(text, "the compaction prompt's words or seal")
    browser = fmt["browser_display"]
    for key, value in browser.items():
        if isinstance(value, str):  # a character: flagged wherever a string holds it
            facts.setdefault(value, f"the browser display's {key.replace('_', ' ')} character")
    for text in browser["texts"].values():
        add(text, "a browser display text")
    return facts


def _matches(value: str, facts: dict[str, str]) -> str | None:
    """What `value` is, when it is a fact or holds one of the format's characters (the facts of one character)."""
    if value in facts:
        return facts[value]
    return next((facts[c] for c in value if len(c) == 1 and c in facts and not c.isascii()), None)


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):  # attribute docstrings
            ids.add(id(node.value))
    return ids


def _field_positions(tree: ast.AST) -> set[int]:
    """The string constants that stand where a JSON field's name stands."""
    ids: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and node.value in JSON_FIELDS:
            ids.add(id(node))
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                mark(element)

    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                mark(key)
        elif isinstance(node, ast.Subscript):
            mark(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _KEY_METHODS:
            mark(node.args[0] if node.args else None)
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            mark(node.left)
        elif isinstance(node, ast.For):
            mark(node.iter)
    return ids


def _protocol_words(tree: ast.Module) -> set[int]:
    """The string constants of a module's `WIRE` table and of `Literal[...]` types."""
    ids: set[int] = set()
    for statement in tree.body:
        targets: list[ast.expr]
        value: ast.expr | None
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign):
            targets, value = [statement.target], statement.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == WIRE_TABLE for t in targets) and value is not None:
            ids |= {id(n) for n in ast.walk(value) if isinstance(n, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Name, ast.Attribute)):
            name = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
            if name == "Literal":
                ids |= {id(n) for n in ast.walk(node.slice) if isinstance(n, ast.Constant)}
    return ids


def literals_in(source: str, facts: dict[str, str]) -> list[tuple[int, str, str]]:
    """(line, literal, what it is) for each string constant of `source` that is a format fact."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _field_positions(tree) | _protocol_words(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in LIBRARY_KEYWORDS and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            what = _matches(node.value, facts)
            if what is not None:
                found.append((node.lineno, node.value, what))
    return sorted(found)


def runtime_sources() -> list[Path]:
    return sorted(p for p in RUNTIME.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_fact_list_is_not_empty_and_knows_the_usual_suspects() -> None:
    facts = format_facts(json.loads(IR.read_text(encoding="utf-8")))
    for fact in ("<|start|>", "<|", "functions", "analysis", "json", "WORD", "header", "response.completed", "【"):
        assert fact in facts, fact


def test_the_scan_finds_a_planted_literal() -> None:
    facts = {"<|end|>": "a control-token spelling", "analysis": "a channel name", "channel": "a grammar rule name"}
    source = (
        'def f(x):\n    """Mentions <|end|> in prose."""\n'
        '    return x == "analysis" or x.model_dump(mode="analysis")\n'
        'def g(d):\n    d["channel"] = d.get("channel")\n    return "channel" in d\n'
        'def h(x):\n    return x == "channel"\n'
        'WIRE = {"stop": "analysis"}\nMode = Literal["analysis"]\n'
    )
    assert literals_in(source, facts) == [(3, "analysis", "a channel name"), (8, "channel", "a grammar rule name")]


def test_the_scan_finds_a_planted_browser_character_inside_a_string() -> None:
    facts = format_facts(json.loads(IR.read_text(encoding="utf-8")))
    source = (
        '"""Links are 【{id}†{text}】 (prose)."""\n'
        '_OPEN, _SEP = "【", "†"\n'
        '_CITATION = re.compile(r"【(\\d+)†([^†】]+)】")\n'
        'marker = f"# {n}†match at L{at}"\n'
        'plain = ". : [x]"\n'
    )
    assert [(line, value) for line, value, _ in literals_in(source, facts)] == [
        (2, "†"),
        (2, "【"),
        (3, "【(\\d+)†([^†】]+)】"),
        (4, "†match at L"),
    ]


def test_the_runtime_holds_no_literal_of_the_format() -> None:
    facts = format_facts(json.loads(IR.read_text(encoding="utf-8")))
    problems = []
    for path in runtime_sources():
        for line, literal, what in literals_in(path.read_text(encoding="utf-8"), facts):
            problems.append(f"{path.relative_to(ROOT)}:{line}: {literal!r} is {what}; read it from the tables")
    assert not problems, "\n".join(problems)


# -- the TypeScript runtime ------------------------------------------------------------------------------


def ts_literals(files: list[Path]) -> list[dict[str, Any]]:
    """Every string literal of `files` (see literals.ts): file, line, value, and whether it names a field."""
    if not TS_LITERALS.is_file():
        raise RuntimeError(f"{TS_LITERALS} is missing: run `make ts-build` (make test does)")
    done = subprocess.run(
        ["node", str(TS_LITERALS), *map(str, files)], capture_output=True, text=True, encoding="utf-8", check=True
    )
    return [json.loads(line) for line in done.stdout.split("\n") if line]  # not splitlines: U+2028 is in literals


def ts_problems(literals: list[dict[str, Any]], facts: dict[str, str]) -> list[tuple[str, int, str, str]]:
    return [
        (lit["file"], lit["line"], lit["value"], what)
        for lit in literals
        if (what := _matches(lit["value"], facts)) is not None
        and not lit["library"]
        and not (lit["field"] and lit["value"] in JSON_FIELDS)
    ]


def test_the_typescript_scan_finds_a_planted_literal(tmp_path: Path) -> None:
    facts = {"<|end|>": "a control-token spelling", "analysis": "a channel name", "channel": "a grammar rule name"}
    source = tmp_path / "planted.ts"
    source.write_text(
        "// Mentions <|end|> in prose.\n"
        'export const f = (x: string): boolean => x === "analysis";\n'
        "export function g(d: Record<string, unknown>, m: Map<string, number>): unknown {\n"
        '  d["channel"] = { "channel": 1 }; return "channel" in d || m.get("channel");\n'
        "}\n"
        "export const h = (x: string): boolean => x === `channel`;\n"
        'for (const k of ["channel"]) console.log(k);\n'
        'type T = "analysis";\n'
        'process.on("analysis", () => 0);\n',
        encoding="utf-8",
    )
    found = [(line, value) for _, line, value, _ in ts_problems(ts_literals([source]), facts)]
    assert found == [(2, "analysis"), (6, "channel"), (8, "analysis")]


def test_the_typescript_runtime_holds_no_literal_of_the_format() -> None:
    facts = format_facts(json.loads(IR.read_text(encoding="utf-8")))
    files = sorted(p for p in TS_RUNTIME.rglob("*.ts") if "generated" not in p.relative_to(TS_RUNTIME).parts)
    assert len(files) > 20
    problems = [
        f"{Path(file).relative_to(ROOT)}:{line}: {value!r} is {what}; read it from the tables"
        for file, line, value, what in ts_problems(ts_literals(files), facts)
    ]
    assert not problems, "\n".join(problems)
