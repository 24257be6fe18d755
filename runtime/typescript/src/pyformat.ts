/**
 * The spec's message templates use Python's `str.format` syntax (`{name}`, `{name!r}`, `{{`, `}}`); this
 * fills them in, so an error text reads the same in both languages.
 */

import { floatRepr, isJsonObject, JsonFloat, keysOf } from "./json.js";

export type FormatValue = string | number | boolean | null;

const FIELD = /\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(![rs])?\}/g;

/** `template` with each field replaced by its value (`!r`: as Python's `repr` writes it). */
export function pyFormat(template: string, values: Readonly<Record<string, FormatValue>>): string {
  return template.replace(FIELD, (whole: string, name: string | undefined, conversion: string | undefined) => {
    if (whole === "{{") return "{";
    if (whole === "}}") return "}";
    if (name === undefined || !(name in values)) throw new Error(`template field ${whole} has no value`);
    const value = values[name] ?? null;
    return conversion === "!r" ? pyRepr(value) : pyStr(value);
  });
}

/** A value as Python's `str()` writes it. */
export function pyStr(value: FormatValue): string {
  if (value === null) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  return String(value);
}

/** A value as Python's `repr()` writes it (strings: quotes chosen and characters escaped like CPython). */
export function pyRepr(value: FormatValue): string {
  if (typeof value !== "string") return pyStr(value);
  const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of value) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === quote || ch === "\\") out += "\\" + ch;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (isPrintable(ch)) out += ch;
    else if (code < 0x100) out += "\\x" + code.toString(16).padStart(2, "0");
    else if (code < 0x10000) out += "\\u" + code.toString(16).padStart(4, "0");
    else out += "\\U" + code.toString(16).padStart(8, "0");
  }
  return out + quote;
}

const NOT_PRINTABLE = /^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u;

/** Python's `str.isprintable()` for one character: not a control, format, separator or unassigned one. */
export function isPrintable(ch: string): boolean {
  return ch === " " || !NOT_PRINTABLE.test(ch);
}

/** A JSON value as Python's `repr` writes the object `json.loads` made of it. */
export function pyReprJson(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    if (Number.isNaN(value)) return "nan";
    if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
    return floatRepr(value);
  }
  if (value instanceof JsonFloat) return Number.isFinite(value.value) ? floatRepr(value.value) : value.value > 0 ? "inf" : "-inf";
  if (typeof value === "string") return pyRepr(value);
  if (Array.isArray(value)) return "[" + value.map(pyReprJson).join(", ") + "]";
  if (isJsonObject(value)) return "{" + keysOf(value).map((k) => `${pyRepr(k)}: ${pyReprJson(value[k])}`).join(", ") + "}";
  return String(value);
}
