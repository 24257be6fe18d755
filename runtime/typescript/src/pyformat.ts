/**
 * What is left of Python's formatting while parsing.json's texts still use `{name!r}` (until they take the
 * spec's placeholder rule, see texts.ts) and the request validation still writes pydantic's and jsonschema's
 * words (schema.ts, arguments.ts): `str.format` with `!r`, and `repr` of a JSON value.
 */

import { floatRepr, isJsonObject, JsonFloat, keysOf } from "./json.js";
import { pyrepr } from "./texts.js";

export type FormatValue = string | number | boolean | null;

const FIELD = /\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(![rs])?\}/g;

/** `template` with each field replaced by its value (`!r`: as Python's `repr` writes it). */
export function pyFormat(template: string, values: Readonly<Record<string, FormatValue>>): string {
  return template.replace(FIELD, (whole: string, name: string | undefined, conversion: string | undefined) => {
    if (name === undefined) return whole.charAt(0);
    if (!(name in values)) throw new Error(`template field ${whole} has no value`);
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

/** A value as Python's `repr()` writes it. */
export function pyRepr(value: FormatValue): string {
  return typeof value === "string" ? pyrepr(value) : pyStr(value);
}

const NOT_PRINTABLE = /^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u;

/** Python's `str.isprintable()` for one character: not a control, format, separator or unassigned one. */
export function isPrintable(ch: string): boolean {
  return ch === " " || !NOT_PRINTABLE.test(ch);
}

/** A JSON value as Python's `repr` writes the object `json.loads` made of it. */
export function pyReprJson(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number" || value instanceof JsonFloat) {
    const x = Number(value);
    if (Number.isNaN(x)) return "nan";
    if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
    return typeof value === "number" && Number.isInteger(x) ? String(x) : floatRepr(x);
  }
  if (typeof value === "string") return pyrepr(value);
  if (Array.isArray(value)) return "[" + value.map(pyReprJson).join(", ") + "]";
  if (isJsonObject(value)) return "{" + keysOf(value).map((k) => `${pyrepr(k)}: ${pyReprJson(value[k])}`).join(", ") + "}";
  return String(value);
}
