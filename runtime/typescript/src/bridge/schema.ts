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

function refName(ref: string): string {
  return ref.startsWith(DEFS) ? ref.slice(DEFS.length) : ref;
}

function resolved(schema: Schema): Schema {
  return schema.$ref !== undefined ? (SCHEMAS[refName(schema.$ref)] ?? {}) : schema;
}

/** The one `type` value a model schema takes (its tag), or null. */
function tagOf(schema: Schema): string | null {
  const prop = resolved(schema).properties?.[TAG];
  const values = prop?.enum ?? (prop !== undefined && "const" in prop ? [(prop as { const: unknown }).const] : []);
  return values.length === 1 && typeof values[0] === "string" ? values[0] : null;
}

/** A schema as ajv gets it: refs made absolute, item unions and tagged unions read by their tag. */
function prepare(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(prepare);
  if (!isJsonObject(node)) return node;
  const schema = node as unknown as Schema;
  if (schema.$ref !== undefined) {
    const name = refName(schema.$ref);
    return responses.ITEM_UNIONS[name] !== undefined ? { [ITEM_KEYWORD]: name } : { $ref: DOC + DEFS + name };
  }
  const members = schema.anyOf ?? schema.oneOf;
  if (members !== undefined && schema.discriminator !== undefined && members.every((m) => tagOf(m) !== null)) {
    const tags = members.map((m) => tagOf(m) as string);
    const branches = members.map((m, i) => ({ if: { properties: { [TAG]: { const: tags[i] } }, required: [TAG] }, then: prepare(m) }));
    return { type: "object", required: [TAG], properties: { [TAG]: { enum: tags } }, allOf: branches };
  }
  const out: Record<string, unknown> = {};
  if (schema.properties !== undefined) {
    // as the models read it: a field with a default (a one-value enum is its own) is optional, and an optional one
    // may be null
    const defaulted = (prop: Schema): boolean => "default" in prop || prop.enum?.length === 1;
    const required = (schema.required ?? []).filter((key) => !defaulted(schema.properties?.[key] ?? {}));
    const nullable = (prop: Schema): boolean => prop.type === "null" || (prop.anyOf ?? prop.oneOf ?? []).some((b) => b.type === "null");
    const props = Object.entries(schema.properties).map(([key, prop]) => {
      const open = !required.includes(key) && !nullable(prop) && Object.keys(prop).length > 0;
      return [key, open ? { anyOf: [prepare(prop), { type: "null" }] } : prepare(prop)];
    });
    Object.assign(out, { properties: Object.fromEntries(props), required });
  }
  for (const [key, value] of Object.entries(node)) {
    if (key === "properties" || key === "required") continue;
    if (key === "discriminator") continue;
    out[key === "oneOf" ? "anyOf" : key] = key === "properties" || key === "$defs" ? mapValues(value, prepare) : prepare(value);
  }
  return out;
}

function mapValues(value: unknown, f: (v: unknown) => unknown): unknown {
  return isJsonObject(value) ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, f(v)])) : value;
}

/** The model of an item union's member for `value`'s (type, role), `ExtensionItem` for vendor types, or null. */
function itemModel(unionName: string, value: unknown): string | null {
  const union = responses.ITEM_UNIONS[unionName];
  const kind = isJsonObject(value) ? (value[TAG] ?? null) : null;
  const role = isJsonObject(value) ? (value["role"] ?? null) : null;
  if (!isJsonObject(value) || (typeof kind !== "string" && kind !== null) || (typeof role !== "string" && role !== null)) return null;
  const variants = union?.variants ?? [];
  // A type with variants by role takes its role's; a role none takes is no member (not the type's role-less one).
  const byRole = variants.some((v) => v.type === kind && v.role !== null);
  const found = variants.find((v) => v.type === kind && v.role === role) ?? (role === null || !byRole ? variants.find((v) => v.type === kind && v.role === null) : undefined);
  if (found !== undefined) return found.model;
  const colon = typeof kind === "string" ? kind.indexOf(":") : -1;
  return typeof kind === "string" && colon > 0 && colon < kind.length - 1 ? EXTENSION : null; // `slug:name`
}

function itemUnion(this: unknown, unionName: string, data: unknown, _parent: unknown, cxt?: { instancePath: string }): boolean {
  const self = itemUnion as unknown as { errors?: Partial<ErrorObject>[] };
  const at = cxt?.instancePath ?? "";
  const name = itemModel(unionName, data);
  if (!isJsonObject(data)) {
    self.errors = [{ keyword: "type", instancePath: at, params: { type: "object" } }];
    return false;
  }
  if (name === EXTENSION) {
    if (EXTENSION_TYPE.test(String((data as JsonObject)[TAG]))) return true;
    self.errors = [{ keyword: "pattern", instancePath: `${at}/${TAG}`, params: { pattern: EXTENSION_TYPE.source } }];
    return false;
  }
  const check = name !== null ? validator(name) : null;
  if (check === null) self.errors = [{ keyword: ITEM_KEYWORD, instancePath: at, params: { union: unionName } }];
  else if (!check(data)) self.errors = (check.errors ?? []).map((e) => ({ ...e, instancePath: at + e.instancePath }));
  else return true;
  return false;
}

const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
ajv.addKeyword({ keyword: ITEM_KEYWORD, schemaType: "string", errors: true, validate: itemUnion });
ajv.addSchema({ $id: DOC, $defs: mapValues(SCHEMAS, prepare) } as SchemaObject);

const UNIONS = new Map<string, ValidateFunction>();

/** The compiled validator of a schema component (compiled once, on first use; an item union read by its tag). */
function validator(name: string): ValidateFunction {
  if (responses.ITEM_UNIONS[name] !== undefined) {
    if (!UNIONS.has(name)) UNIONS.set(name, ajv.compile({ [ITEM_KEYWORD]: name }));
    return UNIONS.get(name) as ValidateFunction;
  }
  const found = ajv.getSchema(DOC + DEFS + name);
  if (found === undefined) throw new Error(`no Open Responses schema named ${name}`);
  return found;
}

/** The value ajv reads: numbers as numbers (a float or a big integer of the JSON reader is a number to JSON). */
function plain(value: unknown): unknown {
  if (value instanceof JsonFloat) return value.value;
  if (typeof value === "bigint") return Number(value);
  if (Array.isArray(value)) {
    const out = value.map(plain);
    return out.some((v, i) => v !== value[i]) ? out : value;
  }
  if (!isJsonObject(value)) return value;
  let out: Record<string, unknown> | null = null;
  for (const key of keysOf(value)) {
    const v = plain(value[key]);
    if (v !== value[key]) (out ??= { ...value })[key] = v;
  }
  return out ?? value;
}

// -- models ----------------------------------------------------------------------------------------------------

export interface Field {
  readonly key: string;
  readonly type: { readonly kind: "list" | "value" };
  readonly required: boolean;
  readonly default: JsonData;
}

export interface Model {
  readonly name: string;
  readonly fields: readonly Field[];
  readonly byKey: ReadonlyMap<string, Field>;
}

const MODELS = new Map<string, Model>();

function isArrayField(prop: Schema): boolean {
  return prop.type === "array" || (prop.anyOf ?? []).some((b) => b.type === "array" && (prop.anyOf ?? []).length === 2 && (prop.anyOf ?? []).some((n) => n.type === "null"));
}

/** A model by its schema name: its fields in schema order, which are required and their defaults (a one-value
 * enum that is required is its own default). */
export function model(name: string): Model {
  let found = MODELS.get(name);
  if (found !== undefined) return found;
  const schema = SCHEMAS[name] ?? (name === EXTENSION ? { properties: { [TAG]: {} }, required: [TAG] } : undefined);
  if (schema === undefined) throw new Error(`no Open Responses schema named ${name}`);
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties ?? {}).map(([key, prop]): Field => {
    const single = required.has(key) && prop.enum?.length === 1 ? (prop.enum[0] as JsonData) : undefined;
    const fallback = "default" in prop ? (prop.default as JsonData) : (single ?? null);
    return { key, type: { kind: isArrayField(prop) ? "list" : "value" }, required: required.has(key) && !("default" in prop) && single === undefined, default: fallback };
  });
  found = { name, fields, byKey: new Map(fields.map((f) => [f.key, f])) };
  MODELS.set(name, found);
  return found;
}

function isModel(schema: Schema | undefined): boolean {
  return schema !== undefined && schema.type === "object" && schema.properties !== undefined;
}

/** The model of the streaming event whose `type` is `type`. */
export function eventModelOf(type: string): string {
  const member = (SCHEMAS["StreamingEvent"]?.anyOf ?? SCHEMAS["StreamingEvent"]?.oneOf ?? []).find((m) => tagOf(m) === type);
  if (member?.$ref === undefined) throw new Error(`no streaming event of type ${type}`);
  return refName(member.$ref);
}

/** The model of an item union's variant for (`type`, `role`), or null. */
export function itemModelOf(union: string, type: string, role: string | null = null): string | null {
  const variants = responses.ITEM_UNIONS[union]?.variants ?? [];
  const found = variants.find((v) => v.type === type && v.role === role) ?? variants.find((v) => v.type === type && v.role === null);
  return found?.model ?? null;
}

/** The members a schema node offers (through nullable unions and lists). */
function members(schema: Schema): Schema[] {
  if (schema.items !== undefined) return members(schema.items);
  const branches = schema.anyOf ?? schema.oneOf;
  return branches !== undefined ? branches.flatMap(members) : [schema];
}

/** The model that field `key` of model `name` (a list of a tagged union, or a tagged union) takes for `tagValue`. */
export function fieldMember(name: string, key: string, tagValue: string): string {
  const prop = SCHEMAS[name]?.properties?.[key];
  const member = prop !== undefined ? members(prop).find((m) => m.$ref !== undefined && tagOf(m) === tagValue) : undefined;
  if (member?.$ref === undefined) throw new Error(`${name}.${key} takes no ${tagValue}`);
  return refName(member.$ref);
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

/** The member of `branches` that `value` is: by its tag where members have one, else the first that takes it. */
function memberFor(branches: readonly Schema[], value: unknown): Schema | undefined {
  const tagged = isJsonObject(value) ? branches.find((b) => tagOf(b) !== null && tagOf(b) === value[TAG]) : undefined;
  return tagged ?? branches.find((b) => takes(b, value));
}

/** Whether a union member takes `value`: a named one by its validator, an inline one by its JSON type. */
function takes(schema: Schema, value: unknown): boolean {
  if (schema.$ref !== undefined) return validator(refName(schema.$ref))(plain(value));
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches !== undefined) return branches.some((b) => takes(b, value));
  return schema.type === "array" ? Array.isArray(value) : schema.type === "object" ? isJsonObject(value) : schema.type === undefined;
}

/** Tag the objects of a valid `value` with their models and give them their fields' defaults. */
function tagTree(schema: Schema, value: unknown): void {
  if (value === null || typeof value !== "object" || value instanceof JsonFloat) return;
  if (schema.$ref !== undefined) {
    const name = refName(schema.$ref);
    const unionModel = responses.ITEM_UNIONS[name] !== undefined ? itemModel(name, value) : null;
    const target = unionModel ?? name;
    const target_schema = SCHEMAS[target];
    if (isJsonObject(value) && (isModel(target_schema) || target === EXTENSION)) {
      make(target, value);
      for (const field of model(target).fields) if (!(field.key in value) && field.default !== null) value[field.key] = structuredClone(field.default);
    }
    if (target_schema !== undefined) tagTree(target_schema, value);
    return;
  }
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches !== undefined) {
    const member = memberFor(branches, value);
    if (member !== undefined) tagTree(member, value);
  } else if (Array.isArray(value)) {
    if (schema.items !== undefined) for (const item of value) tagTree(schema.items, item);
  } else if (isJsonObject(value)) {
    for (const [key, prop] of Object.entries(schema.properties ?? {})) if (key in value) tagTree(prop, value[key]);
    const extra = schema.additionalProperties;
    if (schema.properties === undefined && typeof extra === "object") for (const key of keysOf(value)) tagTree(extra, value[key]);
  }
}

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
  tagTree({ $ref: DEFS + name }, value);
  return value as T;
}

// -- writing -------------------------------------------------------------------------------------------------

function dumpNode(schema: Schema, value: unknown): unknown {
  if (value === null || typeof value !== "object" || value instanceof JsonFloat) return value;
  if (schema.$ref !== undefined) {
    const name = refName(schema.$ref);
    const target = responses.ITEM_UNIONS[name] !== undefined ? (modelOf(value) ?? itemModel(name, value) ?? EXTENSION) : name;
    if (isJsonObject(value) && (isModel(SCHEMAS[target]) || target === EXTENSION)) return dumpModel(target, value);
    return SCHEMAS[target] !== undefined ? dumpNode(SCHEMAS[target], value) : value;
  }
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches !== undefined) {
    const tagged = modelOf(value);
    const member = (tagged !== null ? branches.find((b) => b.$ref !== undefined && refName(b.$ref) === tagged) : undefined) ?? memberFor(branches, value);
    return member !== undefined ? dumpNode(member, value) : value;
  }
  if (Array.isArray(value)) return value.map((v) => (schema.items !== undefined ? dumpNode(schema.items, v) : v));
  if (isJsonObject(value) && typeof schema.additionalProperties === "object") {
    const extra = schema.additionalProperties;
    return Object.fromEntries(keysOf(value).map((k) => [k, dumpNode(extra, value[k])]));
  }
  return value;
}

function dumpModel(name: string, value: JsonObject): JsonObject {
  const out: Record<string, unknown> = {};
  const props = SCHEMAS[name]?.properties ?? {};
  for (const field of model(name).fields) {
    const given = Object.prototype.hasOwnProperty.call(value, field.key) ? value[field.key] : undefined;
    if (given !== undefined) out[field.key] = dumpNode(props[field.key] ?? {}, given);
    else if (field.default !== null) out[field.key] = field.default;
    else if (field.required) throw new Error(`${name}: the required field ${field.key} is missing`);
  }
  for (const key of keysOf(value)) if (!(key in props) && value[key] !== undefined) out[key] = value[key];
  return out as JsonObject;
}

/** A value of the named schema component as JSON data: its models' fields in schema order, then other keys; an
 * optional field not given is left out, a field with a default gets it. */
export function dumpAs(name: string, value: unknown): JsonData {
  return dumpNode({ $ref: DEFS + name }, value) as JsonData;
}

/** JSON data on one line, as the runtimes write events and responses: `JSON.stringify`, non-ASCII kept. */
export function compactJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (v instanceof JsonFloat ? v.value : typeof v === "bigint" ? Number(v) : v)) ?? "null";
}

/** A JSON string literal (non-ASCII kept). */
export function jsonString(text: string): string {
  return JSON.stringify(text);
}
