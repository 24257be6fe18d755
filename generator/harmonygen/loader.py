"""spec/ and grammar/ → IR. Validation errors name the file and the JSON path."""

from __future__ import annotations

import json
from typing import Any

from . import __version__
from .config import Config
from .ir import EncodingIR, HarmonyIR, NamedValue, NamespaceIR, ProjectIR, SpecialToken, ToolIR


class SpecError(ValueError):
    """A spec file is missing something or has the wrong shape."""


class _Doc:
    def __init__(self, config: Config, rel: str) -> None:
        self.rel = rel
        path = config.path(rel)
        try:
            self.data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise SpecError(f"{rel}: file not found") from exc
        except json.JSONDecodeError as exc:
            raise SpecError(f"{rel}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc

    def get(self, *path: str | int, kind: type | tuple[type, ...] = object) -> Any:
        node: Any = self.data
        where = "$"
        for key in path:
            where += f"[{key!r}]" if isinstance(key, str) else f"[{key}]"
            try:
                node = node[key]
            except (KeyError, IndexError, TypeError) as exc:
                raise SpecError(f"{self.rel}: {where} is missing") from exc
        if not isinstance(node, kind):
            raise SpecError(f"{self.rel}: {where} should be {kind}, found {type(node).__name__}")
        return node

    def pairs(self, *path: str) -> tuple[tuple[str, Any], ...]:
        return tuple(self.get(*path, kind=dict).items())


TOKENS = "spec/harmony/tokens.json"
FORMAT = "spec/harmony/format.json"
BUILTINS = "spec/harmony/builtin_tools.json"
MAPPING = "spec/mapping/harmony_responses.json"


def flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested objects → `a_b_c` keys; an object whose keys are not identifiers stays a table."""
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        if key.startswith("$"):
            continue
        name = f"{prefix}_{key}" if prefix else key
        if isinstance(value, dict) and all(k.isidentifier() for k in value):
            out.extend(flatten(value, name))
        else:
            out.append((name, value))
    return out


def _rel(config: Config, name: str) -> str:
    return name.replace("spec/", config.spec.rstrip("/") + "/", 1)


def load_harmony(config: Config) -> HarmonyIR:
    tok = _Doc(config, _rel(config, TOKENS))
    fmt = _Doc(config, _rel(config, FORMAT))
    bi = _Doc(config, _rel(config, BUILTINS))
    mapping = _Doc(config, _rel(config, MAPPING))
    enc = tok.get("encoding", kind=dict)
    ranks = tok.get("encoding", "base_ranks", kind=dict)
    encoding = EncodingIR(
        name=enc["name"],
        enum_member=enc["enum_member"],
        tiktoken_name=enc["tiktoken_name"],
        pattern=enc["pattern"],
        ranks_file=ranks["file"],
        ranks_sha256=ranks["sha256"],
        ranks_env_var=ranks["env_var"],
        ranks_tiktoken_name=ranks["tiktoken_name"],
    )
    tokens = []
    for i, raw in enumerate(tok.get("named", kind=list)):
        tokens.append(
            SpecialToken(
                id=tok.get("named", i, "id", kind=int),
                spelling=tok.get("named", i, "spelling", kind=str),
                kind=tok.get("named", i, "kind", kind=str),
                format_token=raw.get("format_token"),
            )
        )
    tokens.sort(key=lambda t: t.id)
    by_format = {t.format_token: t.id for t in tokens if t.format_token}
    stop_sets = []
    for name, members in sorted(tok.pairs("stop_sets")):
        missing = [m for m in members if m not in by_format]
        if missing:
            raise SpecError(f"{tok.rel}: $['stop_sets'][{name!r}] names unknown format tokens {missing}")
        stop_sets.append((name, tuple(sorted(by_format[m] for m in members))))
    ranges = tuple((int(lo), int(hi)) for lo, hi in tok.get("reserved", "ranges", kind=list))
    ids = [t.id for t in tokens] + [i for lo, hi in ranges for i in range(lo, hi + 1)]
    if len(ids) != len(set(ids)):
        raise SpecError(f"{tok.rel}: a token id is listed twice (named and reserved ranges overlap)")
    namespaces = []
    for n, ns in enumerate(bi.get("namespaces", kind=list)):
        tools = tuple(
            ToolIR(name=t["name"], description=t["description"], parameters=t.get("parameters"))
            for t in bi.get("namespaces", n, "tools", kind=list)
        )
        namespaces.append(NamespaceIR(name=ns["name"], description=ns.get("description"), tools=tools))
    return HarmonyIR(
        sources=(tok.rel, fmt.rel, bi.rel, mapping.rel),
        encoding=encoding,
        tokens=tuple(tokens),
        reserved_ranges=ranges,
        reserved_spelling=tok.get("reserved", "spelling", kind=str),
        stop_sets=tuple(stop_sets),
        roles=tuple(NamedValue(r["name"], r["value"]) for r in fmt.get("roles", kind=list)),
        role_debug_names=fmt.pairs("role_debug_names"),
        reasoning_efforts=tuple(
            NamedValue(r["name"], r["value"], r["rendered"]) for r in fmt.get("reasoning_efforts", kind=list)
        ),
        channels=fmt.pairs("channels"),
        header=fmt.pairs("header"),
        system_defaults=fmt.pairs("system_defaults"),
        system_sections=fmt.pairs("system_sections"),
        developer_sections=fmt.pairs("developer_sections"),
        tools_section=fmt.pairs("tools_section"),
        conversation=fmt.pairs("conversation"),
        errors=fmt.pairs("errors"),
        builtin_namespaces=tuple(namespaces),
        mapping=tuple(flatten(mapping.get(kind=dict))),
    )


def load_project(config: Config) -> ProjectIR:
    grammar = (
        tuple(sorted(str(p.relative_to(config.root)) for p in config.grammar_dir.glob("*.lark")))
        if config.grammar_dir.is_dir()
        else ()
    )
    return ProjectIR(generator_version=__version__, harmony=load_harmony(config), grammar_sources=grammar)
