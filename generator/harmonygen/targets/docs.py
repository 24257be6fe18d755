"""Docs target: Markdown pages from the IR, and an API reference read from the Python output."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

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


def runtime_sources(runtime_dir: Path) -> dict[str, str]:
    """The hand-written Python runtime: module path under `runtime_dir/python` → text, in path order."""
    folder = runtime_dir / RUNTIME_PACKAGE
    return {
        p.relative_to(runtime_dir / "python").as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(folder.rglob("*.py"))
        if "__pycache__" not in p.parts
    }


def api_modules(runtime: dict[str, str]) -> list[ApiModule]:
    modules = []
    prefix = ""
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


def context(ir: ProjectIR, python_outputs: list[Output], runtime: dict[str, str]) -> dict[str, Any]:
    fmt = ir.format
    models, aliases = model_docs(python_outputs)
    channels: dict[str, str] = {p: c.name for c in fmt.channels for p in c.purposes}
    content_types: dict[str, str] = {p: c.name for c in fmt.header.content_types for p in c.purposes}
    return {
        "ir": ir,
        "fmt": fmt,
        "header": fmt.header,
        "channels": channels,
        "content_types": content_types,
        "special_tokens": ir.all_special_tokens(),
        "tok": {t.format_token: t.spelling for t in ir.tokens.named if t.format_token},
        "items": {item.kind: item for item in ir.mapping.items},
        "api": api_modules(runtime),
        "models": models,
        "aliases": aliases,
    }


# Each page: the IR sections it reads (besides the runtime or the types module, for api and types).
PAGES = {
    "tokens.md": ("encoding", "tokens"),
    "format.md": ("tokens", "format", "builtin_namespaces", "mapping"),
    "parsing.md": ("grammar", "parsing", "tokens"),
    "responses.md": ("mapping", "format", "tokens"),
    "errors.md": ("requests", "server", "mapping"),
    "api.md": (),
    "types.md": (),
}


def emit(
    ir: ProjectIR, env: jinja2.Environment, templates: str, runtime: tuple[Path, str], python_outputs: list[Output]
) -> list[Output]:
    """`runtime` is the runtime folder on disk and as the project names it (for headers)."""
    runtime_dir, runtime_rel = runtime
    ctx = context(ir, python_outputs, runtime_sources(runtime_dir))
    outputs = []
    for page, sections in PAGES.items():
        name = f"docs/{page}.jinja"
        if page == "api.md":
            sources: tuple[str, ...] = (f"{runtime_rel}/{RUNTIME_PACKAGE}/**/*.py",)
        elif page == "types.md":
            sources = tuple(sorted({s for o in python_outputs if o.path == TYPES_MODULE for s in o.sources}))
        else:
            sources = ir.sources_of(*sections)
        outputs.append(
            Output(
                path=f"docs/{page}",
                text=env.get_template(name).render(**ctx),
                sources=sources,
                template=f"{templates}/{name}",
            )
        )
    return outputs
