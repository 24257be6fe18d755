/**
 * Arguments of a strict function tool, checked against the tool's `parameters` JSON Schema.
 *
 * The check needs the optional peer dependency `ajv` (a devDependency here, so the tests have it); it is loaded
 * the first time a strict tool's call is checked, never when the package is imported, so the core keeps
 * gpt-tokenizer as its only runtime dependency. Without it the result says so (`valid` is null).
 *
 * The result is the Python package's (`bridge/arguments.py`, which runs the `jsonschema` package) byte for byte:
 * ajv decides what is wrong and where, and each error is written as jsonschema writes it (`'city' is a required
 * property`, values as Python's `repr` writes them), one error per jsonschema error (ajv's errors inside a failed
 * `anyOf`/`oneOf`/`not`/`contains` and its `if`/`propertyNames` wrappers are folded the way jsonschema reports
 * them, the extra properties of one object are one error), sorted as the Python package sorts them: by the
 * instance path, then in the order jsonschema meets the schema's keywords. The draft is the one `$schema` names
 * (2020-12 when it names none, as jsonschema's `validator_for` picks). Formats are not checked (jsonschema checks
 * none without a format checker).
 *
 * Known limits of the translation (ajv and jsonschema themselves differ there): the order of two errors at the same
 * instance path when one comes through a `$ref`; regular expressions (`pattern`, `patternProperties`) run as
 * JavaScript's; `multipleOf` with fractions, as each language's floats compute it; `unevaluatedProperties` with a
 * schema; and a schema jsonschema cannot run at all (its Python side fails; here the result is `valid: null`).
 */

import { createRequire } from "node:module";

import { isJsonObject, JsonFloat, type JsonData, type JsonObject, JsonSyntaxError, keysOf, readJson } from "../json.js";
import { pyReprJson } from "../pyformat.js";
import { compareCodePoints } from "../toolNamespace.js";

/** The texts of this module (the Python module's `MISSING` and its schema-error text). */
export const TEXTS = {
  missing: "the ajv package is not installed (npm install ajv): not checked",
  badSchema: "the tool's schema is invalid: ",
} as const;

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

// -- ajv, loaded on first use ------------------------------------------------------------------------------------

interface AjvError {
  keyword: string;
  instancePath: string;
  schemaPath: string;
  params: Record<string, unknown>;
  propertyName?: string;
  message?: string;
}
interface AjvValidate {
  (data: unknown): boolean;
  errors?: AjvError[] | null;
}
interface AjvInstance {
  compile(schema: unknown): AjvValidate;
  removeKeyword(keyword: string): AjvInstance;
  addKeyword(definition: Record<string, unknown>): AjvInstance;
}
type AjvClass = new (options: Record<string, unknown>) => AjvInstance;

const DRAFTS: readonly (readonly [string, string])[] = [
  ["draft/2019-09", "ajv/dist/2019"],
  ["draft-07", "ajv"],
  ["draft-06", "ajv"],
  ["draft-04", "ajv"],
];
const LATEST = "ajv/dist/2020";
const OPTIONS = { allErrors: true, strict: false, validateFormats: false, validateSchema: false, verbose: false };
const instances = new Map<string, AjvInstance | null>();
const compiled = new WeakMap<object, AjvValidate | Error>();

/** The ajv instance for the draft `schema` names (null: ajv is not installed). */
function ajvFor(schema: unknown): AjvInstance | null {
  const named = isJsonObject(schema) && typeof schema["$schema"] === "string" ? schema["$schema"] : "";
  const module = DRAFTS.find(([draft]) => named.includes(draft))?.[1] ?? LATEST;
  if (!instances.has(module)) {
    let instance: AjvInstance | null = null;
    try {
      const loaded = createRequire(import.meta.url)(module) as { default?: AjvClass } & AjvClass;
      instance = new (loaded.default ?? loaded)(OPTIONS);
      // ajv's own `uniqueItems` skips items of another type than `items` declares; jsonschema compares them all
      instance.removeKeyword(UNIQUE_ITEMS).addKeyword({ keyword: UNIQUE_ITEMS, type: "array", schemaType: "boolean", validate: uniqueItems });
    } catch (e) {
      if (!(e instanceof Error && (e as { code?: string }).code === "MODULE_NOT_FOUND")) throw e;
    }
    instances.set(module, instance);
  }
  return instances.get(module) ?? null;
}

const UNIQUE_ITEMS = "uniqueItems";

/** jsonschema's equality: deep, with booleans apart from numbers. */
function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => equal(x, b[i]));
  }
  if (typeof a === "object" && a !== null && typeof b === "object" && b !== null) {
    const keys = Object.keys(a);
    const other = b as Record<string, unknown>;
    return keys.length === Object.keys(other).length && keys.every((k) => k in other && equal((a as Record<string, unknown>)[k], other[k]));
  }
  return false;
}

/** `uniqueItems` as jsonschema checks it (the ajv keyword's validate function). */
function uniqueItems(flag: boolean, data: unknown[]): boolean {
  if (!flag) return true;
  for (let i = 0; i < data.length; i++) for (let j = i + 1; j < data.length; j++) if (equal(data[i], data[j])) return false;
  return true;
}

/** JSON data as plain JavaScript values for ajv (floats and big integers as numbers). */
function plain(value: unknown): unknown {
  if (value instanceof JsonFloat) return value.value;
  if (typeof value === "bigint") return Number(value);
  if (Array.isArray(value)) return value.map(plain);
  if (isJsonObject(value)) {
    const out: Record<string, unknown> = {};
    for (const key of keysOf(value)) out[key] = plain(value[key]);
    return out;
  }
  return value;
}

function validatorFor(ajv: AjvInstance, schema: object): AjvValidate | Error {
  let found = compiled.get(schema);
  if (found === undefined) {
    try {
      found = ajv.compile(plain(schema));
    } catch (e) {
      if (!(e instanceof Error)) throw e;
      found = e;
    }
    compiled.set(schema, found);
  }
  return found;
}

// -- jsonschema's words ------------------------------------------------------------------------------------------

const repr = pyReprJson;

/** A JSON pointer (ajv's, escaped with `~0`/`~1`; a schema path also URI-encoded) → its parts. */
function pointerParts(pointer: string, uri: boolean): string[] {
  const body = pointer.startsWith("#") ? pointer.slice(1) : pointer;
  if (!body) return [];
  return body
    .slice(1)
    .split("/")
    .map((part) => (uri ? decodeURIComponent(part) : part).replace(/~1/g, "/").replace(/~0/g, "~"));
}

/** A value at `parts` inside `root` (array indices as strings). */
function at(root: unknown, parts: readonly string[]): unknown {
  let node = root;
  for (const part of parts) {
    if (Array.isArray(node)) node = node[Number(part)];
    else if (isJsonObject(node)) node = node[part];
    else return undefined;
  }
  return node;
}

/** Where each step of a schema path stands among its siblings: the order jsonschema meets the keywords in. */
function schemaOrder(schema: unknown, parts: readonly string[]): number[] {
  const out: number[] = [];
  let node = schema;
  for (const part of parts) {
    if (Array.isArray(node)) {
      out.push(Number(part));
      node = node[Number(part)];
    } else if (isJsonObject(node)) {
      out.push(keysOf(node).indexOf(part));
      node = node[part];
    } else {
      out.push(-1);
    }
  }
  return out;
}

function extrasMessage(extras: readonly unknown[]): [string, string] {
  return [extras.map(repr).join(", "), extras.length === 1 ? "was" : "were"];
}

function compareLists<T>(a: readonly T[], b: readonly T[], compare: (x: T, y: T) => number): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const c = compare(a[i] as T, b[i] as T);
    if (c !== 0) return c;
  }
  return a.length - b.length;
}

interface Found {
  readonly path: string[]; // the instance path's parts
  readonly order: number[]; // the schema path's order
  readonly message: string;
}

const WRAPPERS = new Set(["if", "propertyNames"]); // ajv's errors that only wrap others jsonschema reports alone
const FOLDING = new Set(["anyOf", "oneOf", "not", "contains"]); // whose inner errors jsonschema does not report

/** ajv's errors → jsonschema's, in the Python package's order. */
function translate(ajv: AjvInstance, errors: readonly AjvError[], instance: JsonData, schema: JsonObject): Found[] {
  const folded = errors.filter((e) => FOLDING.has(e.keyword)).map((e) => e.schemaPath + "/");
  const merged = new Map<string, { error: AjvError; names: unknown[] }>(); // additional / unevaluated properties
  const out: (Found | { merge: string })[] = [];
  for (const error of errors) {
    if (WRAPPERS.has(error.keyword) || folded.some((p) => error.schemaPath.startsWith(p))) continue;
    if (error.keyword === "additionalProperties" || error.keyword === "unevaluatedProperties") {
      const key = `${error.instancePath}\u0000${error.schemaPath}`;
      const name = error.params["additionalProperty"] ?? error.params["unevaluatedProperty"];
      const entry = merged.get(key);
      if (entry === undefined) {
        merged.set(key, { error, names: [name] });
        out.push({ merge: key });
      } else entry.names.push(name);
      continue;
    }
    out.push(found(ajv, error, instance, schema, []));
  }
  const done = out.map((item) => {
    if (!("merge" in item)) return item;
    const entry = merged.get(item.merge) as { error: AjvError; names: unknown[] };
    return found(ajv, entry.error, instance, schema, entry.names);
  });
  return done
    .map((f, i) => [f, i] as const)
    .sort(([a, i], [b, j]) => compareLists(a.path, b.path, compareCodePoints) || compareLists(a.order, b.order, (x, y) => x - y) || i - j)
    .map(([f]) => f);
}

function found(ajv: AjvInstance, error: AjvError, instance: JsonData, schema: JsonObject, names: readonly unknown[]): Found {
  const path = pointerParts(error.instancePath, false);
  const schemaParts = pointerParts(error.schemaPath, true);
  const value = error.propertyName !== undefined ? error.propertyName : at(instance, path);
  const keywordValue = at(schema, schemaParts);
  const parent = at(schema, schemaParts.slice(0, -1));
  return { path, order: schemaOrder(schema, schemaParts), message: message(ajv, error, value, keywordValue, parent, names) };
}

/** How many of `items` the schema `subschema` takes (null: it cannot be compiled on its own). */
function matching(ajv: AjvInstance, subschema: unknown, items: readonly unknown[]): number | null {
  if (typeof subschema === "boolean") return subschema ? items.length : 0;
  if (typeof subschema !== "object" || subschema === null) return null;
  const validate = validatorFor(ajv, subschema);
  if (validate instanceof Error) return null;
  return items.filter((item) => validate(plain(item))).length;
}

function message(ajv: AjvInstance, error: AjvError, value: unknown, keywordValue: unknown, parent: unknown, names: readonly unknown[]): string {
  const v = repr(value);
  const limit = Number(keywordValue instanceof JsonFloat ? keywordValue.value : keywordValue);
  switch (error.keyword) {
    case "type": {
      const types = Array.isArray(keywordValue) ? keywordValue : [keywordValue];
      return `${v} is not of type ${types.map(repr).join(", ")}`;
    }
    case "enum":
      return `${v} is not one of ${repr(keywordValue)}`;
    case "const":
      return `${repr(keywordValue)} was expected`;
    case "required":
      return `${repr(error.params["missingProperty"])} is a required property`;
    case "dependentRequired":
    case "dependencies":
      return `${repr(error.params["missingProperty"])} is a dependency of ${repr(error.params["property"])}`;
    case "additionalProperties": {
      const extras = [...names].sort((a, b) => compareCodePoints(String(a), String(b)));
      const patterns = isJsonObject(parent) && isJsonObject(parent["patternProperties"]) ? keysOf(parent["patternProperties"]).sort(compareCodePoints) : null;
      if (patterns !== null) {
        return `${extras.map(repr).join(", ")} ${extras.length === 1 ? "does" : "do"} not match any of the regexes: ${patterns.map((p) => repr(p)).join(", ")}`;
      }
      const [joined, verb] = extrasMessage(extras);
      return `Additional properties are not allowed (${joined} ${verb} unexpected)`;
    }
    case "unevaluatedProperties": {
      const [joined, verb] = extrasMessage([...names].sort((a, b) => compareCodePoints(String(a), String(b))));
      return keywordValue === false
        ? `Unevaluated properties are not allowed (${joined} ${verb} unexpected)`
        : `Unevaluated properties are not valid under the given schema (${joined} ${verb} unevaluated and invalid)`;
    }
    case "unevaluatedItems": {
      const items = Array.isArray(value) ? value.slice(Number(error.params["limit"] ?? 0)) : [];
      const [joined, verb] = extrasMessage(items);
      return `Unevaluated items are not allowed (${joined} ${verb} unexpected)`;
    }
    case "minimum":
      return `${v} is less than the minimum of ${repr(keywordValue)}`;
    case "maximum":
      return `${v} is greater than the maximum of ${repr(keywordValue)}`;
    case "exclusiveMinimum":
      return `${v} is less than or equal to the minimum of ${repr(keywordValue)}`;
    case "exclusiveMaximum":
      return `${v} is greater than or equal to the maximum of ${repr(keywordValue)}`;
    case "multipleOf":
      return `${v} is not a multiple of ${repr(keywordValue)}`;
    case "minLength":
    case "minItems":
      return `${v} ${limit === 1 ? "should be non-empty" : "is too short"}`;
    case "maxLength":
    case "maxItems":
      return `${v} ${limit === 0 ? "is expected to be empty" : "is too long"}`;
    case "minProperties":
      return `${v} ${limit === 1 ? "should be non-empty" : "does not have enough properties"}`;
    case "maxProperties":
      return `${v} ${limit === 0 ? "is expected to be empty" : "has too many properties"}`;
    case "uniqueItems":
      return `${v} has non-unique elements`;
    case "pattern":
      return `${v} does not match ${repr(keywordValue)}`;
    case "anyOf":
      return `${v} is not valid under any of the given schemas`;
    case "oneOf": {
      const passing = error.params["passingSchemas"];
      if (!Array.isArray(passing) || !Array.isArray(keywordValue)) return `${v} is not valid under any of the given schemas`;
      const [first, second] = passing as number[];
      const more = [keywordValue[second ?? 0]];
      for (let i = (second ?? 0) + 1; i < keywordValue.length; i++) {
        if (matching(ajv, keywordValue[i], [value]) === 1) more.push(keywordValue[i]);
      }
      more.push(keywordValue[first ?? 0]);
      return `${v} is valid under each of ${more.map(repr).join(", ")}`;
    }
    case "not":
      return `${v} should not be valid under ${repr(keywordValue)}`;
    case "items": {
      const items = Array.isArray(value) ? value : [];
      const prefix = Number(error.params["limit"] ?? 0);
      const extra = items.length - prefix;
      const rest = extra !== 1 ? items.slice(prefix) : items[prefix];
      return `Expected at most ${prefix} ${prefix !== 1 ? "items" : "item"} but found ${extra} extra: ${repr(rest)}`;
    }
    case "contains": {
      const items = Array.isArray(value) ? value : [];
      const count = matching(ajv, keywordValue, items) ?? 0;
      const max = error.params["maxContains"];
      if (typeof max === "number" && count > max) return `Too many items match the given schema (expected at most ${max})`;
      if (count === 0) return `${v} does not contain items matching the given schema`;
      return `Too few items match the given schema (expected at least ${String(error.params["minContains"])} but only ${count} matched)`;
    }
    case "false schema":
      return `False schema does not allow ${v}`;
    default:
      return `${v}: ${error.message ?? error.keyword}`;
  }
}

/** The Python package's `_pointer`: an instance path's parts as a JSON pointer. */
function pointer(parts: readonly string[]): string {
  return parts.map((part) => "/" + part.replace(/~/g, "~0").replace(/\//g, "~1")).join("");
}

/** Validate a call's `arguments` (a JSON text) against `schema`; never throws on what the model wrote. */
export function checkArguments(argumentsText: string, schema: JsonObject): Validation {
  let value: JsonData;
  try {
    value = readJson(argumentsText);
  } catch (e) {
    if (!(e instanceof JsonSyntaxError)) throw e;
    return new Validation(false, [{ path: "", message: e.message }]);
  }
  const ajv = ajvFor(schema);
  if (ajv === null) return new Validation(null, [{ path: "", message: TEXTS.missing }]);
  const validate = validatorFor(ajv, schema);
  if (validate instanceof Error) return new Validation(null, [{ path: "", message: TEXTS.badSchema + validate.message }]);
  if (validate(plain(value))) return new Validation(true);
  const errors = translate(ajv, validate.errors ?? [], value, schema);
  return new Validation(
    errors.length === 0,
    errors.map((e) => ({ path: pointer(e.path), message: e.message })),
  );
}

