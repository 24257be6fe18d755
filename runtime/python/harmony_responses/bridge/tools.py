"""The function tools a request declares, top-level or inside `namespace` tools, under the names calls use.

A top-level function tool `get_weather` is called as `functions.get_weather`; a tool `spawn_agent` of the
namespace tool `multi_agent_v1` is declared in its own `namespace multi_agent_v1 { ... }` and called as
`multi_agent_v1.spawn_agent`. Function names cannot hold the namespace separator (the schema's name pattern), so
`ns.tool` names a namespace's tool unambiguously: that is the tool's `name` here (`DeclaredTool.name`), in tool
policies and in the engine's tool list. Its `function_call` item carries `name` and `namespace` apart, as
OpenAI's API writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from .._tables import spec as _spec
from ..types import CreateResponseBody, FunctionToolParam, NamespaceToolParam

FUNCTIONS_PREFIX = _spec.HEADER_FUNCTION_NAMESPACE + _spec.HEADER_NAMESPACE_SEPARATOR
SEPARATOR = _spec.HEADER_NAMESPACE_SEPARATOR
NAMESPACE_FIELD = _spec.RESPONSE_NAMESPACE_FIELD


@dataclass(frozen=True)
class DeclaredTool:
    """One function the prompt declares."""

    name: str  # `get_weather`, or `multi_agent_v1.spawn_agent` for a namespace tool's function
    tool: FunctionToolParam
    namespace: str | None  # the namespace tool's name, or None: the `functions` namespace
    where: str  # its place in the request: `tools[2]`, `tools[7].tools[1]`


def qualified(name: str, namespace: str | None) -> str:
    """The name calls use for function `name` of `namespace` (None: a top-level function)."""
    return name if namespace is None else namespace + SEPARATOR + name


def split_name(name: str) -> tuple[str, str | None]:
    """A qualified name → (the function's own name, its namespace or None)."""
    namespace, sep, own = name.partition(SEPARATOR)
    return (own, namespace) if sep else (name, None)


def recipient(name: str) -> str:
    """The recipient a call to the qualified `name` is addressed to: `functions.NAME`, or `NS.NAME`."""
    own, namespace = split_name(name)
    return FUNCTIONS_PREFIX + own if namespace is None else name


def declared_tools(body: CreateResponseBody | None) -> list[DeclaredTool]:
    """Every function the request declares, in order: top-level functions and each namespace tool's functions."""
    out: list[DeclaredTool] = []
    for i, tool in enumerate((body.tools or []) if body is not None else []):
        if isinstance(tool, NamespaceToolParam):
            out.extend(
                DeclaredTool(qualified(t.name, tool.name), t, tool.name, f"tools[{i}].tools[{j}]")
                for j, t in enumerate(tool.tools)
            )
        else:
            out.append(DeclaredTool(tool.name, tool, None, f"tools[{i}]"))
    return out


def namespace_tools(body: CreateResponseBody | None) -> list[NamespaceToolParam]:
    """The request's namespace tools, in order."""
    return [t for t in ((body.tools or []) if body is not None else []) if isinstance(t, NamespaceToolParam)]


def namespaces(body: CreateResponseBody | None) -> frozenset[str]:
    """The names of the request's namespace tools (the recipients' namespaces that make function calls)."""
    return frozenset(t.name for t in namespace_tools(body))


def dump_parameters(tool: FunctionToolParam) -> dict[str, Any] | None:
    """A function tool's `parameters` as JSON data (None: none given): the one place a request's schema is dumped."""
    return tool.parameters.model_dump(mode="json") if tool.parameters is not None else None


def parameters(tools: Iterable[DeclaredTool]) -> dict[str, dict[str, Any] | None]:
    """Each declared function's qualified name → its JSON Schema parameters (None: none given)."""
    return {d.name: dump_parameters(d.tool) for d in tools}


@dataclass(frozen=True)
class ToolPolicy:
    """What `tool_choice` asks of the sampler: the prompt alone cannot force or forbid a call."""

    mode: Literal["none", "auto", "required"]
    allowed: tuple[str, ...]  # the function names the model may call (all of them are in the prompt)


@dataclass(frozen=True)
class ToolPlan:
    """A request's function tools, read once (`request.plan_tools`) for everything that needs them: the prompt's
    tool sections, the engine's tool list and forced call, the parser's tool names and the response builder's
    strict checks and echoed `tools`. Each schema is dumped here, once per request."""

    declared: tuple[DeclaredTool, ...]  # every function the request declares, in order
    offered: tuple[DeclaredTool, ...]  # those the prompt declares (what the tool policy keeps)
    policy: ToolPolicy
    schemas: Mapping[str, dict[str, Any] | None]  # qualified name → its parameters as JSON (None: none given)
    namespaces: frozenset[str]  # the namespace tools' names

    @property
    def functions(self) -> tuple[str, ...]:
        """The top-level functions' names (the lenient parser's declared tools)."""
        return tuple(d.name for d in self.declared if d.namespace is None)

    @property
    def strict(self) -> dict[str, dict[str, Any]]:
        """The strict functions' schemas, by qualified name (`{}` for one given without parameters)."""
        return {d.name: self.schemas[d.name] or {} for d in self.declared if d.tool.strict}


def read_tools(
    body: CreateResponseBody | None,
    offered: Sequence[DeclaredTool] | None = None,
    policy: ToolPolicy | None = None,
) -> ToolPlan:
    """The `ToolPlan` of `body`, given what its tool policy offers (default: every declared function, `auto`)."""
    declared = tuple(declared_tools(body))
    kept = declared if offered is None else tuple(offered)
    return ToolPlan(
        declared=declared,
        offered=kept,
        policy=policy or ToolPolicy("auto", tuple(d.name for d in declared)),
        schemas=MappingProxyType({d.name: dump_parameters(d.tool) for d in declared}),
        namespaces=namespaces(body),
    )
