/**
 * JSON the way the Python package (and the reference) sees it.
 *
 * `JSON.parse` loses three things the rendered prompt depends on: `1.0` stays a float in Python and Rust
 * (a default prints as `1.0`), integers past 2^53 stay exact, and an object keeps its keys in file order
 * (JavaScript moves integer-like keys first). `readJson` keeps all three: integral floats become
 * `JsonFloat`, big integers `bigint`, and an object whose key order JavaScript would change carries its
 * order under a symbol that `entriesOf` reads. Its errors are Python's `json` errors, position included.
 * `writeJson` writes what Python's `json.dumps` writes.
 */

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

/** A JSON syntax error, with Python's message and 1-based line and column (in characters). */
export class JsonSyntaxError extends Error {
  override readonly name = "JsonSyntaxError";
  constructor(
    readonly msg: string,
    readonly line: number,
    readonly column: number,
    readonly position: number,
  ) {
    super(`${msg}: line ${line} column ${column} (char ${position})`);
  }
}

const ARRAY_INDEX = /^(?:0|[1-9][0-9]{0,9})$/;

function isArrayIndex(key: string): boolean {
  return ARRAY_INDEX.test(key) && Number(key) < 4294967295;
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

/** An object's entries in the order they were written. */
export function entriesOf(obj: object): [string, unknown][] {
  const record = obj as Record<string, unknown>;
  return keysOf(obj).map((k) => [k, record[k]]);
}

function setKey(obj: JsonObject, key: string, value: JsonData): void {
  if (key === "__proto__") Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  else obj[key] = value;
}

// -- reading ----------------------------------------------------------------------------------------------

const WS = new Set([" ", "\t", "\n", "\r"]);
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/y;
const ESCAPES: Readonly<Record<string, string>> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
const HEX4 = /^[0-9a-fA-F]{4}$/;

class Stop {
  constructor(readonly at: number) {}
}

/** Python reads integers of at most this many digits (`sys.get_int_max_str_digits()`), and refuses longer ones. */
const INT_MAX_STR_DIGITS = 4300;

/** JSON that is well formed but holds a value Python's decoder refuses (an integer too long to convert). */
export class JsonValueError extends Error {
  override readonly name = "JsonValueError";
}

/** What `readJson` makes of `NaN`, `Infinity` and `-Infinity` when asked to mark them (JSON has no such values). */
export class NonFinite {
  constructor(readonly spelling: string) {}
}

/** Options of `readJson`. */
export interface ReadJsonOptions {
  /** Read `NaN` and `Infinity` as `NonFinite` markers (their spelling kept) instead of numbers. */
  readonly markNonFinite?: boolean;
}

class Reader {
  constructor(
    private readonly s: string,
    private readonly options: ReadJsonOptions = {},
  ) {}

  private constant(spelling: string, value: number): JsonData {
    return this.options.markNonFinite === true ? (new NonFinite(spelling) as unknown as JsonData) : value;
  }

  fail(msg: string, at: number): never {
    const before = this.s.slice(0, at);
    const line = before.split("\n").length;
    const lastNl = before.lastIndexOf("\n");
    const column = [...before.slice(lastNl + 1)].length + 1;
    throw new JsonSyntaxError(msg, line, column, [...before].length);
  }

  skip(i: number): number {
    while (i < this.s.length && WS.has(this.s[i] ?? "")) i++;
    return i;
  }

  value(i: number): [JsonData, number] {
    const s = this.s;
    const c = s[i];
    if (c === '"') return this.string(i + 1);
    if (c === "{") return this.object(i + 1);
    if (c === "[") return this.array(i + 1);
    if (c === "n" && s.startsWith("null", i)) return [null, i + 4];
    if (c === "t" && s.startsWith("true", i)) return [true, i + 4];
    if (c === "f" && s.startsWith("false", i)) return [false, i + 5];
    if (c === "N" && s.startsWith("NaN", i)) return [this.constant("NaN", NaN), i + 3];
    if (c === "I" && s.startsWith("Infinity", i)) return [this.constant("Infinity", Infinity), i + 8];
    if (c === "-" && s.startsWith("-Infinity", i)) return [this.constant("-Infinity", -Infinity), i + 9];
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(s);
    if (m === null) throw new Stop(i);
    const text = m[0];
    const end = i + text.length;
    if (m[1] === undefined && m[2] === undefined) {
      const digits = text.length - (text.startsWith("-") ? 1 : 0);
      if (digits > INT_MAX_STR_DIGITS) throw new JsonValueError(`Exceeds the limit (${INT_MAX_STR_DIGITS} digits) for integer string conversion: value has ${digits} digits; use sys.set_int_max_str_digits() to increase the limit`);
      const asNumber = Number(text);
      return [Number.isSafeInteger(asNumber) ? asNumber : BigInt(text), end];
    }
    const f = Number(text);
    return [Number.isInteger(f) ? new JsonFloat(f) : f, end];
  }

  string(start: number): [string, number] {
    const s = this.s;
    let out = "";
    let i = start;
    for (;;) {
      let j = i;
      while (j < s.length) {
        const code = s.charCodeAt(j);
        if (code === 0x22 || code === 0x5c || code < 0x20) break;
        j++;
      }
      out += s.slice(i, j);
      if (j >= s.length) this.fail("Unterminated string starting at", start - 1);
      const code = s.charCodeAt(j);
      if (code === 0x22) return [out, j + 1];
      if (code < 0x20) this.fail("Invalid control character at", j);
      // a backslash
      const esc = s[j + 1];
      if (esc === undefined) this.fail("Unterminated string starting at", start - 1);
      if (esc !== "u") {
        const plain = ESCAPES[esc];
        if (plain === undefined) this.fail("Invalid \\escape", j);
        out += plain;
        i = j + 2;
        continue;
      }
      const hex = s.slice(j + 2, j + 6);
      if (!HEX4.test(hex)) this.fail("Invalid \\uXXXX escape", j + 1);
      let unit = parseInt(hex, 16);
      i = j + 6;
      if (unit >= 0xd800 && unit <= 0xdbff && s[i] === "\\" && s[i + 1] === "u") {
        const low = s.slice(i + 2, i + 6);
        if (!HEX4.test(low)) this.fail("Invalid \\uXXXX escape", i + 1);
        const lowUnit = parseInt(low, 16);
        if (lowUnit >= 0xdc00 && lowUnit <= 0xdfff) {
          out += String.fromCharCode(unit, lowUnit);
          i += 6;
          continue;
        }
      }
      out += String.fromCharCode(unit);
      unit = 0;
    }
  }

  object(start: number): [JsonObject, number] {
    const s = this.s;
    const obj: JsonObject = {};
    const order: string[] = [];
    let reordered = false;
    let i = this.skip(start);
    if (s[i] === "}") return [obj, i + 1];
    for (;;) {
      if (s[i] !== '"') this.fail("Expecting property name enclosed in double quotes", i);
      const [key, afterKey] = this.string(i + 1);
      i = this.skip(afterKey);
      if (s[i] !== ":") this.fail("Expecting ':' delimiter", i);
      i = this.skip(i + 1);
      const [value, afterValue] = this.valueOrFail(i);
      if (!Object.prototype.hasOwnProperty.call(obj, key)) {
        order.push(key);
        if (isArrayIndex(key)) reordered = true;
      }
      setKey(obj, key, value);
      i = this.skip(afterValue);
      if (s[i] === "}") break;
      if (s[i] !== ",") this.fail("Expecting ',' delimiter", i);
      i = this.skip(i + 1);
    }
    if (reordered && order.length > 1) Object.defineProperty(obj, KEY_ORDER, { value: order, enumerable: false });
    return [obj, i + 1];
  }

  array(start: number): [JsonData[], number] {
    const s = this.s;
    const out: JsonData[] = [];
    let i = this.skip(start);
    if (s[i] === "]") return [out, i + 1];
    for (;;) {
      const [value, after] = this.valueOrFail(i);
      out.push(value);
      i = this.skip(after);
      if (s[i] === "]") return [out, i + 1];
      if (s[i] !== ",") this.fail("Expecting ',' delimiter", i);
      i = this.skip(i + 1);
    }
  }

  valueOrFail(i: number): [JsonData, number] {
    try {
      return this.value(i);
    } catch (e) {
      if (e instanceof Stop) this.fail("Expecting value", e.at);
      throw e;
    }
  }
}

/** Parse JSON text as Python's `json.loads` does (same values, same errors). */
export function readJson(text: string, options: ReadJsonOptions = {}): JsonData {
  const reader = new Reader(text, options);
  if (text.startsWith("\ufeff")) reader.fail("Unexpected UTF-8 BOM (decode using utf-8-sig)", 0);
  const [value, end] = reader.valueOrFail(reader.skip(0));
  const rest = reader.skip(end);
  if (rest !== text.length) reader.fail("Extra data", rest);
  return value;
}

// -- writing ----------------------------------------------------------------------------------------------

/** A float as Python's `repr` writes it: shortest digits, exponent form below 1e-4 and from 1e16. */
export function floatRepr(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value === 0) return Object.is(value, -0) ? "-0.0" : "0.0";
  const sign = value < 0 ? "-" : "";
  const [mantissa = "", expText = "0"] = Math.abs(value).toExponential().split("e");
  const digits = mantissa.replace(".", "");
  const exp = Number(expText); // value = d.ddd × 10^exp
  if (exp < -4 || exp >= 16) {
    const frac = digits.length > 1 ? "." + digits.slice(1) : "";
    return `${sign}${digits[0] ?? ""}${frac}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  }
  if (exp < 0) return `${sign}0.${"0".repeat(-exp - 1)}${digits}`;
  if (digits.length <= exp + 1) return `${sign}${digits}${"0".repeat(exp + 1 - digits.length)}.0`;
  return `${sign}${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
}

function writeString(text: string, ensureAscii: boolean): string {
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    const ch = text[i] ?? "";
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (code < 0x20 || (ensureAscii && code > 0x7e)) out += "\\u" + code.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + '"';
}

/** Options of `writeJson`, named after `json.dumps`'s. */
export interface WriteJsonOptions {
  readonly ensureAscii?: boolean;
  /** Spaces of indent per level: one item a line, as `json.dumps(indent=N)` writes. */
  readonly indent?: number;
  /** The item and key separators (`json.dumps`'s default: `", "` and `": "`, or `","` and `": "` with an indent). */
  readonly separators?: readonly [string, string];
}

/** JSON text as Python's `json.dumps(value, ensure_ascii=..., indent=..., separators=...)` writes it. */
export function writeJson(value: unknown, options: WriteJsonOptions = {}): string {
  const ensureAscii = options.ensureAscii ?? true;
  const indent = options.indent;
  const [itemSep, keySep] = options.separators ?? (indent !== undefined ? [",", ": "] : [", ", ": "]);
  const write = (v: unknown, depth: number): string => {
    if (v === null || v === undefined) return "null";
    if (v === true) return "true";
    if (v === false) return "false";
    if (typeof v === "bigint") return v.toString();
    if (typeof v === "number") return Number.isInteger(v) ? String(v === 0 ? 0 : v) : floatRepr(v);
    if (v instanceof JsonFloat) return floatRepr(v.value);
    if (typeof v === "string") return writeString(v, ensureAscii);
    let items: string[];
    let open: string;
    let close: string;
    if (Array.isArray(v)) {
      items = v.map((item) => write(item, depth + 1));
      [open, close] = ["[", "]"];
    } else if (typeof v === "object") {
      const entries = entriesOf(v).filter(([, item]) => item !== undefined);
      items = entries.map(([k, item]) => writeString(k, ensureAscii) + keySep + write(item, depth + 1));
      [open, close] = ["{", "}"];
    } else throw new TypeError(`Object of type ${typeof v} is not JSON serializable`);
    if (items.length === 0) return open + close;
    if (indent === undefined) return open + items.join(itemSep) + close;
    const inner = "\n" + " ".repeat(indent * (depth + 1));
    return open + inner + items.join(itemSep + inner) + "\n" + " ".repeat(indent * depth) + close;
  };
  return write(value, 0);
}
