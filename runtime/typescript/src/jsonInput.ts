/**
 * Untrusted JSON, read within documented limits; every problem names its JSON path (the Python package's
 * `json_input`, same limits, same messages).
 *
 * - `MAX_JSON_DEPTH` (spec/mapping/requests.json): arrays and objects nest at most that deep, the document itself
 *   being depth 1;
 * - `MAX_SCHEMA_CHARS`: a JSON Schema shown to the model is at most that many characters of compact JSON (the
 *   bridge checks it);
 * - a string or key holding a lone UTF-16 surrogate is refused, and so are `NaN` and `Infinity`.
 *
 * A document nested about 1000 deep makes Python's decoder give up before anything is checked (its recursion
 * limit); the path then reported is the first container beyond the limit, found from the brackets alone. This
 * module does the same from 1000 levels on.
 */

import { isJsonObject, JsonFloat, type JsonData, JsonSyntaxError, JsonValueError, keysOf, NonFinite, readJson, writeJson } from "./json.js";
import { spec } from "./tables.js";

export const MAX_JSON_DEPTH: number = spec.MAX_JSON_DEPTH;
export const MAX_SCHEMA_CHARS: number = spec.MAX_SCHEMA_CHARS;
const DECODER_DEPTH = 1000; // where Python's decoder stops on its recursion limit

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

function codePointsBefore(text: string, index: number): number {
  return [...text.slice(0, index)].length;
}

/** Every problem of a decoded value, in document order: (path parts, reason). Iterative, never recursive. */
function* walk(value: unknown): Generator<[PathPart[], string]> {
  const stack: [PathPart[], unknown][] = [[[], value]];
  while (stack.length > 0) {
    const [parts, node] = stack.pop() as [PathPart[], unknown];
    if (typeof node === "string") {
      const bad = SURROGATE.test(node) ? LONE_SURROGATE.exec(node) : null;
      if (bad !== null) {
        yield [parts, `lone surrogate ${writeJson(bad[0])} at character ${codePointsBefore(node, bad.index)}: not valid Unicode`];
      }
    } else if (node instanceof NonFinite) {
      yield [parts, `expected a finite number, found ${node.spelling}`];
    } else if (Array.isArray(node) || isJsonObject(node)) {
      if (parts.length >= MAX_JSON_DEPTH) {
        yield [parts, `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`];
        continue;
      }
      const children: [PathPart[], unknown][] = [];
      if (Array.isArray(node)) node.forEach((child, i) => children.push([[...parts, i], child]));
      else {
        for (const key of keysOf(node)) {
          if (SURROGATE.test(key) && LONE_SURROGATE.test(key)) {
            yield [[...parts, key], "the key holds a lone surrogate: not valid Unicode"];
            continue;
          }
          children.push([[...parts, key], node[key]]);
        }
      }
      for (let i = children.length - 1; i >= 0; i--) stack.push(children[i] as [PathPart[], unknown]);
    } else if (typeof node === "number" && !Number.isFinite(node)) {
      yield [parts, `expected a finite number, found ${Number.isNaN(node) ? "nan" : node > 0 ? "inf" : "-inf"}`];
    } else if (node instanceof JsonFloat && !Number.isFinite(node.value)) {
      yield [parts, `expected a finite number, found ${node.value > 0 ? "inf" : "-inf"}`];
    }
  }
}

/** Throw `JSONInputError` for the first problem of an already decoded value (depth, surrogates, NaN). */
export function checkJsonValue(value: unknown, root = "$"): void {
  for (const [parts, reason] of walk(value)) throw new JSONInputError(formatPath(root, parts), reason);
}

const TOKEN_RE = /"(?:[^"\\]|\\.)*"?|[[\]{}:,]/gs;

/** The deepest nesting of `text`'s brackets, and the path of the first container beyond `limit` (or null). */
function nesting(text: string, root: string, limit: number): [number, string | null] {
  const frames: [boolean, PathPart, boolean][] = []; // per open container: is an object, key or index, expecting a key
  let deepest = 0;
  let first: string | null = null;
  TOKEN_RE.lastIndex = 0;
  for (let m = TOKEN_RE.exec(text); m !== null; m = TOKEN_RE.exec(text)) {
    const tok = m[0];
    if (tok === "[" || tok === "{") {
      if (frames.length >= limit && first === null) first = formatPath(root, frames.map((f) => f[1]));
      frames.push(tok === "{" ? [true, "", true] : [false, 0, false]);
      deepest = Math.max(deepest, frames.length);
    } else if (tok === "]" || tok === "}") {
      frames.pop();
    } else if (tok === ",") {
      const top = frames[frames.length - 1];
      if (top !== undefined) {
        if (top[0]) top[2] = true;
        else top[1] = (top[1] as number) + 1;
      }
    } else if (tok !== ":") {
      const top = frames[frames.length - 1];
      if (top !== undefined && top[2]) {
        try {
          top[1] = JSON.parse(tok) as string;
        } catch {
          top[1] = tok;
        }
        top[2] = false;
      }
    }
  }
  return [deepest, first];
}

/**
 * Decode JSON text within the limits; `JSONInputError` names the path (or line and column) of a problem. A
 * leading byte-order mark is refused as Python's decoder and the reference refuse it.
 */
export function loadJson(text: string, root = "$"): JsonData {
  const [deepest, tooDeep] = nesting(text, root, MAX_JSON_DEPTH);
  if (deepest >= DECODER_DEPTH) throw new JSONInputError(tooDeep ?? root, `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`);
  let value: JsonData;
  try {
    value = readJson(text, { markNonFinite: true });
  } catch (e) {
    if (e instanceof JsonSyntaxError) throw new JSONInputError(root, `expected JSON, line ${e.line} column ${e.column}: ${e.msg}`);
    if (e instanceof JsonValueError) throw new JSONInputError(root, `expected JSON: ${e.message}`);
    throw e;
  }
  checkJsonValue(value, root);
  return value;
}
