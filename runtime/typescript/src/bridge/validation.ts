/**
 * A validation failure told in the words of the JSON it rejected: its own path, what fits there (the Python
 * package's `bridge/validation.py`, reading the same pydantic-shaped errors `schema.ts` produces).
 *
 * Validation reports one error per union member it tried, at locations that name those members
 * (`UserMessageItemParam`, `constrained-str`, `list[tagged-union[...]]`). `explain` follows the input instead:
 * the member that got furthest into the data says the most, and all members failing at that same place together
 * say what was expected there (`expected a string or an array, found 5 (an integer)`).
 */

import { floatRepr, isJsonObject, JsonFloat, writeJson } from "../json.js";
import { formatPath, type PathPart } from "../jsonInput.js";
import { spec } from "../tables.js";
import type { Loc, ValidationIssue } from "./schema.js";

/** Pydantic's error type → what the input should have held there. */
const EXPECTED: Readonly<Record<string, string>> = {
  string_type: "a string",
  string_unicode: "a string",
  list_type: "an array",
  tuple_type: "an array",
  dict_type: "an object",
  model_type: "an object",
  model_attributes_type: "an object",
  int_type: "an integer",
  int_parsing: "an integer",
  int_from_float: "an integer",
  float_type: "a number",
  float_parsing: "a number",
  bool_type: "a boolean",
  bool_parsing: "a boolean",
  none_required: "null",
};
const BOUNDS: Readonly<Record<string, string>> = { greater_than_equal: ">=", greater_than: ">", less_than_equal: "<=", less_than: "<" };
const TAG_ERRORS = new Set(["union_tag_invalid", "union_tag_not_found"]);
const INVALID = spec.REQUEST_ERROR_INVALID;
const MISSING = spec.REQUEST_ERROR_MISSING;
/** How the item unions' discriminator is named in their errors. */
export const ITEM_UNION = "item_tag()";
const TAG = "type";

/** The one thing to tell: where (the input's own path), the spec's error handle and what to say, what is there;
 * `union` is the discriminator of a tagged union no member of which took the value. */
export interface Problem {
  readonly parts: readonly PathPart[];
  readonly error: string;
  readonly message: string;
  readonly value: unknown;
  readonly union?: string;
}

export function problemPath(problem: Problem, root = ""): string {
  return formatPath(root, problem.parts);
}

/** `an integer`, `an array`, `null`: a JSON value's kind. */
export function kindOf(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "boolean") return "a boolean";
  if (typeof value === "bigint" || (typeof value === "number" && Number.isInteger(value))) return "an integer";
  if (typeof value === "number" || value instanceof JsonFloat) return "a number";
  if (typeof value === "string") return "a string";
  if (Array.isArray(value)) return "an array";
  if (isJsonObject(value)) return "an object";
  return typeof value;
}

/** `"robot"`, `5 (an integer)`, `an array`: short enough for one line, never the whole value. */
export function found(value: unknown): string {
  if (typeof value === "string") {
    const chars = [...value];
    return writeJson(chars.slice(0, 40).join("") + (chars.length > 40 ? "…" : ""), { ensureAscii: true });
  }
  if (value === null || value === undefined || typeof value === "boolean" || typeof value === "bigint") return `${writeJson(value)} (${kindOf(value)})`;
  if (typeof value === "number") return `${Number.isInteger(value) ? String(value) : floatRepr(value)} (${kindOf(value)})`;
  if (value instanceof JsonFloat) return `${floatRepr(value.value)} (${kindOf(value)})`;
  return kindOf(value);
}

function hasKey(node: unknown, key: string): node is Record<string, unknown> {
  return isJsonObject(node) && Object.prototype.hasOwnProperty.call(node, key);
}

/** The input's own path for a location, the value there, and whether it is present (union members left out). */
function resolve(raw: unknown, loc: Loc, missing: boolean): [PathPart[], unknown, boolean] {
  const parts: PathPart[] = [];
  let node = raw;
  for (let i = 0; i < loc.length; i++) {
    const seg = loc[i] as PathPart;
    if (typeof seg === "number" && Array.isArray(node) && seg >= 0 && seg < node.length) {
      parts.push(seg);
      node = node[seg];
    } else if (typeof seg === "string" && hasKey(node, seg)) {
      parts.push(seg);
      node = node[seg];
    } else if (missing && i === loc.length - 1 && isJsonObject(node)) {
      parts.push(seg);
      return [parts, null, false];
    }
  }
  return [parts, node, true];
}

function phrase(issue: ValidationIssue): string {
  const kind = issue.type;
  const ctx = issue.ctx ?? {};
  const expected = EXPECTED[kind];
  if (expected !== undefined) return expected;
  if (kind === "string_too_long") return `a string of at most ${String(ctx["max_length"])} characters`;
  if (kind === "string_too_short") return `a string of at least ${String(ctx["min_length"])} characters`;
  if (kind === "too_long") return `at most ${String(ctx["max_length"])} entries`;
  if (kind === "too_short") return `at least ${String(ctx["min_length"])} entries`;
  if (kind === "string_pattern_mismatch") return `a string matching ${String(ctx["pattern"])}`;
  const bound = BOUNDS[kind];
  if (bound !== undefined) return `a number ${bound} ${String(Object.values(ctx)[0] ?? "")}`;
  let msg = issue.msg;
  for (const prefix of ["Input should be ", "Value error, "]) if (msg.startsWith(prefix)) msg = msg.slice(prefix.length);
  return msg;
}

function quoted(text: unknown): string {
  return String(text).replace(/'/g, '"');
}

/** The deepest place `raw` went wrong, and what would have fit there. */
export function explain(issues: readonly ValidationIssue[], raw: unknown): Problem {
  const resolved = issues.map((issue) => {
    const [parts, value, present] = resolve(raw, issue.loc, issue.type === "missing");
    return { parts, value, present, issue };
  });
  const depth = Math.max(...resolved.map((r) => r.parts.length));
  const deepest = resolved.filter((r) => r.parts.length === depth);
  // A wrong `type` explains the other complaints about its object.
  const chosen = deepest.find((r) => r.parts.length > 0 && r.parts[r.parts.length - 1] === TAG) ?? (deepest[0] as (typeof deepest)[number]);
  const { parts, value, present, issue } = chosen;
  if (TAG_ERRORS.has(issue.type)) {
    const ctx = issue.ctx ?? {};
    const union = String(ctx["discriminator"] ?? "");
    if (union === ITEM_UNION) return { parts, error: INVALID, message: "expected a known item type", value, union };
    if (issue.type === "union_tag_not_found") return { parts: [...parts, TAG], error: MISSING, message: "", value: null, union };
    const tag = isJsonObject(value) ? value[TAG] : value;
    const message = `expected a type of ${quoted(ctx["expected_tags"] ?? "")}, found ${found(tag)}`;
    return { parts: [...parts, TAG], error: INVALID, message, value: tag, union };
  }
  if (!present) return { parts, error: MISSING, message: "", value: null };
  const phrases: string[] = [];
  const literals: string[] = [];
  for (const r of deepest) {
    const kind = r.issue.type;
    if (r.parts.length !== parts.length || r.parts.some((p, i) => p !== parts[i]) || TAG_ERRORS.has(kind) || kind === "missing") continue;
    if (kind === "literal_error") literals.push(quoted(r.issue.ctx?.["expected"] ?? ""));
    else {
      const p = phrase(r.issue);
      if (!phrases.includes(p)) phrases.push(p);
    }
  }
  if (literals.length > 0) phrases.push("one of " + literals.join(", ").replace(/ or /g, ", "));
  return { parts, error: INVALID, message: `expected ${phrases.join(" or ")}, found ${found(value)}`, value };
}
