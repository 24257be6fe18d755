"""Python target: lowers the IR to named constants and renders templates/python/."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jinja2

from ..config import Config
from ..ir import FORMAT_VERSION, HarmonyIR, ProjectIR
from ..pyprint import py_literal
from .base import Output

PACKAGE = "harmony_responses"
TEMPLATE_DIR = f"python/{PACKAGE}/_generated"
GRAMMAR_TEMPLATE = "grammar.py.jinja"  # rendered by the grammar target


@dataclass(frozen=True)
class Constant:
    name: str
    annotation: str
    literal: str
    doc: str


def symbol(prefix: str, key: str) -> str:
    """The Python name of a spec key: `("SYS", "knowledge_cutoff")` → `SYS_KNOWLEDGE_CUTOFF`."""
    return f"{prefix}_{key}".upper().replace("-", "_").replace(".", "_")


def constant(name: str, value: Any, annotation: str, doc: str = "") -> Constant:
    """A named constant, its value printed as a canonical Python literal."""
    return Constant(name, annotation, py_literal(value), doc)


def lower_constants(h: HarmonyIR) -> list[Constant]:
    enc = h.encoding
    out = [
        constant("ENCODING_NAME", enc.name, "str", "The reference's name for the encoding."),
        constant("ENCODING_TIKTOKEN_NAME", enc.tiktoken_name, "str"),
        constant("PATTERN", enc.pattern, "str", "The o200k_base pre-tokenizer split pattern."),
        constant("RANKS_FILE", enc.ranks_file, "str"),
        constant("RANKS_SHA256", enc.ranks_sha256, "str"),
        constant("RANKS_ENV_VAR", enc.ranks_env_var, "str"),
        constant("RANKS_TIKTOKEN_NAME", enc.ranks_tiktoken_name, "str"),
        constant(
            "NAMED_TOKENS",
            {t.spelling: t.id for t in h.tokens},
            "dict[str, int]",
            "Special tokens with a spelling of their own; the rest are reserved.",
        ),
        constant("TOKEN_KINDS", {t.id: t.kind for t in h.tokens}, "dict[int, str]"),
        constant("RESERVED_RANGES", tuple(h.reserved_ranges), "tuple[tuple[int, int], ...]", "Inclusive id ranges."),
        constant("RESERVED_SPELLING", h.reserved_spelling, "str"),
    ]
    for name, tid in h.format_token_ids():
        out.append(constant(symbol("TOKEN", name), tid, "int"))
    for t in sorted((t for t in h.tokens if t.format_token), key=lambda t: str(t.format_token)):
        out.append(constant(symbol("SPELLING", str(t.format_token)), t.spelling, "str"))
    for name, ids in h.stop_sets:
        out.append(constant(name.upper(), ids, "tuple[int, ...]"))
    out.append(constant("ROLE_DEBUG_NAMES", dict(h.role_debug_names), "dict[str, str]"))
    out.append(constant("REASONING_RENDERED", {e.value: e.rendered for e in h.reasoning_efforts}, "dict[str, str]"))
    groups: list[tuple[str, tuple[tuple[str, Any], ...], str]] = [
        ("CHANNEL", h.channels, "str"),
        ("HEADER", h.header, "str"),
        ("SYSTEM_DEFAULT", h.system_defaults, ""),
        ("SYS", h.system_sections, "str"),
        ("DEV", h.developer_sections, "str"),
        ("TOOLS", h.tools_section, "str"),
        ("CONV", h.conversation, ""),
        ("ERR", h.errors, "str"),
        ("MAP", h.mapping, ""),
    ]
    for prefix, pairs, annotation in groups:
        for key, value in pairs:
            ann = annotation or _annotation(value)
            out.append(constant(symbol(prefix, key), value, ann))
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
                for ns in h.builtin_namespaces
            },
            "dict[str, dict[str, Any]]",
            "Built-in tool namespaces (browser, python) as ToolNamespaceConfig data.",
        )
    )
    return out


def _annotation(value: Any) -> str:
    if value is None:
        return "str | None"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, list):
        return "list[str]"
    if isinstance(value, dict):
        return "dict[str, str]"
    return type(value).__name__


def context(project: ProjectIR) -> dict[str, Any]:
    h = project.harmony
    return {
        "version": project.generator_version,
        "constants": lower_constants(h),
        "roles": h.roles,
        "reasoning_efforts": h.reasoning_efforts,
        "encoding": h.encoding,
        "package": PACKAGE,
        "format_version": FORMAT_VERSION,
    }


def emit(project: ProjectIR, env: jinja2.Environment, config: Config) -> list[Output]:
    ctx = context(project)
    sources = tuple(project.harmony.sources)
    outputs = []
    folder = config.templates_dir / TEMPLATE_DIR
    for path in sorted(folder.rglob("*.jinja")):
        rel = path.relative_to(folder).as_posix()
        if rel == GRAMMAR_TEMPLATE:
            continue
        name = f"{TEMPLATE_DIR}/{rel}"
        text = env.get_template(name).render(**ctx)
        outputs.append(
            Output(
                path=f"{TEMPLATE_DIR}/{rel[: -len('.jinja')]}",
                text=text,
                sources=sources,
                template=f"{config.templates}/{name}",
            )
        )
    return outputs
