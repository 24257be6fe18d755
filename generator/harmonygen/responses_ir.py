"""spec/responses/ → the Open Responses IR, and its lowering for datamodel-code-generator.

The IR keeps the synced JSON Schemas as they are, with the departures spec/overrides/responses.json
states applied (each with its reason, kept in the IR for the docs): a property replaced or added, a
schema added. An override of a synced property names the property as synced; when a re-sync changes
that, generation fails instead of silently overriding new upstream text. `lower_bundle` turns them into one JSON Schema
document (`$defs`, local `$ref`s) shaped for datamodel-code-generator, and `item_unions` describes
the unions whose discriminator JSON Schema cannot express (the input items share `type: "message"` and
differ by `role`; vendor-prefixed extension items need a fallback): the emitter writes those itself.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from .config import Config
from .errors import SpecError
from .ir import ItemUnionIR, ResponsesIR, SchemaOverrideIR, UnionVariantIR

INDEX = "index.json"
SCHEMAS = "schemas"
OVERRIDES = "overrides/responses.json"  # under the spec folder, beside responses/ (which the sync owns)
# Unions of items that accept a vendor-prefixed `slug:type` item as a fallback variant.
EXTENSIBLE_UNIONS = ("ItemField", "ItemParam")
EXTENSION_CLASS = "ExtensionItem"


STREAMING_EVENT = "StreamingEvent"


def load_responses(config: Config) -> tuple[ResponsesIR, tuple[str, ...]]:
    """The synced schemas and the unions the emitters need, and the files they were read from."""
    base = config.spec.rstrip("/") + "/responses"
    index_rel = f"{base}/{INDEX}"
    try:
        index = json.loads(config.path(index_rel).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SpecError(f"{index_rel}: file not found; run `harmonygen sync-openapi PATH`") from exc
    schemas: dict[str, Any] = {}
    for name, digest in index["schemas"].items():
        rel = f"{base}/{SCHEMAS}/{name}.json"
        try:
            data = config.path(rel).read_bytes()
        except FileNotFoundError as exc:
            raise SpecError(f"{rel}: listed in {index_rel} but missing; re-run `harmonygen sync-openapi`") from exc
        if hashlib.sha256(data).hexdigest() != digest:
            raise SpecError(f"{rel}: differs from the synced copy ({index_rel}); re-run `harmonygen sync-openapi`")
        schemas[name] = json.loads(data)
    overrides_rel = f"{config.spec.rstrip('/')}/{OVERRIDES}"
    try:
        overrides_doc = json.loads(config.path(overrides_rel).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SpecError(f"{overrides_rel}: file not found") from exc
    except json.JSONDecodeError as exc:
        raise SpecError(f"{overrides_rel}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    overrides = read_overrides(overrides_doc, overrides_rel)
    schemas = apply_overrides(schemas, overrides, overrides_rel)
    partial = ResponsesIR(
        version=index["version"],
        schemas=schemas,
        named_unions=tuple(index["named_unions"]),
        item_unions=(),
        streaming_event_types=(),
        overrides=overrides,
    )
    return (
        ResponsesIR(
            version=partial.version,
            schemas=schemas,
            named_unions=partial.named_unions,
            item_unions=item_unions(partial),
            streaming_event_types=_event_types(schemas),
            overrides=overrides,
        ),
        (index_rel, overrides_rel),
    )


def read_overrides(doc: Any, rel: str) -> tuple[SchemaOverrideIR, ...]:
    """The entries of spec/overrides/responses.json, each checked for its keys and their kinds."""
    if not isinstance(doc, dict):
        raise SpecError(f"{rel}: $ should be an object")
    out: list[SchemaOverrideIR] = []
    sections = (("properties", PROPERTY_KEYS), ("required", REQUIRED_KEYS), ("schemas", SCHEMA_KEYS))
    for section, keys in (*sections, ("members", MEMBER_KEYS)):
        entries = doc.get(section, [])
        if not isinstance(entries, list):
            raise SpecError(f"{rel}: $[{section!r}] should be a list")
        for i, entry in enumerate(entries):
            where = f"{rel}: $[{section!r}][{i}]"
            if not isinstance(entry, dict) or set(entry) != set(keys):
                found = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
                raise SpecError(f"{where} should be an object with exactly the keys {sorted(keys)}, found {found}")
            named = {"properties": ("property",), "members": ("member",)}.get(section, ())
            for key in ("schema", "reason", *named):
                if not isinstance(entry[key], str) or not entry[key]:
                    raise SpecError(f"{where}[{key!r}] should be a non-empty string")
            if section == "members":  # a schema added to a synced union (`oneOf`)
                ref = {"$ref": entry["member"] + ".json"}
                out.append(SchemaOverrideIR(entry["schema"], None, None, ref, entry["reason"], "members"))
                continue
            if section == "required":
                lists = (entry["synced"], entry["replacement"])
                if not all(isinstance(v, list) and all(isinstance(n, str) for n in v) for v in lists):
                    raise SpecError(f"{where}: `synced` and `replacement` should be lists of property names")
                replacement = {"required": entry["replacement"]}
                out.append(
                    SchemaOverrideIR(entry["schema"], None, entry["synced"], replacement, entry["reason"], "required")
                )
                continue
            body = entry["replacement"] if section == "properties" else entry["definition"]
            if not isinstance(body, dict):
                raise SpecError(f"{where}: the schema it gives should be an object")
            if section == "properties":
                out.append(SchemaOverrideIR(entry["schema"], entry["property"], entry["synced"], body, entry["reason"]))
            else:
                out.append(SchemaOverrideIR(entry["schema"], None, None, body, entry["reason"]))
    return tuple(out)


PROPERTY_KEYS = ("schema", "property", "synced", "replacement", "reason")
SCHEMA_KEYS = ("schema", "definition", "reason")
REQUIRED_KEYS = ("schema", "synced", "replacement", "reason")
MEMBER_KEYS = ("schema", "member", "reason")


def apply_overrides(schemas: dict[str, Any], overrides: tuple[SchemaOverrideIR, ...], rel: str) -> dict[str, Any]:
    """`schemas` with `overrides` applied (a new dict; the synced schemas are not changed in place)."""
    out = dict(schemas)
    for o in overrides:
        if o.keyword == "members":
            continue  # once every added schema is in (below)
        if o.keyword == "required":
            if o.schema not in out:
                raise SpecError(f"{rel}: overrides {o.schema}.required, but spec/responses has no schema {o.schema!r}")
            target = copy.deepcopy(out[o.schema])
            if target.get("required", []) != o.synced:
                raise SpecError(
                    f"{rel}: overrides {o.schema}.required as synced {json.dumps(o.synced)}, but spec/responses has "
                    f"{json.dumps(target.get('required', []))}: re-read upstream; update or drop the override"
                )
            target["required"] = o.replacement["required"]
            out[o.schema] = target
            continue
        if o.property is None:
            if o.schema in out:
                raise SpecError(f"{rel}: adds the schema {o.schema!r}, which spec/responses already has")
            out[o.schema] = o.replacement
            continue
        if o.schema not in out:
            raise SpecError(f"{rel}: overrides {o.schema}.{o.property}, but spec/responses has no schema {o.schema!r}")
        target = copy.deepcopy(out[o.schema])
        props = target.setdefault("properties", {})
        current = props.get(o.property)
        if current != o.synced:
            raise SpecError(
                f"{rel}: overrides {o.schema}.{o.property} as synced {json.dumps(o.synced)}, but spec/responses has "
                f"{json.dumps(current)}: re-read the upstream schema and update or drop the override"
            )
        props[o.property] = o.replacement
        out[o.schema] = target
    for o in overrides:
        if o.keyword != "members":
            continue
        union = out.get(o.schema)
        if not isinstance(union, dict) or not isinstance(union.get("oneOf"), list):
            raise SpecError(f"{rel}: adds a member to {o.schema!r}, which is no union (`oneOf`) in spec/responses")
        if o.replacement in union["oneOf"]:
            raise SpecError(f"{rel}: {o.schema} already has the member {o.replacement['$ref']}")
        out[o.schema] = {**union, "oneOf": [*union["oneOf"], o.replacement]}
    for o in overrides:  # every reference an override makes must resolve
        for ref in _refs(o.replacement):
            if ref.removesuffix(".json") not in out:
                raise SpecError(f"{rel}: the override of {o.schema} refers to {ref}, which is not a schema")
    return out


def _refs(node: Any) -> list[str]:
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    if not isinstance(node, dict):
        return []
    own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
    return own + [r for k, v in node.items() if k != "$ref" for r in _refs(v)]


def _event_types(schemas: dict[str, Any]) -> tuple[str, ...]:
    union = schemas.get(STREAMING_EVENT)
    if union is None:
        raise SpecError(f"spec/responses: no {STREAMING_EVENT} schema; re-run `harmonygen sync-openapi`")
    out = []
    for ref in union["oneOf"]:
        values, _ = _enum_of(schemas[ref["$ref"].removesuffix(".json")].get("properties", {}).get("type"))
        out += values
    return tuple(out)


def schema(ir: ResponsesIR, name: str) -> Any:
    try:
        return ir.schemas[name]
    except KeyError:
        raise SpecError(f"spec/responses: no schema named {name!r}") from None


def _lower(node: Any) -> Any:
    if isinstance(node, list):
        return [_lower(v) for v in node]
    if not isinstance(node, dict):
        return node
    if node.get("x-openresponses-disallowed") is True:
        # A key the client must not send: upstream spells it as an unsatisfiable string; `null` is the
        # closest type a model can hold that still narrows the inherited field.
        return {"type": "null"}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("$schema", "examples"):
            continue
        if key == "$ref":
            out[key] = "#/$defs/" + value.removesuffix(".json")
        elif key in ("enum", "default", "const", "required"):
            out[key] = value
        else:
            out[key] = _lower(value)
    # A discriminator beside a lone $ref is a one-member union: the reference alone says it.
    if "$ref" in out and "discriminator" in out and not ({"oneOf", "anyOf"} & set(out)):
        del out["discriminator"]
    # `anyOf: [{enum: [x], default: x}, {type: null}]` on a tag: lift the default so the tag has it.
    if isinstance(out.get("properties"), dict):
        for prop in out["properties"].values():
            branches = prop.get("anyOf") if isinstance(prop, dict) else None
            if branches and "default" not in prop:
                defaults = [b["default"] for b in branches if isinstance(b, dict) and "default" in b and "enum" in b]
                if len(defaults) == 1:
                    prop["default"] = defaults[0]
    return out


def lower_bundle(ir: ResponsesIR) -> dict[str, Any]:
    """One JSON Schema document holding every schema under `$defs`, references made local."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {name: _lower(ir.schemas[name]) for name in sorted(ir.schemas)},
    }


def _enum_of(prop: Any) -> tuple[list[str], bool]:
    """The string values a property allows, and whether it may be null."""
    if not isinstance(prop, dict):
        return [], True
    if "enum" in prop:
        return list(prop["enum"]), False
    values: list[str] = []
    nullable = False
    for branch in prop.get("anyOf", []):
        if branch.get("type") == "null":
            nullable = True
        values += branch.get("enum", [])
    return values, nullable


def item_unions(ir: ResponsesIR) -> tuple[ItemUnionIR, ...]:
    out = []
    for name in EXTENSIBLE_UNIONS:
        union = schema(ir, name)
        models = [ref["$ref"].removesuffix(".json") for ref in union["oneOf"]]
        by_type: dict[str | None, list[tuple[str, list[str]]]] = {}
        for model in models:
            member = schema(ir, model)
            props = member.get("properties", {})
            values, nullable = _enum_of(props.get("type"))
            tags: list[str | None] = list(values)
            if nullable or "type" not in member.get("required", []):
                tags.append(None)
            roles, _ = _enum_of(props.get("role"))
            for t in tags:
                by_type.setdefault(t, []).append((model, roles))
        variants = []
        for t, members in by_type.items():
            if len(members) == 1:
                variants.append(UnionVariantIR(t, None, members[0][0]))
                continue
            # Members sharing a type differ by role; one member without a role enum may take the items with no
            # role (no `type` at all: an item reference, or, with a role, an easy input message).
            roleless = [model for model, roles in members if not roles]
            if len(roleless) > 1:
                raise SpecError(f"{name}: {', '.join(roleless)} share type {t!r} and have no role enum")
            for model, roles in members:
                roles_or_none: list[str | None] = list(roles) if roles else [None]
                variants.extend(UnionVariantIR(t, role, model) for role in roles_or_none)
        keys = [(v.type, v.role) for v in variants]
        if len(keys) != len(set(keys)):
            raise SpecError(f"{name}: two variants share a (type, role) pair: {sorted(map(str, keys))}")
        out.append(ItemUnionIR(name, tuple(variants), tuple(models), EXTENSION_CLASS))
    return tuple(out)
