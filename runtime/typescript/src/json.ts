/**
 * JSON by the corpus's canonical rules (spec/harmony/format.json's `text_rules`), which `JSON.parse` and
 * `JSON.stringify` alone do not keep: an integral float written `1.0` stays a float (`JsonFloat`, it prints
 * `1.0`), an integer past 2^53 stays exact (`bigint`), and an object keeps its keys in the document's order
 * (JavaScript moves integer-like keys first; `entriesOf` reads the order kept under `KEY_ORDER`).
 */

import { spec } from "./tables.js";

/** A float whose value is integral (`1.0`, `1e3`): kept apart from integers because it prints differently. */
export class JsonFloat {
  constructor(readonly value: number) {}
  valueOf(): number {
    return this.value;
  }
  toJSON(): number {
    return this.value;
  }
}

export type JsonData = null | boolean | number | bigint | string | JsonFloat | JsonData[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonData;
}

/** Where an object read from JSON keeps its key order when JavaScript's own order differs. */
export const KEY_ORDER: unique symbol = Symbol("harmony-responses.keyOrder");

/** The one text of a JSON syntax error (format.json's `text_rules`: no position, no parser's words). */
export const NOT_JSON: string = spec.JSON_SYNTAX_ERROR;

/** JSON text that is not JSON; `message` is `NOT_JSON`. */
export class JsonSyntaxError extends Error {
  override readonly name = "JsonSyntaxError";
  constructor() {
    super(NOT_JSON);
  }
}

/** What `readJson` makes of `NaN`, `Infinity` and `-Infinity` when asked to mark them (JSON has no such values). */
export class NonFinite {
  constructor(readonly spelling: string) {}
}

/** Whether a value is a JSON object (not an array, not a JsonFloat). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof JsonFloat);
}

/** An object's keys in the order they were written (file order for objects read by `readJson`). */
export function keysOf(obj: object): string[] {
  const order = (obj as { [KEY_ORDER]?: readonly string[] })[KEY_ORDER];
  return order !== undefined ? [...order] : Object.keys(obj);
}

export function entriesOf(obj: object): [string, unknown][] {
  const record = obj as Record<string, unknown>;
  return keysOf(obj).map((k) => [k, record[k]]);
}

const WS = /[ \t\n\r]*/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const CONSTANTS: readonly [string, JsonData | NonFinite][] = [
  ["null", null], ["true", true], ["false", false],
  ["NaN", new NonFinite("NaN")], ["Infinity", new NonFinite("Infinity")], ["-Infinity", new NonFinite("-Infinity")],
];
const ARRAY_INDEX = /^(?:0|[1-9][0-9]{0,9})$/;

/** Parse JSON text by the canonical rules; `NaN`/`Infinity` are numbers unless `markNonFinite` (then `NonFinite`). */
export function readJson(text: string, options: { readonly markNonFinite?: boolean } = {}): JsonData {
  let i = 0;
  const at = (re: RegExp): RegExpExecArray | null => {
    re.lastIndex = i;
    const m = re.exec(text);
    if (m !== null) i += m[0].length;
    return m;
  };
  const skip = (): void => void at(WS);
  const expect = (ch: string): boolean => (skip(), text[i] === ch && ++i > 0); // white space before `ch` is skipped
  const value = (): JsonData => {
    if (expect("{")) {
      const obj: JsonObject = {};
      const order: string[] = [];
      if (!expect("}")) {
        do {
          skip();
          const quoted = at(STRING);
          if (quoted === null) throw new JsonSyntaxError();
          const key = JSON.parse(quoted[0]) as string;
          if (!expect(":")) throw new JsonSyntaxError();
          const item = value();
          if (!Object.prototype.hasOwnProperty.call(obj, key)) order.push(key);
          Object.defineProperty(obj, key, { value: item, enumerable: true, writable: true, configurable: true });
        } while (expect(","));
        if (!expect("}")) throw new JsonSyntaxError();
      }
      if (order.length > 1 && order.some((k) => ARRAY_INDEX.test(k) && Number(k) < 4294967295)) {
        Object.defineProperty(obj, KEY_ORDER, { value: order, enumerable: false });
      }
      return obj;
    }
    if (expect("[")) {
      const out: JsonData[] = [];
      if (!expect("]")) {
        do out.push(value());
        while (expect(","));
        if (!expect("]")) throw new JsonSyntaxError();
      }
      return out;
    }
    const quoted = at(STRING);
    if (quoted !== null) return JSON.parse(quoted[0]) as string;
    for (const [spelling, constant] of CONSTANTS) {
      if (!text.startsWith(spelling, i)) continue;
      i += spelling.length;
      if (!(constant instanceof NonFinite)) return constant;
      return options.markNonFinite === true ? (constant as unknown as JsonData) : Number(spelling);
    }
    const m = at(NUMBER);
    if (m === null) throw new JsonSyntaxError();
    if (m[1] !== undefined || m[2] !== undefined) {
      const f = Number(m[0]);
      return Number.isInteger(f) ? new JsonFloat(f) : f;
    }
    if (m[0].replace("-", "").length > spec.JSON_MAX_INTEGER_DIGITS) throw new JsonSyntaxError();
    const n = Number(m[0]);
    return Number.isSafeInteger(n) ? n : BigInt(m[0]);
  };
  const result = value();
  skip();
  if (i !== text.length) throw new JsonSyntaxError();
  return result;
}

/** A finite float in its shortest digits: decimal when its exponent is from `lowest` to 15, else `d.ddd` and
 * `e` then `exponent(exp)`. Python's `repr` and serde_json's `ryu` differ only in those two. */
export function floatText(value: number, lowest: number, exponent: (exp: number) => string): string {
  if (value === 0) return Object.is(value, -0) ? "-0.0" : "0.0";
  const [mantissa = "", expText = "0"] = Math.abs(value).toExponential().split("e");
  const [digits, exp, sign] = [mantissa.replace(".", ""), Number(expText), value < 0 ? "-" : ""];
  if (exp < lowest || exp >= 16) {
    const frac = digits.length > 1 ? "." + digits.slice(1) : "";
    return `${sign}${digits[0] ?? ""}${frac}e${exponent(exp)}`;
  }
  if (exp < 0) return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
  if (digits.length <= exp + 1) return `${sign}${digits}${"0".repeat(exp + 1 - digits.length)}.0`;
  return `${sign}${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
}

/** A float by the canonical rule (Python's `repr`): shortest digits, exponent form below 1e-4 and from 1e16. */
export function floatRepr(value: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
  return floatText(value, -4, (exp) => `${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`);
}

const ESCAPES: Readonly<Record<string, string>> = {
  '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f",
};

/** Options of `writeJson`: ASCII escapes (default on), an indent, the item and key separators. */
export interface WriteJsonOptions {
  readonly ensureAscii?: boolean;
  readonly indent?: number;
  /** Default `", "` and `": "`, or `","` and `": "` with an indent. */
  readonly separators?: readonly [string, string];
  /** How a float (not an integer) is written; default `floatRepr`. */
  readonly float?: (value: number) => string;
}

/** JSON text by the canonical rules: JSON's short escapes, `\uXXXX` for other characters below U+0020 (and, with
 * `ensureAscii`, for every one past U+007E), `floatRepr` floats, the objects' own key order. */
export function writeJson(value: unknown, options: WriteJsonOptions = {}): string {
  const { ensureAscii = true, indent, float = floatRepr } = options;
  const [itemSep, keySep] = options.separators ?? (indent !== undefined ? [",", ": "] : [", ", ": "]);
  const escaped = ensureAscii ? /["\\\u0000-\u001f\u007f-\uffff]/g : /["\\\u0000-\u001f]/g;
  const escape = (c: string): string => ESCAPES[c] ?? "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0");
  const str = (s: string): string => '"' + s.replace(escaped, escape) + '"';
  const write = (v: unknown, depth: number): string => {
    if (v === null || v === undefined || typeof v === "boolean" || typeof v === "bigint") return String(v ?? null);
    if (typeof v === "number") return Number.isInteger(v) ? String(v === 0 ? 0 : v) : float(v);
    if (v instanceof JsonFloat) return float(v.value);
    if (typeof v === "string") return str(v);
    if (typeof v !== "object") throw new TypeError(`a ${typeof v} is not JSON`);
    const isArray = Array.isArray(v);
    const items = isArray
      ? v.map((item: unknown) => write(item, depth + 1))
      : entriesOf(v).filter(([, item]) => item !== undefined).map(([k, item]) => str(k) + keySep + write(item, depth + 1));
    const [open, close] = isArray ? ["[", "]"] : ["{", "}"];
    if (items.length === 0) return open + close;
    if (indent === undefined) return open + items.join(itemSep) + close;
    const inner = "\n" + " ".repeat(indent * (depth + 1));
    return open + inner + items.join(itemSep + inner) + "\n" + " ".repeat(indent * depth) + close;
  };
  return write(value, 0);
}
