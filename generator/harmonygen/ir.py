"""The intermediate representation between the spec files and the emitters.

Every emitter reads these frozen dataclasses and nothing else, so a port to another language
starts from the same facts. `to_json` gives the canonical, sorted form written to `generated/ir.json`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

FORMAT_VERSION = 1
"""The layout of the generated tables; runtimes check it at import. Bump it when a table changes shape."""


@dataclass(frozen=True)
class SpecialToken:
    id: int
    spelling: str
    kind: str  # "stop" | "structural" | "reserved"
    format_token: str | None  # the renderer's name for it, when it has a role in the format


@dataclass(frozen=True)
class EncodingIR:
    name: str
    enum_member: str
    tiktoken_name: str
    pattern: str
    ranks_file: str
    ranks_sha256: str
    ranks_env_var: str
    ranks_tiktoken_name: str


@dataclass(frozen=True)
class NamedValue:
    """An enum member: python name, wire value and, where it differs, how it renders."""

    name: str
    value: str
    rendered: str | None = None


@dataclass(frozen=True)
class ToolIR:
    name: str
    description: str
    parameters: Any  # JSON Schema (dict) or None; key order is significant and kept


@dataclass(frozen=True)
class NamespaceIR:
    name: str
    description: str | None
    tools: tuple[ToolIR, ...]


@dataclass(frozen=True)
class HarmonyIR:
    sources: tuple[str, ...]
    encoding: EncodingIR
    tokens: tuple[SpecialToken, ...]  # the named tokens only, by id
    reserved_ranges: tuple[tuple[int, int], ...]
    reserved_spelling: str
    stop_sets: tuple[tuple[str, tuple[int, ...]], ...]
    roles: tuple[NamedValue, ...]
    role_debug_names: tuple[tuple[str, str], ...]
    reasoning_efforts: tuple[NamedValue, ...]
    channels: tuple[tuple[str, str], ...]
    header: tuple[tuple[str, str], ...]
    system_defaults: tuple[tuple[str, Any], ...]
    system_sections: tuple[tuple[str, str], ...]
    developer_sections: tuple[tuple[str, str], ...]
    tools_section: tuple[tuple[str, str], ...]
    conversation: tuple[tuple[str, Any], ...]
    errors: tuple[tuple[str, str], ...]
    builtin_namespaces: tuple[NamespaceIR, ...]
    # Harmony → Responses names, flattened: (("items_message_id_prefix", "msg"), ...)
    mapping: tuple[tuple[str, Any], ...] = ()

    def format_token_ids(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted((t.format_token, t.id) for t in self.tokens if t.format_token))

    def all_special_tokens(self) -> tuple[SpecialToken, ...]:
        out = list(self.tokens)
        for lo, hi in self.reserved_ranges:
            for i in range(lo, hi + 1):
                out.append(SpecialToken(i, self.reserved_spelling.format(id=i), "reserved", None))
        return tuple(sorted(out, key=lambda t: t.id))


@dataclass(frozen=True)
class ProjectIR:
    generator_version: str
    harmony: HarmonyIR
    grammar_sources: tuple[str, ...] = ()
    extra: tuple[tuple[str, Any], ...] = ()

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True, ensure_ascii=False)
