"""`harmonygen sync-openapi`: an Open Responses OpenAPI document → `spec/responses/`.

Each component schema becomes `spec/responses/schemas/<Name>.json`, a JSON Schema (2020-12) whose
`$ref`s point at sibling files (`Message.json`). The streaming events of `POST /responses`, an inline
`oneOf` upstream, become the named union `StreamingEvent.json`. `index.json` records the document's
version, which schema is the request, the response and the stream of each operation, and the sha256
of every schema file, so that the generator can refuse hand edits and `index.json` alone stands for the
whole folder in `generated/MANIFEST.json`.

Structure is kept (names, types, required, enums, defaults, nullability, discriminators, constraints,
examples, `x-openresponses-*` facts); prose is dropped (`description`, `title`, `summary`,
`x-enumDescriptions`, `x-unionTitle`, `x-unionDisplay`). Key order follows the document, so the output
is a pure function of the input: rerunning on the same document rewrites nothing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .tree import sync_tree

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMAS_DIR = "schemas"
INDEX = "index.json"
STREAMING_UNION = "StreamingEvent"
COMPONENT_REF = "#/components/schemas/"
PROSE_KEYS = frozenset({"description", "title", "summary", "x-enumDescriptions", "x-unionTitle", "x-unionDisplay"})
# Keywords whose value is a schema, a list of schemas or a map of name → schema.
_SCHEMA_VALUED = frozenset({"items", "not", "additionalProperties", "contains", "propertyNames", "if", "then", "else"})
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})


class SyncError(ValueError):
    """The OpenAPI document lacks something `sync-openapi` needs, or has a shape it does not know."""


@dataclass(frozen=True)
class SyncResult:
    files: dict[str, str]  # path under spec/responses/ → text


def _ref_target(ref: str, where: str) -> str:
    if not ref.startswith(COMPONENT_REF):
        raise SyncError(f"{where}: $ref {ref!r} does not point into {COMPONENT_REF}")
    return ref[len(COMPONENT_REF) :]


def clean_schema(node: Any, where: str, names: frozenset[str]) -> Any:
    """Copy a schema without prose, with component `$ref`s turned into sibling file names."""
    if isinstance(node, bool):
        return node
    if not isinstance(node, dict):
        raise SyncError(f"{where}: expected a schema object, found {type(node).__name__}")
    out: dict[str, Any] = {}
    for key, value in node.items():
        at = f"{where}/{key}"
        if key in PROSE_KEYS:
            continue
        if key == "$ref":
            target = _ref_target(value, where)
            if target not in names:
                raise SyncError(f"{where}: $ref to unknown component {target!r}")
            out[key] = f"{target}.json"
        elif key == "example":
            out.setdefault("examples", [value])
        elif key in _SCHEMA_VALUED:
            out[key] = clean_schema(value, at, names)
        elif key in _SCHEMA_LISTS:
            if not isinstance(value, list):
                raise SyncError(f"{at}: expected a list of schemas")
            out[key] = [clean_schema(v, f"{at}/{i}", names) for i, v in enumerate(value)]
        elif key in _SCHEMA_MAPS:
            if not isinstance(value, dict):
                raise SyncError(f"{at}: expected an object of schemas")
            out[key] = {k: clean_schema(v, f"{at}/{k}", names) for k, v in value.items()}
        elif key == "discriminator":
            disc = {k: v for k, v in value.items() if k in ("propertyName", "mapping")}
            if "mapping" in disc:
                disc["mapping"] = {k: f"{_ref_target(v, at)}.json" for k, v in disc["mapping"].items()}
            out[key] = disc
        else:
            out[key] = value  # data: type, enum, default, required, constraints, x-openresponses-*
    return out


def _dump(data: Any) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def _get(doc: Any, *path: str) -> Any:
    node = doc
    for key in path:
        if not isinstance(node, dict) or key not in node:
            raise SyncError("$" + "".join(f"[{k!r}]" for k in path) + " is missing")
        node = node[key]
    return node


def _named(schema: Any, where: str, inline_name: str | None) -> tuple[str, Any]:
    """A media-type schema is either a component `$ref` or (for the stream) an inline union to name."""
    if isinstance(schema, dict) and set(schema) == {"$ref"}:
        return _ref_target(schema["$ref"], where), None
    if inline_name is None:
        raise SyncError(f"{where}: inline schema with no name; only the event stream may be inline")
    return inline_name, schema


def sync(document: dict[str, Any], source: str) -> SyncResult:
    schemas = _get(document, "components", "schemas")
    if not isinstance(schemas, dict) or not schemas:
        raise SyncError("$['components']['schemas'] is empty")
    names = frozenset(schemas)
    files: dict[str, str] = {}
    for name, schema in schemas.items():
        body = {"$schema": SCHEMA_DIALECT, **clean_schema(schema, f"#/components/schemas/{name}", names)}
        files[f"{SCHEMAS_DIR}/{name}.json"] = _dump(body)
    operations: dict[str, Any] = {}
    inline: dict[str, Any] = {}
    for path, item in _get(document, "paths").items():
        for method, op in item.items():
            if method not in ("get", "put", "post", "delete", "patch") or not isinstance(op, dict):
                continue
            where = f"#/paths/{path}/{method}"
            entry: dict[str, Any] = {"path": path, "method": method}
            req = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if req is not None:
                entry["request"], _ = _named(req, f"{where}/requestBody", None)
            for status, resp in sorted(op.get("responses", {}).items()):
                for media, content in resp.get("content", {}).items():
                    stream = media == "text/event-stream"
                    label = "stream" if stream else "response"
                    name, body = _named(
                        content.get("schema"),
                        f"{where}/responses/{status}/{media}",
                        STREAMING_UNION if stream else None,
                    )
                    if body is not None:
                        if name in names or (name in inline and inline[name] != body):
                            raise SyncError(f"{where}: the stream union name {name!r} is taken")
                        inline[name] = body
                    entry.setdefault(label, {})[status] = name
            op_id = op.get("operationId")
            if not isinstance(op_id, str):
                raise SyncError(f"{where}: operationId is missing")
            operations[op_id] = entry
    for name, body in inline.items():
        clean = {"$schema": SCHEMA_DIALECT, **clean_schema(body, f"#/{name}", names)}
        files[f"{SCHEMAS_DIR}/{name}.json"] = _dump(clean)
    index = {
        "$comment": "Written by `harmonygen sync-openapi`; do not edit: re-sync from the OpenAPI document.",
        "source": source,
        "openapi": document.get("openapi"),
        "version": _get(document, "info", "version"),
        "named_unions": sorted(inline),
        "operations": dict(sorted(operations.items())),
        "schemas": {
            rel.removeprefix(f"{SCHEMAS_DIR}/").removesuffix(".json"): hashlib.sha256(text.encode("utf-8")).hexdigest()
            for rel, text in sorted(files.items())
        },
    }
    files[INDEX] = _dump(index)
    return SyncResult(files=dict(sorted(files.items())))


def write_sync(document_path: Path, out_dir: Path, source: str | None = None) -> list[str]:
    """Sync `out_dir` with the document: write changed files, delete files no longer produced."""
    try:
        document = json.loads(document_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SyncError(f"{document_path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    result = sync(document, source if source is not None else document_path.name)
    existing = (
        {p.relative_to(out_dir).as_posix(): p for p in out_dir.rglob("*.json") if p.is_file()}
        if out_dir.is_dir()
        else {}
    )
    changed = sync_tree(out_dir, result.files, existing)
    return changed
