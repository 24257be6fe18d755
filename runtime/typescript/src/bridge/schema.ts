/**
 * The Open Responses models, read from the generated schemas: ajv validates requests and events against them, and
 * `dumpAs` writes a model's JSON in schema field order (the rule the Python package's models follow too).
 *
 * Validation takes JSON as it is (no coercion: a number for a number, an integral number for an integer; the rule
 * is spec/mapping/requests.json's `validation`). Two kinds of union are read by their tag, as pydantic's tagged
 * unions are: a union with a `discriminator` takes the member its `type` names, and the item unions
 * (`responses.ITEM_UNIONS`) the member their (type, role) names, vendor-prefixed types falling back to
 * `ExtensionItem`. A validated object is tagged with its model's name (`modelOf`) and given its fields' defaults.
 */

import { Ajv2020, type ErrorObject, type SchemaObject, type ValidateFunction } from "ajv/dist/2020.js";

import { isJsonObject, JsonFloat, type JsonData, type JsonObject, keysOf } from "../json.js";
import { responses } from "../tables.js";

const EXTENSION = "ExtensionItem"; // the hand-written model of vendor-prefixed items (`_types_base.py`)
const EXTENSION_TYPE = /^[A-Za-z0-9][A-Za-z0-9_.-]*:[A-Za-z0-9_.:-]+$/u; // the `type` it takes
const DOC = "responses.json";
const DEFS = "#/$defs/";
const TAG = "type";
/** The ajv keyword an item union's place gets: its member is the one (type, role) names. */
export const ITEM_KEYWORD = "harmony-item-union";

type Schema = responses.JsonSchema;
const SCHEMAS = responses.SCHEMAS;
const UNIONS = responses.ITEM_UNIONS;

/** A `slug:name` item type (the Python package's `is_vendor_type`). */
export function isVendorType(value: unknown): boolean {
  return typeof value === "string" && /^[^:]+:[\s\S]/.test(value); // something before the first colon and after it
}

function refName(ref: string): string {
  return ref.startsWith(DEFS) ? ref.slice(DEFS.length) : ref;
}

/** The one `type` value a model schema takes (its tag), or null. */
function tagOf(schema: Schema): string | null {
  const values = (schema.$ref !== undefined ? SCHEMAS[refName(schema.$ref)] : schema)?.properties?.[TAG]?.enum ?? [];
  return values.length === 1 && typeof values[0] === "string" ? values[0] : null;
}

/** A schema as ajv gets it: refs made absolute, item unions and tagged unions read by their tag. */
function prepare(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(prepare);
  if (!isJsonObject(node)) return node;
  const schema = node as unknown as Schema;
  if (schema.$ref !== undefined) {
    const name = refName(schema.$ref);
    return UNIONS[name] !== undefined ? { [ITEM_KEYWORD]: name } : { $ref: DOC + DEFS + name };
  }
  const members = schema.anyOf ?? schema.oneOf;
  if (members !== undefined && schema.discriminator !== undefined && members.every((m) => tagOf(m) !== null)) {
    const tags = members.map((m) => tagOf(m) as string);
    const branches = members.map((m, i) => ({ if: { properties: { [TAG]: { const: tags[i] } }, required: [TAG] }, then: prepare(m) }));
    return { type: "object", required: [TAG], properties: { [TAG]: { enum: tags } }, allOf: branches };
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (key !== "discriminator" && key !== "properties") out[key === "oneOf" ? "anyOf" : key] = prepare(value);
  }
  if (schema.properties !== undefined) {
    // as the models read it: a field with a default (a one-value enum is its own) is optional, and an optional one may be null
    const defaulted = (prop: Schema): boolean => "default" in prop || prop.enum?.length === 1;
    const required = (schema.required ?? []).filter((key) => !defaulted(schema.properties?.[key] ?? {}));
    const nullable = (prop: Schema): boolean => [prop, ...(prop.anyOf ?? prop.oneOf ?? [])].some((b) => b.type === "null");
    const props = Object.entries(schema.properties).map(([key, prop]) => {
      const open = !required.includes(key) && !nullable(prop) && Object.keys(prop).length > 0;
      return [key, open ? { anyOf: [prepare(prop), { type: "null" }] } : prepare(prop)];
    });
    Object.assign(out, { properties: Object.fromEntries(props), required });
  }
  return out;
}

/** The model of an item union's member for `value`'s (type, role), `ExtensionItem` for vendor types, or null. */
function itemModel(unionName: string, value: unknown): string | null {
  const kind = isJsonObject(value) ? (value[TAG] ?? null) : undefined;
  const role = isJsonObject(value) ? (value["role"] ?? null) : undefined;
  if ((typeof kind !== "string" && kind !== null) || (typeof role !== "string" && role !== null)) return null;
  const variants = (UNIONS[unionName]?.variants ?? []).filter((v) => v.type === kind);
  // A type with variants by role takes its role's; a role none takes is no member (not the type's role-less one).
  const byRole = variants.some((v) => v.role !== null);
  const found = variants.find((v) => v.role === role) ?? (role === null || !byRole ? variants.find((v) => v.role === null) : undefined);
  return found !== undefined ? found.model : isVendorType(kind) ? EXTENSION : null;
}

function itemUnion(this: unknown, unionName: string, data: unknown, _parent: unknown, cxt?: { instancePath: string }): boolean {
  const self = itemUnion as unknown as { errors?: Partial<ErrorObject>[] };
  const at = cxt?.instancePath ?? "";
  const name = itemModel(unionName, data);
  if (!isJsonObject(data)) self.errors = [{ keyword: "type", instancePath: at, params: { type: "object" } }];
  else if (name === EXTENSION) {
    if (EXTENSION_TYPE.test(String(data[TAG]))) return true;
    self.errors = [{ keyword: "pattern", instancePath: `${at}/${TAG}`, params: { pattern: EXTENSION_TYPE.source } }];
  } else if (name === null) self.errors = [{ keyword: ITEM_KEYWORD, instancePath: at, params: { union: unionName } }];
  else {
    const check = validator(name);
    if (check(data)) return true;
    self.errors = (check.errors ?? []).map((e) => ({ ...e, instancePath: at + e.instancePath }));
  }
  return false;
}

const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
ajv.addKeyword({ keyword: ITEM_KEYWORD, schemaType: "string", errors: true, validate: itemUnion });
const defs = Object.entries(SCHEMAS).map(([name, schema]) => [name, UNIONS[name] ? { [ITEM_KEYWORD]: name } : prepare(schema)]);
ajv.addSchema({ $id: DOC, $defs: Object.fromEntries(defs) } as SchemaObject);

/** The compiled validator of a schema component (compiled once, on first use; an item union read by its tag). */
function validator(name: string): ValidateFunction {
  const found = ajv.getSchema(DOC + DEFS + name);
  if (found === undefined) throw new Error(`no Open Responses schema named ${name}`);
  return found;
}

/** JSON data as the plain JavaScript values ajv reads: a float or a big integer of the JSON reader as its number, and
 * every -0 as 0 (JSON Schema has no negative zero). */
export function plain(value: unknown): unknown {
  if (value instanceof JsonFloat || typeof value === "number") return Number(value) + 0; // -0 + 0 is 0
  if (typeof value === "bigint") return Number(value);
  if (Array.isArray(value)) return value.map(plain);
  return isJsonObject(value) ? Object.fromEntries(keysOf(value).map((key) => [key, plain(value[key])])) : value;
}

// -- models ----------------------------------------------------------------------------------------------------

export interface Field {
  readonly key: string;
  readonly type: { readonly kind: "list" | "value" };
  readonly required: boolean;
  readonly default: JsonData;
}

export type Model = { readonly fields: readonly Field[] };

/** Each model by its schema name: its fields in schema order, which are required and their defaults (a one-value
 * enum that is required is its own default). */
const MODELS: ReadonlyMap<string, Model> = new Map(
  [...Object.entries(SCHEMAS), [EXTENSION, { properties: { [TAG]: {} }, required: [TAG] } as Schema] as const].map(([name, schema]) => {
    const fields = Object.entries(schema.properties ?? {}).map(([key, prop]): Field => {
      const required = schema.required?.includes(key) === true;
      const single = required && prop.enum?.length === 1 ? (prop.enum[0] as JsonData) : undefined;
      const fallback = "default" in prop ? (prop.default as JsonData) : (single ?? null);
      const types = (prop.anyOf ?? []).map((b) => b.type); // a list, or a list or null
      const kind = prop.type === "array" || (types.length === 2 && types.includes("array") && types.includes("null")) ? "list" : "value";
      return { key, type: { kind }, required: required && !("default" in prop) && single === undefined, default: fallback };
    });
    return [name, { fields }];
  }),
);

export function model(name: string): Model {
  const found = MODELS.get(name);
  if (found === undefined) throw new Error(`no Open Responses schema named ${name}`);
  return found;
}

/** The members a schema node offers (through nullable unions and lists). */
function members(schema: Schema): Schema[] {
  if (schema.items !== undefined) return members(schema.items);
  const branches = schema.anyOf ?? schema.oneOf;
  return branches !== undefined ? branches.flatMap(members) : [schema];
}

/** The model the schema node `what` offers for `tagValue` (a tagged union, or a list of one). */
function memberNamed(what: string, schema: Schema | undefined, tagValue: string): string {
  const member = schema !== undefined ? members(schema).find((m) => m.$ref !== undefined && tagOf(m) === tagValue) : undefined;
  if (member?.$ref === undefined) throw new Error(`${what} takes no ${tagValue}`);
  return refName(member.$ref);
}

export function eventModelOf(type: string): string {
  return memberNamed("StreamingEvent", SCHEMAS["StreamingEvent"], type);
}

/** The model of an item union's variant for (`type`, `role`) (`ExtensionItem` for a vendor type), or null. */
export function itemModelOf(union: string, type: string, role: string | null = null): string | null {
  return itemModel(union, { [TAG]: type, role });
}

/** The model that field `key` of model `name` (a list of a tagged union, or a tagged union) takes for `tagValue`. */
export function fieldMember(name: string, key: string, tagValue: string): string {
  return memberNamed(`${name}.${key}`, SCHEMAS[name]?.properties?.[key], tagValue);
}

// -- model tags ----------------------------------------------------------------------------------------------

const MODEL_NAME: unique symbol = Symbol("harmony-responses.model");

/** The model a validated or made object is (its schema name), or null. */
export function modelOf(value: unknown): string | null {
  return typeof value === "object" && value !== null ? ((value as { [MODEL_NAME]?: string })[MODEL_NAME] ?? null) : null;
}

/** A constructed model object, tagged with its model's name (so unions and `modelOf` know it). */
export function make<T extends object>(name: string, value: T): T {
  Object.defineProperty(value, MODEL_NAME, { value: name, enumerable: false, configurable: true });
  return value;
}

/** The member of `branches` that `value` is: the model it is tagged with, by its tag where members have one, else
 * the first that takes it. */
function memberFor(branches: readonly Schema[], value: unknown): Schema | undefined {
  const named = branches.find((b) => b.$ref !== undefined && refName(b.$ref) === modelOf(value));
  const tag = isJsonObject(value) ? value[TAG] : undefined;
  return named ?? branches.find((b) => typeof tag === "string" && tagOf(b) === tag) ?? branches.find((b) => takes(b, value));
}

/** Whether a union member takes `value`: a named one by its validator, an inline one by its JSON type. */
function takes(schema: Schema, value: unknown): boolean {
  if (schema.$ref !== undefined) return validator(refName(schema.$ref))(plain(value));
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches !== undefined) return branches.some((b) => takes(b, value));
  return schema.type === "array" ? Array.isArray(value) : schema.type === "object" ? isJsonObject(value) : schema.type === undefined;
}

/** What a walk does at an object a model takes: `field(key)` walks the value of one of its fields. */
type AtModel = (name: string, value: JsonObject, field: (key: string) => unknown) => unknown;

/** Walk a valid `value` along `schema`, each union read as the member the value is, calling `atModel` at the objects
 * of models; arrays and maps are walked into. What it returns is the value rebuilt by `atModel`. */
function walk(schema: Schema, value: unknown, atModel: AtModel): unknown {
  if (value === null || typeof value !== "object" || value instanceof JsonFloat) return value;
  if (schema.$ref !== undefined) {
    const ref = refName(schema.$ref); // a ref to an item union takes the member the value is
    const name = UNIONS[ref] !== undefined ? (modelOf(value) ?? itemModel(ref, value) ?? EXTENSION) : ref;
    const named = SCHEMAS[name];
    const isModel = name === EXTENSION || (named?.type === "object" && named.properties !== undefined);
    if (isJsonObject(value) && isModel) return atModel(name, value, (key) => walk(named?.properties?.[key] ?? {}, value[key], atModel));
    return named !== undefined ? walk(named, value, atModel) : value;
  }
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches !== undefined) {
    const member = memberFor(branches, value);
    return member !== undefined ? walk(member, value, atModel) : value;
  }
  if (Array.isArray(value)) return value.map((v) => (schema.items !== undefined ? walk(schema.items, v, atModel) : v));
  const extra = schema.additionalProperties;
  if (!isJsonObject(value) || typeof extra !== "object") return value;
  return Object.fromEntries(keysOf(value).map((k) => [k, walk(extra, value[k], atModel)]));
}

/** Tag a model's object with its name, give it its fields' defaults, and tag the models its fields hold. */
const tag: AtModel = (name, value, field) => {
  for (const f of model(name).fields) if (!(f.key in value) && f.default !== null) value[f.key] = structuredClone(f.default);
  for (const key of Object.keys(SCHEMAS[name]?.properties ?? {})) if (key in value) field(key);
  return make(name, value);
};

/** Validation failed: ajv's errors (their `instancePath` is the data's own path). */
export class ModelValidationError extends Error {
  override readonly name = "ModelValidationError";
  constructor(
    readonly model: string,
    readonly issues: readonly ErrorObject[],
  ) {
    super(`${issues.length} validation error${issues.length === 1 ? "" : "s"} for ${model}`);
  }
}

/** Validate `value` as the named schema component; throws `ModelValidationError`. The value itself is returned,
 * its objects tagged with their models and given their defaults. */
export function validateAs<T = JsonObject>(name: string, value: unknown): T {
  const check = validator(name);
  if (!check(plain(value))) throw new ModelValidationError(name, check.errors ?? []);
  walk({ $ref: DEFS + name }, value, tag);
  return value as T;
}

// -- writing -------------------------------------------------------------------------------------------------

/** A model's object as JSON data: its fields in schema order (a default for one not given), then its other keys. */
const dump: AtModel = (name, value, field) => {
  const out: Record<string, unknown> = {};
  const props = SCHEMAS[name]?.properties ?? {};
  for (const f of model(name).fields) {
    if (Object.hasOwn(value, f.key) && value[f.key] !== undefined) out[f.key] = field(f.key);
    else if (f.default !== null) out[f.key] = f.default;
    else if (f.required) throw new Error(`${name}: the required field ${f.key} is missing`);
  }
  for (const key of keysOf(value)) if (!(key in props) && value[key] !== undefined) out[key] = value[key];
  return out;
};

/** A value of the named schema component as JSON data: its models' fields in schema order, then other keys; an
 * optional field not given is left out, a field with a default gets it. */
export function dumpAs(name: string, value: unknown): JsonData {
  return walk({ $ref: DEFS + name }, value, dump) as JsonData;
}

/** JSON data on one line, as the runtimes write events and responses: `JSON.stringify`, non-ASCII kept. */
export function compactJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (v instanceof JsonFloat ? v.value : typeof v === "bigint" ? Number(v) : v)) ?? "null";
}

/** A JSON string literal (non-ASCII kept). */
export function jsonString(text: string): string {
  return JSON.stringify(text);
}
