/**
 * The function tools a request declares, top-level or inside `namespace` tools, under the names calls use (Python's
 * `bridge/tools.py`): `get_weather` is called as `functions.get_weather`; a tool `spawn_agent` of the namespace tool
 * `multi_agent_v1` is declared in its own `namespace multi_agent_v1 { ... }`, called as `multi_agent_v1.spawn_agent`,
 * and that qualified name is its name in tool policies; its `function_call` item carries `name` and `namespace`.
 */

import type { CreateResponseBody, FunctionToolParam, NamespaceToolParam } from "#types";

import { spec } from "../tables.js";

export const FUNCTIONS_PREFIX = spec.HEADER_FUNCTION_NAMESPACE + spec.HEADER_NAMESPACE_SEPARATOR;
const SEPARATOR = spec.HEADER_NAMESPACE_SEPARATOR;

/** One function the prompt declares. */
export interface DeclaredTool {
  readonly name: string; // `get_weather`, or `multi_agent_v1.spawn_agent` for a namespace tool's function
  readonly tool: FunctionToolParam;
  readonly namespace: string | null; // the namespace tool's name, or null: the `functions` namespace
  readonly where: string; // its place in the request: `tools[2]`, `tools[7].tools[1]`
}

/** The name calls use for function `name` of `namespace` (null: a top-level function). */
export function qualified(name: string, namespace: string | null | undefined): string {
  return namespace === null || namespace === undefined ? name : namespace + SEPARATOR + name;
}

/** The recipient a call to the qualified `name` is addressed to: `functions.NAME`, or `NS.NAME`. */
export function recipient(name: string): string {
  return name.includes(SEPARATOR) ? name : FUNCTIONS_PREFIX + name;
}

/** Every function the request declares, in order: top-level functions and each namespace tool's functions. */
export function declaredTools(body: CreateResponseBody | null): DeclaredTool[] {
  return (body?.tools ?? []).flatMap((tool, i): DeclaredTool[] =>
    tool.type === "namespace"
      ? tool.tools.map((t, j) => ({ name: qualified(t.name, tool.name), tool: t, namespace: tool.name, where: `tools[${i}].tools[${j}]` }))
      : [{ name: tool.name, tool, namespace: null, where: `tools[${i}]` }],
  );
}

export function namespaceTools(body: CreateResponseBody | null): NamespaceToolParam[] {
  return (body?.tools ?? []).filter((t) => t.type === "namespace");
}

/** The top-level function tools of the request (what the response's `tools` echo). */
export function functionTools(body: CreateResponseBody | null): FunctionToolParam[] {
  return (body?.tools ?? []).filter((t) => t.type !== "namespace");
}
