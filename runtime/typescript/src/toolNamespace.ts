/**
 * JSON Schema → the TypeScript-like `namespace NAME { ... }` text models are trained on.
 *
 * The output matches the reference byte for byte, including its quirks (a nested object's description
 * printed twice, its closing brace at the inner indent, nothing escaped), because any difference changes
 * the prompt's tokens. Schemas read with `readJson` keep their key order and their integral floats.
 */

import { entriesOf, floatText, isJsonObject, writeJson, type JsonObject } from "./json.js";
import { ToolDescription, ToolNamespaceConfig } from "./models.js";
import { fill } from "./texts.js";
import { spec } from "./tables.js";

const COMMENT = spec.TOOLS_COMMENT_PREFIX;
const PLAIN_TYPES: ReadonlyMap<string, string> = new Map([["number", "number"], ["integer", "number"], ["boolean", "boolean"]]);

/** Split like Rust's `str::lines()`: on `\n` or `\r\n`; a lone `\r` stays; no final empty line. */
export function rustLines(text: string): string[] {
  const lines = text.split("\n").map((p, i, all) => (i < all.length - 1 && p.endsWith("\r") ? p.slice(0, -1) : p));
  if (lines.at(-1) === "") lines.pop();
  return lines;
}

/** Compare strings by code point, as Python sorts them. */
export function compareCodePoints(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0) ?? 0);
  const y = Array.from(b, (c) => c.codePointAt(0) ?? 0);
  const i = x.findIndex((point, k) => point !== y[k]); // past the end of `y`, y[k] is undefined
  return i < 0 ? x.length - y.length : (x[i] ?? 0) - (y[i] ?? -1);
}

/** `schema[key]`, with null read as absent. */
function get(schema: unknown, key: string): unknown {
  return isJsonObject(schema) ? (schema[key] ?? undefined) : undefined;
}

function has(schema: unknown, key: string): boolean {
  return isJsonObject(schema) && Object.prototype.hasOwnProperty.call(schema, key);
}

/** Compact JSON as serde_json's Display writes it: non-ASCII kept, key order kept, and floats as the `ryu` crate
 * prints them (shortest digits, decimal notation for exponents from -5 to 15). */
function jsonDisplay(value: unknown): string {
  const ryu = (float: number): string => (Number.isFinite(float) ? floatText(float, -5, String) : "null");
  return writeJson(value, { ensureAscii: false, separators: [",", ":"], float: ryu });
}

/** The `default: …` comment, or null; a top-level oneOf variant (`inline`) writes an enum's string default as JSON. */
function defaultOf(schema: unknown, inline = false): string | null {
  if (!has(schema, "default")) return null;
  const value = (schema as JsonObject)["default"];
  const values = get(schema, "enum");
  if (typeof value === "string" && !(Array.isArray(values) && values.length > 0)) return `default: "${value}"`;
  return typeof value === "string" && !inline ? `default: ${value}` : `default: ${jsonDisplay(value)}`;
}

function withNullable(variant: unknown, text: string): string {
  return isJsonObject(variant) && variant["nullable"] === true && !text.includes("null") ? text + " | null" : text;
}

/** ` | TYPE // trailing comments` for one oneOf variant. */
function variantLine(variant: unknown, indent: string, trailing: readonly (string | null)[]): string {
  const text = ` | ${withNullable(variant, schemaToTypescript(variant, indent + "   "))}`;
  const comments = trailing.filter((t): t is string => t !== null);
  return comments.length > 0 ? `${text} // ${comments.join(" ")}` : text;
}

function descriptionOf(schema: unknown): string | null {
  const desc = get(schema, "description");
  return typeof desc === "string" ? desc : null;
}

function oneOfProperty(key: string, val: JsonObject, variants: readonly unknown[], optional: string, indent: string): string {
  let out = "";
  const propDesc = descriptionOf(val);
  const descAbove = propDesc !== null && descriptionOf(variants[0]) !== propDesc;
  if (descAbove) out += `${indent}${COMMENT}${propDesc}\n`;
  if (has(val, "default")) out += `${indent}${COMMENT}${defaultOf(val)}\n`;
  out += `${indent}${key}${optional}:\n`;
  variants.forEach((variant, i) => {
    const vdesc = i === 0 && descAbove ? null : descriptionOf(variant);
    out += indent + variantLine(variant, indent, [vdesc !== propDesc ? vdesc : null, defaultOf(variant)]) + "\n";
  });
  return out + `${indent},\n`;
}

function objectType(schema: JsonObject, indent: string): string {
  const desc = descriptionOf(schema);
  let out = (desc === null ? "" : `${indent}${COMMENT}${desc}\n`) + "{\n";
  const props = schema["properties"];
  if (isJsonObject(props)) {
    const required = new Set(Array.isArray(schema["required"]) ? schema["required"] : []); // only strings can be a key
    for (const [key, val] of entriesOf(props)) {
      const optional = required.has(key) ? "" : "?";
      const title = get(val, "title");
      if (typeof title === "string") out += `${indent}${COMMENT}${title}\n${indent}//\n`;
      const oneOf = get(val, "oneOf");
      const pdesc = descriptionOf(val);
      if (oneOf === undefined && pdesc !== null) out += `${indent}${COMMENT}${pdesc}\n`;
      const examples = get(val, "examples");
      if (Array.isArray(examples) && examples.length > 0) {
        out += `${indent}${COMMENT}Examples:\n`;
        for (const ex of examples) if (typeof ex === "string") out += `${indent}${COMMENT}- "${ex}"\n`;
      }
      if (Array.isArray(oneOf) && isJsonObject(val)) {
        out += oneOfProperty(key, val, oneOf, optional, indent);
        continue;
      }
      const type = withNullable(val, schemaToTypescript(val, indent + "    "));
      const def = oneOf === undefined ? defaultOf(val) : null;
      out += `${indent}${key}${optional}: ${type},${def === null ? "" : ` // ${def}`}\n`;
    }
  }
  return out + `${indent}}`;
}

/** Render one JSON Schema as the reference's TypeScript-like type text. */
export function schemaToTypescript(schema: unknown, indent = ""): string {
  const oneOf = get(schema, "oneOf");
  if (Array.isArray(oneOf)) {
    return oneOf.map((v) => `\n${indent}` + variantLine(v, indent, [descriptionOf(v), defaultOf(v, true)])).join("");
  }
  const kind = get(schema, "type");
  if (Array.isArray(kind)) {
    const names = kind.filter((t): t is string => typeof t === "string").map((t) => (t === "integer" ? "number" : t));
    if (names.length > 0) return names.join(" | ");
  }
  if (typeof kind !== "string" || !isJsonObject(schema)) return "any";
  if (kind === "object") return objectType(schema, indent);
  if (kind === "array") return has(schema, "items") ? schemaToTypescript(schema["items"], indent) + "[]" : "Array<any>";
  if (kind === "string") {
    const values = schema["enum"];
    const members = Array.isArray(values) ? values.filter((v): v is string => typeof v === "string").map((v) => `"${v}"`) : [];
    return members.length > 0 ? members.join(" | ") : "string";
  }
  return PLAIN_TYPES.get(kind) ?? "any";
}

function namespaceBlock(ns: ToolNamespaceConfig): string {
  const lines = [fill(spec.TOOLS_NAMESPACE_HEADING, { name: ns.name })];
  const prefix = ns.tools.length > 0 ? COMMENT : "";
  for (const line of rustLines(ns.description ?? "")) lines.push(prefix + line); // no description, no lines
  if (ns.tools.length > 0) {
    lines.push(fill(spec.TOOLS_NAMESPACE_OPEN, { name: ns.name }));
    for (const { name, description, parameters } of ns.tools) {
      for (const line of rustLines(description)) lines.push(COMMENT + line);
      const params = parameters === null ? null : schemaToTypescript(parameters, "");
      lines.push(params === null ? fill(spec.TOOLS_TOOL_WITHOUT_PARAMS, { name }) : fill(spec.TOOLS_TOOL_WITH_PARAMS, { name, params }));
    }
    lines.push(fill(spec.TOOLS_NAMESPACE_CLOSE, { name: ns.name }));
  }
  return lines.join(spec.TOOLS_BLOCK_JOINER);
}

/** The `# Tools` section of a system or developer message: namespaces sorted by key. */
export function renderToolsSection(namespaces: ReadonlyMap<string, ToolNamespaceConfig>): string {
  const sorted = [...namespaces].sort(([a], [b]) => compareCodePoints(a, b));
  return [spec.TOOLS_HEADING, ...sorted.map(([, ns]) => namespaceBlock(ns))].join(spec.TOOLS_NAMESPACE_JOINER);
}

/** A tool given as a ToolDescription or an OpenAI-style object (flat, or nested under `function`). */
export type ToolLike = ToolDescription | JsonObject;

function asTool(raw: ToolLike): ToolDescription {
  if (raw instanceof ToolDescription) return raw;
  if (!isJsonObject(raw)) throw new TypeError(`a tool must be a ToolDescription or an object, not ${typeof raw}`);
  const nested = raw["function"];
  const data = raw["type"] === "function" && isJsonObject(nested) ? nested : raw;
  const { name, description, parameters } = data;
  if (typeof name !== "string") throw new TypeError(`tool ${jsonDisplay(raw)}: 'name' must be a string`);
  return new ToolDescription(name, typeof description === "string" ? description : "", isJsonObject(parameters) ? parameters : null);
}

/**
 * The namespace block alone (`## name` … `} // namespace name`) for a list of tools: ToolDescriptions or
 * OpenAI-style objects, flat (`{"type": "function", "name", "description", "parameters"}`) or nested under
 * `"function"` as in Chat Completions.
 */
export function renderToolNamespace(name: string, tools: Iterable<ToolLike>, description: string | null = null): string {
  return namespaceBlock(new ToolNamespaceConfig(name, description, [...tools].map(asTool)));
}
