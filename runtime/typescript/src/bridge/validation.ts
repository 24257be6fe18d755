/**
 * A validation failure told in the words of the JSON it rejected: its own path, what fits there. ajv's errors are
 * mapped to the kinds of spec/mapping/requests.json's `validation` table and filled from it (the Python package's
 * `bridge/validation.py` maps pydantic's errors to the same kinds); the rule that picks the one error to tell is
 * written in that table's `$comment`.
 */

import type { ErrorObject } from "ajv";

import { isJsonObject, JsonFloat, writeJson } from "../json.js";
import { formatPath, type PathPart } from "../jsonInput.js";
import { spec } from "../tables.js";
import { cpLength, cpPrefix, fill } from "../texts.js";
import { ITEM_KEYWORD } from "./schema.js";

const TEXTS = spec.VALIDATION_TEXTS;
const FOUND_CHARS = 40; // a string found is shown up to this many characters
const SKIPPED = new Set(["if", "anyOf", "oneOf", "allOf", "not"]); // they sum up errors told by their members

/** The one thing to tell: where (the input's own path), the spec's error handle and what to say, what is there;
 * `union` names the item union no member of which took the value. */
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
  if (value === null || value === undefined) return TEXTS["null"] ?? "";
  const integral = typeof value === "bigint" || Number.isInteger(value);
  const kind = integral ? "integer" : value instanceof JsonFloat ? "number" : Array.isArray(value) ? "array" : typeof value;
  return TEXTS[kind] ?? "";
}

/** `"robot"`, `5 (an integer)`, `an array`: short enough for one line, never the whole value. */
export function found(value: unknown): string {
  if (typeof value === "string") {
    const shown = cpPrefix(value, FOUND_CHARS) + (cpLength(value) > FOUND_CHARS ? "…" : "");
    return writeJson(shown); // ASCII only, as JSON's canonical rules write it (U+007F escaped too)
  }
  if (value !== null && value !== undefined && typeof value === "object" && !(value instanceof JsonFloat)) return kindOf(value);
  const text = typeof value === "bigint" ? String(value) : (JSON.stringify(value ?? null) ?? "null"); // a JsonFloat as its number
  return fill(TEXTS["found_scalar"] ?? "", { value: text, kind: kindOf(value) });
}

/** The data's own path of an ajv error, the value there, and whether it is there. */
function locate(raw: unknown, error: ErrorObject): [PathPart[], unknown, boolean] {
  const parts: PathPart[] = [];
  let node = raw;
  for (const seg of error.instancePath.split("/").slice(1)) {
    const key = seg.replace(/~1/g, "/").replace(/~0/g, "~");
    parts.push(Array.isArray(node) ? Number(key) : key);
    node = Array.isArray(node) || isJsonObject(node) ? (node as Record<string, unknown>)[key] : undefined;
  }
  if (error.keyword === "required") return [[...parts, String(error.params["missingProperty"])], null, false];
  return [parts, node, true];
}

function phrase(error: ErrorObject): string | null {
  if (error.keyword === "type") return String(error.params["type"]).split(",").map((t) => TEXTS[t] ?? t).join(TEXTS["or"] ?? "");
  // the keyword's kind in the table: `minLength` → `min_length`; an object's properties count as entries
  const text = TEXTS[error.keyword.replace(/Properties$/, "Items").replace(/[A-Z]/g, (c) => "_" + c.toLowerCase())];
  return text !== undefined ? fill(text, { limit: error.params["limit"], pattern: error.params["pattern"] }) : null;
}

/** A string too short or too long is told that alone: its schema's pattern is not tried (pydantic's order). */
function shadowed(error: ErrorObject, all: readonly ErrorObject[]): boolean {
  const schema = error.schemaPath.slice(0, error.schemaPath.lastIndexOf("/"));
  const length = (e: ErrorObject): boolean => e.keyword === "minLength" || e.keyword === "maxLength";
  return error.keyword === "pattern" && all.some((e) => length(e) && e.schemaPath === `${schema}/${e.keyword}`);
}

/** The deepest place `raw` went wrong, and what would have fit there. */
export function explain(issues: readonly ErrorObject[], raw: unknown): Problem {
  const told = issues.filter((e) => !SKIPPED.has(e.keyword)).map((error) => ({ error, at: locate(raw, error) }));
  const depth = Math.max(...told.map((t) => t.at[0].length));
  // Of the deepest: a wrong `type` first (it explains the rest of its object), then a wrong value, then a missing one.
  const deepest = told.filter((t) => t.at[0].length === depth);
  const rank = (t: (typeof told)[number]): number => (!t.at[2] ? 2 : t.at[0][t.at[0].length - 1] === "type" ? 0 : 1);
  const chosen = [...deepest].sort((a, b) => rank(a) - rank(b))[0] as (typeof told)[number];
  const [parts, value, present] = chosen.at;
  if (chosen.error.keyword === ITEM_KEYWORD) {
    return { parts, error: spec.REQUEST_ERROR_INVALID, message: "", value, union: String(chosen.error.params["union"]) };
  }
  if (!present) return { parts, error: spec.REQUEST_ERROR_MISSING, message: "", value: null };
  // what fits at `parts` (each deepest path is as long): the values an enum or const allows, a phrase for each other error
  const here = deepest.filter((t) => t.at[2] && t.at[0].every((p, i) => p === parts[i])).map((t) => t.error);
  const listed = (e: ErrorObject): boolean => e.keyword === "enum" || e.keyword === "const";
  const allowed = (e: ErrorObject): unknown[] => (e.params["allowedValues"] as unknown[] | undefined) ?? [e.params["allowedValue"]];
  const values = [...new Set(here.filter(listed).flatMap(allowed))];
  const phrases = [...new Set(here.filter((e) => !listed(e) && !shadowed(e, here)).map(phrase))].filter((p) => p !== null);
  // null is what an optional field may also be, and a kind all the allowed values are goes without saying
  const covered = new Set([TEXTS["null"], ...values.map(kindOf)]);
  const shown = phrases.length > 1 || values.length > 0 ? phrases.filter((p) => !covered.has(p)) : phrases;
  if (values.length > 0) shown.push(fill(TEXTS["enum"] ?? "", { values: values.map((v) => JSON.stringify(v)).join(", ") }));
  const message = fill(TEXTS["message"] ?? "", { expected: shown.join(TEXTS["or"] ?? ""), found: found(value) });
  return { parts, error: spec.REQUEST_ERROR_INVALID, message, value };
}
