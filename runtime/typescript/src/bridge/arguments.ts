/**
 * Arguments of a strict function tool, checked against the tool's `parameters` JSON Schema.
 *
 * ajv decides what is wrong and where (the draft `$schema` names, 2020-12 when none; formats are not checked);
 * what is reported is the spec's (`ARGUMENT_ERRORS`, the mapping's `arguments` section, whose comment gives the
 * rule), as the Python package's `bridge/arguments.py` reports it: ajv's errors inside `anyOf`/`oneOf`/`not`/
 * `contains` and its `if`/`propertyNames` wrappers are left out, each error is the text of its keyword, sorted by
 * path and message, once.
 */

import { isDeepStrictEqual } from "node:util";

import { Ajv } from "ajv";
import { Ajv2019 } from "ajv/dist/2019.js";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";

import { recover } from "../errors.js";
import { isJsonObject, type JsonData, type JsonObject, JsonSyntaxError, readJson } from "../json.js";
import { spec } from "../tables.js";
import { fill } from "../texts.js";
import { compareCodePoints } from "../toolNamespace.js";
import { plain } from "./schema.js";

/** The text of this module that is the language's own (the Python module's `BAD_SCHEMA`). */
const BAD_SCHEMA = "the tool's schema is invalid: ";
const ERRORS = spec.ARGUMENT_ERRORS;

/** What the check found: `valid` true, false, or null (not checked); each error's JSON pointer and text. */
export class Validation {
  constructor(
    readonly valid: boolean | null,
    readonly errors: readonly { readonly path: string; readonly message: string }[] = [],
  ) {}

  toDict(): JsonObject {
    return { valid: this.valid, errors: this.errors.map((e) => ({ path: e.path, message: e.message })) };
  }
}

// -- ajv, one instance per draft ---------------------------------------------------------------------------------

type AjvClass = typeof Ajv | typeof Ajv2019 | typeof Ajv2020;
const instances = new Map<AjvClass, Ajv>();
const compiled = new WeakMap<object, ValidateFunction | Error>();

/** The ajv instance for the draft `schema` names: 2019-09, draft 4, 6 or 7 (ajv's draft-07 class reads the three),
 * or 2020-12 (when it names none of those). */
function ajvFor(schema: unknown): Ajv {
  const named = isJsonObject(schema) && typeof schema["$schema"] === "string" ? schema["$schema"] : "";
  const draft = named.includes("draft/2019-09") ? Ajv2019 : /draft-0[467]/.test(named) ? Ajv : Ajv2020;
  let instance = instances.get(draft);
  if (instance === undefined) {
    instance = new draft({ allErrors: true, strict: false, validateFormats: false, validateSchema: false, verbose: false });
    // ajv's own `uniqueItems` skips items of another type than `items` declares; jsonschema compares them all
    instance.removeKeyword(UNIQUE_ITEMS).addKeyword({ keyword: UNIQUE_ITEMS, type: "array", schemaType: "boolean", validate: uniqueItems });
    instances.set(draft, instance);
  }
  return instance;
}

const UNIQUE_ITEMS = "uniqueItems";

/** `uniqueItems` as jsonschema checks it (the ajv keyword's validate function): Node's deep strict equality keeps
 * booleans apart from numbers, as jsonschema does, and `plain` has made every -0 a 0. */
function uniqueItems(flag: boolean, data: unknown[]): boolean {
  return !flag || data.every((x, i) => !data.slice(i + 1).some((y) => isDeepStrictEqual(x, y)));
}

function validatorFor(schema: JsonObject): ValidateFunction | Error {
  let found = compiled.get(schema);
  if (found === undefined) {
    found = recover(Error, (): ValidateFunction | Error => ajvFor(schema).compile(plain(schema) as object), (e) => e);
    compiled.set(schema, found);
  }
  return found;
}

// -- the spec's texts -------------------------------------------------------------------------------------------

const WRAPPERS = new Set(["if", "propertyNames"]); // ajv's errors that only wrap others
const FOLDING = new Set(["anyOf", "oneOf", "not", "contains"]); // whose inner errors are not reported
const SAME: Readonly<Record<string, string>> = { dependencies: "dependentRequired", "false schema": "false" };
const NAMED = new Set(["required", "dependentRequired", "additionalProperties"]); // their property as `name`

/** One ajv error as the spec's text. */
function message(error: ErrorObject): string {
  const keyword = SAME[error.keyword] ?? error.keyword;
  const p = error.params;
  const text = ERRORS[keyword];
  if (text === undefined || keyword === "other") return fill(ERRORS["other"] ?? "", { keyword: error.keyword });
  return fill(text, {
    limit: p["limit"] ?? p["multipleOf"],
    expected: p["type"] ?? p["allowedValues"] ?? p["allowedValue"],
    pattern: p["pattern"],
    name: NAMED.has(keyword) ? (p["missingProperty"] ?? p["additionalProperty"]) : undefined,
    by: p["property"],
  });
}

/** Validate a call's `arguments` (a JSON text) against `schema`; never throws on what the model wrote. */
export function checkArguments(argumentsText: string, schema: JsonObject): Validation {
  const value = recover(JsonSyntaxError, (): JsonData | JsonSyntaxError => readJson(argumentsText), (e) => e);
  if (value instanceof JsonSyntaxError) return new Validation(false, [{ path: "", message: value.message }]);
  const validate = validatorFor(schema);
  if (validate instanceof Error) return new Validation(null, [{ path: "", message: BAD_SCHEMA + validate.message }]);
  if (validate(plain(value))) return new Validation(true);
  const errors = validate.errors ?? [];
  const folded = errors.filter((e) => FOLDING.has(e.keyword)).map((e) => e.schemaPath + "/");
  const kept = errors.filter((e) => !WRAPPERS.has(e.keyword) && !folded.some((p) => e.schemaPath.startsWith(p)));
  const found = kept.map((e) => ({ path: e.instancePath, message: message(e) }));
  const once = new Map(found.map((one) => [`${one.path}\u0000${one.message}`, one]));
  const sorted = [...once.values()].sort((a, b) => compareCodePoints(a.path, b.path) || compareCodePoints(a.message, b.message));
  return new Validation(errors.length === 0, sorted);
}
