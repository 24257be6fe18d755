/**
 * Python's `repr` of values, for the texts of bridge/schema.ts and bridge/arguments.ts that still copy pydantic's
 * and jsonschema's wording (they go with those texts).
 */

import { floatRepr, isJsonObject, JsonFloat, keysOf } from "./json.js";
import { pyrepr } from "./texts.js";

export type FormatValue = string | number | boolean | null;

/** A value as Python's `repr()` writes it. */
export function pyRepr(value: FormatValue): string {
  if (typeof value === "string") return pyrepr(value);
  return value === null ? "None" : typeof value === "boolean" ? (value ? "True" : "False") : String(value);
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
