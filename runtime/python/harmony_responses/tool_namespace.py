"""JSON Schema → the TypeScript-like `namespace NAME { ... }` text models are trained on.

The output matches the reference byte for byte, including its quirks (a nested object's description
printed twice, its closing brace at the inner indent, nothing escaped), because any difference
changes the prompt's tokens.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ._tables import spec as _spec
from .models import ToolDescription, ToolNamespaceConfig
from .texts import fill

_COMMENT = _spec.TOOLS_COMMENT_PREFIX


def rust_lines(text: str) -> list[str]:
    """Split like Rust's `str::lines()`: on `\n` or `\r\n`; a lone `\r` stays; no final empty line."""
    if not text:
        return []
    parts = text.split("\n")
    last = parts.pop()
    lines = [p[:-1] if p.endswith("\r") else p for p in parts]
    if last:
        lines.append(last)
    return lines


def _get(schema: Any, key: str) -> Any:
    return schema.get(key) if isinstance(schema, dict) else None


def _is_enum(schema: Any) -> bool:
    values = _get(schema, "enum")
    return isinstance(values, list) and len(values) > 0


def _float_text(value: float) -> str:
    """A float the way serde_json (the `ryu` crate) prints it: shortest digits, decimal notation
    when the decimal point falls within 16 places left of or 5 places right of the digits."""
    if not math.isfinite(value):
        return "null"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0") or "0"
    if digits == "0":
        return sign + "0.0"
    frac = frac.rstrip("0") if exp_text or frac != "0" else ""
    # value = 0.DIGITS x 10^point
    leading_zeros = len(whole + frac) - len((whole + frac).lstrip("0"))
    point = len(whole) + (int(exp_text) if exp_text else 0) - leading_zeros
    digits = digits.rstrip("0") or "0"
    n = len(digits)
    if 0 <= point - n and point <= 16:
        return sign + digits + "0" * (point - n) + ".0"
    if 0 < point <= 16:
        return sign + digits[:point] + "." + digits[point:]
    if -5 < point <= 0:
        return sign + "0." + "0" * (-point) + digits
    tail = "." + digits[1:] if n > 1 else ""
    return f"{sign}{digits[0]}{tail}e{point - 1}"


def json_display(value: Any) -> str:
    """Compact JSON as serde_json's Display writes it (non-ASCII kept, key order kept)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return (
            "{"
            + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{json_display(v)}" for k, v in value.items())
            + "}"
        )
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_display(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _default_comment(schema: Any, default: Any) -> str:
    if isinstance(default, str):
        return f"default: {default}" if _is_enum(schema) else f'default: "{default}"'
    return f"default: {json_display(default)}"


def _inline_default_comment(schema: Any, default: Any) -> str:
    # A top-level oneOf variant writes an enum's string default as JSON (quoted, escaped).
    if isinstance(default, str) and not _is_enum(schema):
        return f'default: "{default}"'
    return f"default: {json_display(default)}"


def _with_nullable(variant: Any, text: str) -> str:
    if _get(variant, "nullable") is True and "null" not in text:
        return text + " | null"
    return text


def _one_of_inline(variants: list[Any], indent: str) -> str:
    out = []
    for variant in variants:
        out.append(f"\n{indent} | ")
        out.append(_with_nullable(variant, schema_to_typescript(variant, indent + "   ")))
        trailing = []
        desc = _get(variant, "description")
        if isinstance(desc, str):
            trailing.append(desc)
        if isinstance(variant, dict) and "default" in variant:
            trailing.append(_inline_default_comment(variant, variant["default"]))
        if trailing:
            out.append(" // " + " ".join(trailing))
    return "".join(out)


def _one_of_property(key: str, val: dict[str, Any], variants: list[Any], optional: str, indent: str) -> str:
    out = []
    prop_desc = val.get("description") if isinstance(val.get("description"), str) else None
    first_desc = _get(variants[0], "description") if variants else None
    skip = prop_desc is not None and isinstance(first_desc, str) and first_desc == prop_desc
    desc_above = False
    if not skip and prop_desc is not None:
        out.append(f"{indent}{_COMMENT}{prop_desc}\n")
        desc_above = True
    if "default" in val:
        out.append(f"{indent}{_COMMENT}{_default_comment(val, val['default'])}\n")
    out.append(f"{indent}{key}{optional}:\n")
    for i, variant in enumerate(variants):
        out.append(f"{indent} | ")
        out.append(_with_nullable(variant, schema_to_typescript(variant, indent + "   ")))
        trailing = []
        if not (i == 0 and desc_above):
            vdesc = _get(variant, "description")
            if isinstance(vdesc, str) and vdesc != prop_desc:
                trailing.append(vdesc)
        if isinstance(variant, dict) and "default" in variant:
            trailing.append(_default_comment(variant, variant["default"]))
        if trailing:
            out.append(" // " + " ".join(trailing))
        out.append("\n")
    out.append(f"{indent},\n")
    return "".join(out)


def _object(schema: dict[str, Any], indent: str) -> str:
    out = []
    desc = schema.get("description")
    if isinstance(desc, str):
        out.append(f"{indent}{_COMMENT}{desc}\n")
    out.append("{\n")
    props = schema.get("properties")
    if isinstance(props, dict):
        req = schema.get("required")
        required = {r for r in req if isinstance(r, str)} if isinstance(req, list) else set()
        for key, val in props.items():
            optional = "" if key in required else "?"
            title = _get(val, "title")
            if isinstance(title, str):
                out.append(f"{indent}{_COMMENT}{title}\n{indent}//\n")
            one_of = _get(val, "oneOf")
            if one_of is None:
                pdesc = _get(val, "description")
                if isinstance(pdesc, str):
                    out.append(f"{indent}{_COMMENT}{pdesc}\n")
            examples = _get(val, "examples")
            if isinstance(examples, list) and examples:
                out.append(f"{indent}{_COMMENT}Examples:\n")
                for ex in examples:
                    if isinstance(ex, str):
                        out.append(f'{indent}{_COMMENT}- "{ex}"\n')
            if isinstance(one_of, list):
                out.append(_one_of_property(key, val, one_of, optional, indent))
                continue
            out.append(f"{indent}{key}{optional}: ")
            out.append(_with_nullable(val, schema_to_typescript(val, indent + "    ")))
            out.append(",")
            if one_of is None and isinstance(val, dict) and "default" in val:
                out.append(" // " + _default_comment(val, val["default"]))
            out.append("\n")
    out.append(f"{indent}}}")
    return "".join(out)


def schema_to_typescript(schema: Any, indent: str = "") -> str:
    """Render one JSON Schema as the reference's TypeScript-like type text."""
    one_of = _get(schema, "oneOf")
    if isinstance(one_of, list):
        return _one_of_inline(one_of, indent)
    kind = _get(schema, "type")
    if isinstance(kind, list):
        names = ["number" if t == "integer" else t for t in kind if isinstance(t, str)]
        if names:
            return " | ".join(names)
    if isinstance(kind, str):
        if kind == "object":
            return _object(schema, indent)
        if kind == "string":
            values = _get(schema, "enum")
            if isinstance(values, list):
                members = [f'"{v}"' for v in values if isinstance(v, str)]
                if members:
                    return " | ".join(members)
            return "string"
        if kind in ("number", "integer"):
            return "number"
        if kind == "boolean":
            return "boolean"
        if kind == "array":
            if isinstance(schema, dict) and "items" in schema:
                return schema_to_typescript(schema["items"], indent) + "[]"
            return "Array<any>"
        return "any"
    return "any"


def _namespace_block(ns: ToolNamespaceConfig) -> str:
    lines = [fill(_spec.TOOLS_NAMESPACE_HEADING, name=ns.name)]
    if ns.description is not None:
        prefix = _COMMENT if ns.tools else ""
        lines.extend(prefix + line for line in rust_lines(ns.description))
    if ns.tools:
        lines.append(fill(_spec.TOOLS_NAMESPACE_OPEN, name=ns.name))
        for tool in ns.tools:
            lines.extend(_COMMENT + line for line in rust_lines(tool.description))
            if tool.parameters is not None:
                params = schema_to_typescript(tool.parameters, "")
                lines.append(fill(_spec.TOOLS_TOOL_WITH_PARAMS, name=tool.name, params=params))
            else:
                lines.append(fill(_spec.TOOLS_TOOL_WITHOUT_PARAMS, name=tool.name))
        lines.append(fill(_spec.TOOLS_NAMESPACE_CLOSE, name=ns.name))
    return _spec.TOOLS_BLOCK_JOINER.join(lines)


def render_tools_section(namespaces: Mapping[str, ToolNamespaceConfig]) -> str:
    """The `# Tools` section of a system or developer message: namespaces sorted by key."""
    blocks = [_spec.TOOLS_HEADING]
    blocks.extend(_namespace_block(namespaces[key]) for key in sorted(namespaces))
    return _spec.TOOLS_NAMESPACE_JOINER.join(blocks)


def _as_tool(raw: ToolDescription | Mapping[str, Any]) -> ToolDescription:
    if isinstance(raw, ToolDescription):
        return raw
    if not isinstance(raw, Mapping):
        raise TypeError(f"a tool must be a ToolDescription or a dict, not {type(raw).__name__}")
    data = raw.get("function") if raw.get("type") == "function" and isinstance(raw.get("function"), Mapping) else raw
    assert isinstance(data, Mapping)
    if not isinstance(data.get("name"), str):
        raise ValueError(f"tool {dict(raw)!r}: 'name' must be a string")
    return ToolDescription(
        name=data["name"], description=data.get("description") or "", parameters=data.get("parameters")
    )


def render_tool_namespace(
    name: str,
    tools: Iterable[ToolDescription | Mapping[str, Any]],
    description: str | None = None,
) -> str:
    """The namespace block alone (`## name` … `} // namespace name`) for a list of tools.

    Tools may be `ToolDescription`s or OpenAI-style dicts, flat (`{"type": "function", "name",
    "description", "parameters"}`) or nested under `"function"` as in Chat Completions.
    """
    tool_list: Sequence[ToolDescription] = [_as_tool(t) for t in tools]
    return _namespace_block(ToolNamespaceConfig(name=name, description=description, tools=list(tool_list)))
