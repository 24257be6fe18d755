/**
 * Untrusted JSON, read within documented limits; every problem names its JSON path (the Python package's
 * `json_input`, same limits, same texts: see its docstring). The nesting limit is checked on the text's brackets
 * before anything is decoded; a syntax error is format.json's one `text_rules` error text, with no position.
 */

import { isJsonObject, type JsonData, JsonSyntaxError, keysOf, NonFinite, readJson, writeJson } from "./json.js";
import { recover, rethrow } from "./errors.js";
import { spec } from "./tables.js";
import { cpCount } from "./texts.js";

export const MAX_JSON_DEPTH: number = spec.MAX_JSON_DEPTH;
export const MAX_SCHEMA_CHARS: number = spec.MAX_SCHEMA_CHARS;

const KEY_RE = /^[A-Za-z_][A-Za-z0-9_-]*$/;
const SURROGATE = /[\ud800-\udfff]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** JSON that cannot be taken: `path` (`$.messages[0].role`, `input[2]`) and what was wrong there. */
export class JSONInputError extends Error {
  override readonly name = "JSONInputError";
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(path ? `${path}: ${reason}` : reason);
  }
}

export type PathPart = string | number;

/** `root` followed by `[i]` for indexes and `.key` for keys (`["odd key"]` when not a plain word). An empty root
 * gives the request style (`input[0].role`); `$` the JSONPath style (`$.input[0].role`). */
export function formatPath(root: string, parts: readonly PathPart[]): string {
  let out = root;
  for (const part of parts) {
    if (typeof part === "number") out += `[${part}]`;
    else if (KEY_RE.test(part)) out += out ? `.${part}` : part;
    else out += "[" + writeJson(part) + "]";
  }
  return out;
}

const TOO_DEEP = `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`;

/** The first problem of a decoded value in document order (a key's before its container's values), or null.
 * The recursion stops at `MAX_JSON_DEPTH`, so a deep value cannot overflow the stack. */
function firstProblem(node: unknown, parts: PathPart[]): [PathPart[], string] | null {
  if (typeof node === "string") {
    const bad = SURROGATE.test(node) ? LONE_SURROGATE.exec(node) : null;
    if (bad === null) return null;
    return [parts, `lone surrogate ${writeJson(bad[0])} at character ${cpCount(node, 0, bad.index)}: not valid Unicode`];
  }
  if (node instanceof NonFinite) return [parts, `expected a finite number, found ${node.spelling}`];
  if (typeof node === "number" && !Number.isFinite(node)) {
    return [parts, `expected a finite number, found ${Number.isNaN(node) ? "nan" : node > 0 ? "inf" : "-inf"}`];
  }
  if (!Array.isArray(node) && !isJsonObject(node)) return null;
  if (parts.length >= MAX_JSON_DEPTH) return [parts, TOO_DEEP];
  const children: [PathPart, unknown][] = Array.isArray(node) ? node.map((child, i) => [i, child]) : keysOf(node).map((k) => [k, node[k]]);
  const badKey = children.find(([key]) => typeof key === "string" && SURROGATE.test(key) && LONE_SURROGATE.test(key));
  if (badKey !== undefined) return [[...parts, badKey[0]], "the key holds a lone surrogate: not valid Unicode"];
  for (const [key, child] of children) {
    const found = firstProblem(child, [...parts, key]);
    if (found !== null) return found;
  }
  return null;
}

/** Throw `JSONInputError` for the first problem of an already decoded value (depth, surrogates, NaN). */
export function checkJsonValue(value: unknown, root = "$"): void {
  const problem = firstProblem(value, []);
  if (problem !== null) throw new JSONInputError(formatPath(root, problem[0]), problem[1]);
}

const TOKEN_RE = /"(?:[^"\\]|\\.)*"?|[[\]{}:,]/gs;

/** The path of the first container nested beyond `MAX_JSON_DEPTH`, from the text's brackets alone (or null). */
function tooDeepAt(text: string, root: string): string | null {
  const frames: [boolean, PathPart, boolean][] = []; // per open container: is an object, key or index, expecting a key
  for (const [tok] of text.matchAll(TOKEN_RE)) {
    const top = frames[frames.length - 1];
    if (tok === "[" || tok === "{") {
      if (frames.length >= MAX_JSON_DEPTH) return formatPath(root, frames.map((f) => f[1]));
      frames.push(tok === "{" ? [true, "", true] : [false, 0, false]);
    } else if (tok === "]" || tok === "}") frames.pop();
    else if (tok === "," && top !== undefined) {
      if (top[0]) top[2] = true;
      else top[1] = (top[1] as number) + 1;
    } else if (tok !== ":" && top?.[2] === true) {
      top[1] = recover(SyntaxError, () => JSON.parse(tok) as string, () => tok); // an unfinished key stays as written
      top[2] = false;
    }
  }
  return null;
}

/** Decode JSON text within the limits; `JSONInputError` names the path of a problem (the root for a syntax error). */
export function loadJson(text: string, root = "$"): JsonData {
  const tooDeep = tooDeepAt(text, root);
  if (tooDeep !== null) throw new JSONInputError(tooDeep, TOO_DEEP);
  const value = rethrow(JsonSyntaxError, () => readJson(text, { markNonFinite: true }), (e) => new JSONInputError(root, e.message));
  checkJsonValue(value, root);
  return value;
}
