"""Docs target: Markdown pages from the IR, and an API reference read from the Python output."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import jinja2

from ..config import Config
from ..ir import ProjectIR
from .base import Output


@dataclass(frozen=True)
class ApiEntry:
    kind: str  # "class" | "function" | "method"
    name: str
    signature: str
    summary: str


@dataclass(frozen=True)
class ApiModule:
    name: str
    summary: str
    entries: tuple[ApiEntry, ...]


def _summary(node: Any) -> str:
    doc = ast.get_docstring(node)
    return doc.strip().split("\n\n")[0].replace("\n", " ") if doc else ""


def _signature(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    args = ast.unparse(fn.args)
    returns = f" -> {ast.unparse(fn.returns)}" if fn.returns else ""
    return f"({args}){returns}"


RUNTIME_PACKAGE = "python/harmony_responses"


def runtime_sources(config: Config) -> dict[str, str]:
    """The hand-written Python runtime: path relative to the project root → text, in path order."""
    folder = config.runtime_dir / RUNTIME_PACKAGE
    return {
        p.relative_to(config.root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def runtime_glob(config: Config) -> str:
    return f"{config.runtime}/{RUNTIME_PACKAGE}/**/*.py"


def api_modules(runtime: dict[str, str], config: Config) -> list[ApiModule]:
    modules = []
    prefix = f"{config.runtime}/python/"
    for path, text in runtime.items():
        module_name = path.removeprefix(prefix).removesuffix(".py").replace("/", ".")
        if module_name.endswith("__init__") or any(part.startswith("_") for part in module_name.split(".")):
            continue
        tree = ast.parse(text)
        entries = []
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                entries.append(ApiEntry("function", node.name, _signature(node), _summary(node)))
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = ", ".join(ast.unparse(b) for b in node.bases)
                entries.append(ApiEntry("class", node.name, f"({bases})" if bases else "", _summary(node)))
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and not item.name.startswith("_"):
                        entries.append(ApiEntry("method", f"{node.name}.{item.name}", _signature(item), _summary(item)))
        if entries:
            modules.append(ApiModule(module_name, _summary(tree), tuple(entries)))
    return modules


@dataclass(frozen=True)
class ModelDoc:
    name: str
    bases: str
    fields: tuple[tuple[str, str], ...]  # (name, annotation)


TYPES_MODULE = "python/harmony_responses/types/_models.py"


def model_docs(outputs: list[Output]) -> tuple[list[ModelDoc], list[tuple[str, str]]]:
    """The classes (with their fields) and the type aliases of the generated Open Responses types."""
    source = next((o.text for o in outputs if o.path == TYPES_MODULE), None)
    if source is None:
        return [], []
    classes, aliases = [], []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            fields = tuple(
                (item.target.id, ast.unparse(item.annotation))
                for item in node.body
                if isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and item.target.id != "model_config"
            )
            classes.append(ModelDoc(node.name, ", ".join(ast.unparse(b) for b in node.bases), fields))
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func) == "TypeAliasType"
            and len(node.value.args) == 2
            and isinstance(node.targets[0], ast.Name)
        ):
            aliases.append((node.targets[0].id, ast.unparse(node.value.args[1])))
    return classes, aliases


def context(
    project: ProjectIR, python_outputs: list[Output], runtime: dict[str, str], config: Config
) -> dict[str, Any]:
    h = project.harmony
    models, aliases = model_docs(python_outputs)
    return {
        "harmony": h,
        "special_tokens": h.all_special_tokens(),
        "named_tokens": h.tokens,
        "stop_sets": h.stop_sets,
        "system_defaults": dict(h.system_defaults),
        "system_sections": dict(h.system_sections),
        "developer_sections": dict(h.developer_sections),
        "tools_section": dict(h.tools_section),
        "header": dict(h.header),
        "conversation": dict(h.conversation),
        "reasoning_efforts": h.reasoning_efforts,
        "mapping": dict(h.mapping),
        "channels": dict(h.channels),
        "tok": {t.format_token: t.spelling for t in h.tokens if t.format_token},
        "api": api_modules(runtime, config),
        "models": models,
        "aliases": aliases,
    }


def emit(project: ProjectIR, env: jinja2.Environment, config: Config, python_outputs: list[Output]) -> list[Output]:
    runtime = runtime_sources(config)
    ctx = context(project, python_outputs, runtime, config)
    folder = config.templates_dir / "docs"
    outputs = []
    for path in sorted(folder.glob("*.jinja")):
        name = f"docs/{path.name}"
        sources = tuple(project.harmony.sources)
        if path.name.startswith("api."):
            sources = (runtime_glob(config),)
        elif path.name.startswith("types."):
            sources = tuple(sorted({s for o in python_outputs if o.path == TYPES_MODULE for s in o.sources}))
        outputs.append(
            Output(
                path=f"docs/{path.name[: -len('.jinja')]}",
                text=env.get_template(name).render(**ctx),
                sources=sources,
                template=f"{config.templates}/{name}",
            )
        )
    return outputs
