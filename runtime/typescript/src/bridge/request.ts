/**
 * Open Responses request → Harmony conversation, for gpt-oss: `parseRequest` checks a JSON body (the JSON limits,
 * the schema, then `checkSupported`: every field honoured or refused with a 400 naming it), `requestToConversation`
 * and `itemsToMessages` map it onto the messages the model is trained on. The rules, item by item, are the Python
 * package's `bridge/request.py` docstring; codes and messages are the spec's (spec/mapping/requests.json).
 */

import type { CreateResponseBody, ItemParamOrExtension, JsonSchemaResponseFormatParam, SpecificFunctionParam } from "#types";

import { rethrow } from "../errors.js";
import { isJsonObject, type JsonData, JsonFloat, type JsonObject, keysOf, writeJson } from "../json.js";
import { checkJsonValue, JSONInputError, MAX_SCHEMA_CHARS } from "../jsonInput.js";
import {
  Author,
  type Content,
  Conversation,
  DeveloperContent,
  Message,
  SystemContent,
  TextContent,
  ToolDescription,
  ToolNamespaceConfig,
} from "../models.js";
import { cpLength, fill, pyrepr } from "../texts.js";
import { ItemKind, REASONING_EFFORT_VALUES, type ReasoningEffort, responses, Role, spec } from "../tables.js";
import { compareCodePoints } from "../toolNamespace.js";
import { dumpAs, isVendorType, model, ModelValidationError, modelOf, validateAs } from "./schema.js";
import { type DeclaredTool, declaredTools, namespaceTools, qualified, recipient } from "./tools.js";
import { explain, found, problemPath } from "./validation.js";

const EFFORTS: ReadonlyMap<string, ReasoningEffort> = new Map(REASONING_EFFORT_VALUES.map((e) => [e.toLowerCase(), e]));
const MESSAGE_KIND = spec.ITEM_KINDS[ItemKind.Message];
/** An assistant message's phase → the channel it was written on. */
const CHANNEL_OF_PHASE: ReadonlyMap<string, string> = new Map(
  Object.entries(MESSAGE_KIND?.phases ?? {}).map(([purpose, phase]) => [phase, spec.CHANNEL_BY_PURPOSE[purpose] ?? ""]),
);
/** The vendor-prefixed call items the bridge emits; the schemas that read them and their outputs are the spec's. */
const CALL_TYPES: readonly string[] = Object.values(spec.ITEM_KINDS)
  .map((row) => row.type)
  .filter(isVendorType);

/** A value for `RequestError.of` to put in its message as it is, not shown as JSON (a reason, a list already shown). */
export class Verbatim {
  constructor(readonly text: string) {}
}

/**
 * A request the model cannot serve: an HTTP 400 with an Open Responses error body. `param` names the request field
 * (`input[2].content[0]`, `tools[1]`, `reasoning.effort`); `reason` is the message alone (Python's
 * `RequestError.message`), `message` the two together. The codes and messages are the spec's: build one with
 * `RequestError.of(handle, param, fields)`.
 */
export class RequestError extends Error {
  override readonly name = "RequestError";
  readonly status = 400;
  readonly type = spec.REQUEST_ERROR_TYPE;

  constructor(
    readonly code: string,
    readonly reason: string,
    readonly param: string | null = null,
  ) {
    super(param ? `${param}: ${reason}` : reason);
  }

  /** The spec's error `handle`, its message filled with `fields` (shown as JSON unless already text). */
  static of(handle: string, param: string | null = null, fields: Readonly<Record<string, unknown>> = {}): RequestError {
    const entry = spec.REQUEST_ERRORS[handle];
    if (entry === undefined) throw new Error(`the spec has no request error ${handle}`);
    // a value is shown as JSON, ASCII only (Python's `json.dumps(value, ensure_ascii=True)`)
    const shown = (value: unknown): string =>
      value instanceof Verbatim ? value.text : writeJson(value instanceof JsonFloat ? value.value : value, { ensureAscii: true });
    const values = Object.entries(fields).map(([key, value]) => [key, shown(value)]);
    return new RequestError(entry.code, fill(entry.message, Object.fromEntries(values)), param);
  }

  /** The HTTP 400 JSON body: `{"error": {...}}`, the error as the spec's `ErrorPayload`. */
  toBody(): JsonObject {
    return { error: dumpAs("ErrorPayload", { type: this.type, code: this.code, message: this.reason, param: this.param }) };
  }
}

// -- what the caller honours ------------------------------------------------------------------------------------

/** A spec capability's flag: `max_output_tokens` → `maxOutputTokens`. */
type Flag<Name extends string> = Name extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<Flag<Tail>>}` : Name;

/**
 * What the caller of the bridge does beyond turning the request into a prompt (the Python `Capabilities`; a
 * missing flag is false): a boolean flag for each of the spec's `capabilities` (what it does is written there),
 * camel-cased. The bridge itself honours the fields that shape the prompt or are echoed; every other field asks
 * the caller for something, and a request that asks, with the flag for it off, is refused with a 400 naming the
 * field (`checkSupported`). A value that asks for nothing (`store: false`, `temperature: 1`) is always accepted.
 */
export type Capabilities = { readonly [Name in keyof typeof spec.CAPABILITIES as Flag<Name>]?: boolean } & {
  readonly extraFields?: ReadonlySet<string>; // fields outside the spec that the caller reads itself
  // A declared tool of a type the server would have to run itself (`web_search`, `custom`, ...): `omit` (the default)
  // leaves it out of the prompt and says so in the response's `harmony:unavailable_tools`, `reject` refuses the
  // request with a 400 naming the tool (`splitTools`).
  readonly hostedTools?: "omit" | "reject";
};

/** The bridge alone: every field that asks the caller for something is refused. */
export const NOTHING_MORE: Capabilities = {};

/** Whether `capabilities` has the spec's capability `name` (`max_output_tokens`: the flag `maxOutputTokens`). */
function honoured(capabilities: Capabilities, name: string | null | undefined): boolean {
  const flag = name?.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  return flag !== undefined && capabilities[flag as keyof Capabilities] === true;
}

/** Throw the 400 for `value` of `field` when its row of the spec's `REQUEST_FIELDS` refuses it without
 * `capabilities` (a value outside the row's neutral ones asks for its capability). */
function refuse(field: string, value: unknown, capabilities: Capabilities): void {
  const row = spec.REQUEST_FIELDS[field];
  if (row?.rule !== "refused" || row.neutral.some((n) => n === value) || honoured(capabilities, row.capability)) return;
  throw RequestError.of(row.error ?? spec.REQUEST_ERROR_NOT_HONOURED, field, { value, why: new Verbatim(row.why) });
}

/** Refuse, with a 400 naming the field, whatever `body` asks that neither the bridge nor `capabilities` does: the
 * spec's fields in `REQUEST_FIELDS` order, then `include` (`INCLUDES`), then the fields outside the spec. */
export function checkSupported(body: CreateResponseBody, capabilities: Capabilities = NOTHING_MORE): void {
  const declared = new Set(model("CreateResponseBody").fields.map((f) => f.key));
  for (const field of keysOf(spec.REQUEST_FIELDS).filter((f) => declared.has(f.split(".")[0] ?? ""))) {
    // the value at the field's dotted path (null: absent), a float of the JSON reader as its number
    const value = field.split(".").reduce<unknown>((node, name) => (isJsonObject(node) ? (node[name] ?? null) : null), body);
    refuse(field, value instanceof JsonFloat ? value.value : value, capabilities);
  }
  (body.include ?? []).forEach((value, i) => {
    if (!honoured(capabilities, spec.INCLUDES[value])) throw RequestError.of(spec.REQUEST_ERROR_NOT_INCLUDABLE, `include[${i}]`, { value });
  });
  const raw = body as unknown as JsonObject;
  for (const key of keysOf(raw).filter((k) => !declared.has(k) && capabilities.extraFields?.has(k) !== true)) {
    if (spec.REQUEST_FIELDS[key] === undefined) throw RequestError.of(spec.REQUEST_ERROR_UNKNOWN_FIELD, key);
    refuse(key, raw[key], capabilities); // a label is kept
  }
}

// -- validation errors, in the request's own words -----------------------------------------------------------

const ITEM_VARIANTS = responses.ITEM_UNIONS["ItemParam"]?.variants ?? [];
/** Each input item `type` the spec defines, read from the item union. */
const ITEM_TYPES = [...new Set(ITEM_VARIANTS.flatMap((v) => (v.type !== null ? [v.type] : [])))].sort(compareCodePoints);

function rolesOf(type: unknown): string[] {
  return ITEM_VARIANTS.flatMap((v) => (v.type === type && v.role !== null ? [v.role] : [])).sort(compareCodePoints);
}

function choices(values: readonly unknown[]): string {
  return values.map((v) => writeJson(v)).join(", ");
}

/** An input item no member of the item union takes: a wrong `type`, or a wrong `role` for it. */
function explainItem(where: string, item: unknown): RequestError {
  const { role = null, type = null } = isJsonObject(item) ? item : ({} as JsonObject);
  // a role without a type is an easy input message
  const kind = type === null && typeof role === "string" ? (ITEM_TYPES.find((t) => rolesOf(t).length > 0) ?? null) : type;
  const roles = rolesOf(kind);
  const byRole = { roles: new Verbatim(choices(roles)), type: kind, found: new Verbatim(found(role)) };
  if (roles.length > 0) return RequestError.of(spec.REQUEST_ERROR_ITEM_ROLE, `${where}.role`, byRole);
  const fields = { types: new Verbatim(choices(ITEM_TYPES)), found: new Verbatim(found(kind)) };
  return RequestError.of(spec.REQUEST_ERROR_ITEM_TYPE, `${where}.type`, fields);
}

/** `value` within `jsonInput`'s limits (depth, lone surrogates, NaN), else a 400 at the place it breaks one. */
function checkLimits(value: unknown, where: string): void {
  rethrow(JSONInputError, () => checkJsonValue(value, where), (e) =>
    RequestError.of(spec.REQUEST_ERROR_INVALID, e.path || null, { reason: new Verbatim(e.reason) }),
  );
}

/** `value` validated as the named schema; a bad shape is a 400 at its place under `where`. */
function validated<T>(schemaName: string, value: unknown, where = ""): T {
  return rethrow(ModelValidationError, () => validateAs<T>(schemaName, value), (e) => {
    const problem = explain(e.issues, value);
    if (problem.union !== undefined) return explainItem(problemPath(problem, where), problem.value);
    return RequestError.of(problem.error, problemPath(problem, where) || null, { reason: new Verbatim(problem.message) });
  });
}

/** Each schema the prompt will show (none: nothing to check): within `jsonInput`'s limits and `MAX_SCHEMA_CHARS`. */
function checkSchemas(body: CreateResponseBody): void {
  const parameters = declaredTools(body).map((d): [unknown, string] => [d.tool.parameters, `${d.where}.parameters`]);
  for (const [schema, where] of [...parameters, [responseFormat(body)?.schema, "text.format.schema"] as const]) {
    if (schema === undefined || schema === null) continue;
    checkLimits(schema, where);
    const size = cpLength(writeJson(schema, { ensureAscii: false, separators: [",", ":"] }));
    if (size > MAX_SCHEMA_CHARS) throw RequestError.of(spec.REQUEST_ERROR_SCHEMA_TOO_LARGE, where, { size, limit: MAX_SCHEMA_CHARS });
  }
}

/**
 * Validate a JSON request body; the first problem becomes a `RequestError` naming its place. Before the schema,
 * the body must be within `jsonInput`'s limits (depth, lone surrogates, NaN); after it, every schema within
 * `MAX_SCHEMA_CHARS`, and every field either honoured by `capabilities` or refused (`checkSupported`).
 */
export function parseRequest(raw: unknown, capabilities: Capabilities = NOTHING_MORE): CreateResponseBody {
  if (!isJsonObject(raw)) throw RequestError.of(spec.REQUEST_ERROR_NOT_AN_OBJECT, null, { found: new Verbatim(found(raw)) });
  checkLimits(raw, "");
  const [split, unavailable] = splitTools(raw, capabilities.hostedTools ?? "omit");
  const body = validated<CreateResponseBody>("CreateResponseBody", split);
  checkSchemas(body);
  checkSupported(body, capabilities);
  if (unavailable.length > 0) (body as unknown as JsonObject)[spec.RESPONSE_UNAVAILABLE_TOOLS_FIELD] = unavailable;
  return body;
}

// The tool types a request declares that the bridge renders (function and namespace tools).
const TOOL_TYPES: ReadonlySet<unknown> = new Set(
  ["FunctionToolParam", "NamespaceToolParam"].flatMap((m) => responses.SCHEMAS[m]?.properties?.["type"]?.enum ?? []),
);

/** The body with the tools the bridge renders only, and the declared tools left out (Python's `split_tools`). */
export function splitTools(raw: JsonObject, policy: Capabilities["hostedTools"]): [JsonObject, JsonObject[]] {
  const tools = raw["tools"];
  if (!Array.isArray(tools)) return [raw, []];
  const unavailable: JsonObject[] = [];
  const kept = tools.filter((tool: unknown, i) => {
    const kind = isJsonObject(tool) ? tool["type"] : null;
    if (typeof kind !== "string" || TOOL_TYPES.has(kind)) return true;
    const reason = spec.HOSTED_TOOL_REASONS[policy === "reject" ? "refused" : "omitted"] ?? "";
    const refused = { type: kind, reason: new Verbatim(reason) };
    if (policy === "reject") throw RequestError.of(spec.REQUEST_ERROR_HOSTED_TOOL, `tools[${i}].type`, refused);
    const name = (tool as JsonObject)["name"];
    unavailable.push({ type: kind, ...(typeof name === "string" ? { name } : {}), reason });
    return false;
  });
  return unavailable.length > 0 ? [{ ...raw, tools: kept as JsonData }, unavailable] : [raw, []];
}

/** What `tool_choice` asks of the sampler: the prompt alone cannot force or forbid a call. */
export interface ToolPolicy {
  readonly mode: "none" | "auto" | "required";
  readonly allowed: readonly string[]; // the function names the model may call (all of them are in the prompt)
}

type Part = { readonly type?: string | null; readonly text?: string; readonly refusal?: string };

function textParts(item: AnyItem, where: string, accepted: readonly unknown[], key = "content"): string[] {
  const content = item[key] as string | readonly Part[];
  if (typeof content === "string") return [content];
  return content.map((part, j) => {
    const kind = part.type ?? null;
    if (!accepted.includes(kind)) throw RequestError.of(spec.REQUEST_ERROR_UNSUPPORTED_CONTENT, `${where}.${key}[${j}]`, { type: kind });
    return (kind === "refusal" ? part.refusal : part.text) ?? "";
  });
}

const TOOL_CHOICE_MODES: readonly unknown[] = responses.SCHEMAS["ToolChoiceValueEnum"]?.enum ?? [];

function toolsOf(body: CreateResponseBody): [DeclaredTool[], ToolPolicy] {
  const tools = declaredTools(body);
  const names = tools.map((t) => t.name);
  const duplicate = tools.find((t, i) => names.indexOf(t.name) !== i);
  if (duplicate !== undefined) throw RequestError.of(spec.REQUEST_ERROR_DUPLICATE_TOOL, duplicate.where, { name: duplicate.name });
  const choice = body.tool_choice ?? "auto";
  // a mode alone, one function (`{"type": "function", "name": ...}`), or a list of them with a mode
  const specific = typeof choice === "object" && modelOf(choice) === "SpecificFunctionParam" ? (choice as SpecificFunctionParam) : null;
  const listed = typeof choice === "object" && "tools" in choice ? choice : null;
  if (typeof choice === "string" ? !TOOL_CHOICE_MODES.includes(choice) : specific === null && listed === null) {
    throw RequestError.of(spec.REQUEST_ERROR_UNSUPPORTED_TOOL_CHOICE, "tool_choice", { choice: new Verbatim(pyrepr(String(choice))) });
  }
  if (choice === "required" && tools.length === 0) throw RequestError.of(spec.REQUEST_ERROR_REQUIRED_WITHOUT_TOOLS, "tool_choice");
  const allowed = (specific !== null ? [specific] : (listed?.tools ?? [])).map((ref) => ref.name);
  const unknown = allowed.findIndex((name) => !names.includes(name));
  if (unknown >= 0) {
    const where = specific !== null ? "tool_choice.name" : `tool_choice.tools[${unknown}].name`;
    throw RequestError.of(spec.REQUEST_ERROR_UNKNOWN_TOOL, where, { name: allowed[unknown] });
  }
  const mode = typeof choice === "string" ? choice : specific !== null ? "required" : (listed?.mode ?? "auto");
  const named = typeof choice === "string" ? names : names.filter((n) => allowed.includes(n));
  return mode === "none" ? [[], { mode, allowed: [] }] : [tools.filter((t) => named.includes(t.name)), { mode, allowed: named }];
}

/** The tool constraint a sampler should enforce for `body` (e.g. `required`: the first message must call). */
export function toolPolicy(body: CreateResponseBody): ToolPolicy {
  return toolsOf(body)[1];
}

function responseFormat(body: CreateResponseBody): JsonSchemaResponseFormatParam | null {
  const fmt = body.text?.format ?? null;
  return modelOf(fmt) === "JsonSchemaResponseFormatParam" ? (fmt as JsonSchemaResponseFormatParam) : null;
}

function responseFormatSection(fmt: JsonSchemaResponseFormatParam): string {
  if (!fmt.name) throw RequestError.of(spec.REQUEST_ERROR_FORMAT_NEEDS_NAME, "text.format.name");
  if (fmt.schema === undefined || fmt.schema === null) throw RequestError.of(spec.REQUEST_ERROR_FORMAT_NEEDS_SCHEMA, "text.format.schema");
  const described = fmt.description ? [fill(spec.DEV_RESPONSE_FORMAT_DESCRIPTION, { description: fmt.description })] : [];
  const schema = [...described, writeJson(fmt.schema, { ensureAscii: false, separators: [",", ":"] })].join(spec.SYS_LINE_SEPARATOR);
  const heading = fill(spec.DEV_RESPONSE_FORMAT_NAME, { name: fmt.name });
  return [spec.DEV_RESPONSE_FORMATS_HEADING, heading, schema].join(spec.SYS_SECTION_SEPARATOR);
}

/** `system` (the default system content without it) with the reasoning effort the request names, on a copy (the
 * caller keeps its own). */
function systemOf(body: CreateResponseBody, system: SystemContent | null): SystemContent {
  const base = system ?? SystemContent.new();
  const effort = body.reasoning?.effort ?? null;
  if (effort === null) return base;
  const found = EFFORTS.get(effort);
  if (found === undefined) {
    const efforts = [...EFFORTS.keys()].sort(compareCodePoints);
    throw RequestError.of(spec.REQUEST_ERROR_UNSUPPORTED_EFFORT, "reasoning.effort", { effort, efforts });
  }
  return Object.assign(Object.create(Object.getPrototypeOf(base) as object) as SystemContent, base).withReasoningEffort(found);
}

export function assistant(text: string, channel: string | null, contentType: string | null = null): Message {
  return new Message(new Author(Role.Assistant), [new TextContent(text)], channel, null, contentType);
}

type AnyItem = JsonObject & { readonly type?: string | null };

/** A call read from the items, as the message answering it needs it: its author and its channel. */
export interface ToolCall {
  readonly author: string; // the tool's name in the Harmony header (`functions.get_weather`, `browser.search`)
  readonly channel: string | null; // the call's channel, which its output takes too (null: none)
}

/** The calls read so far, for the outputs that answer them (shared across `itemsToMessages` calls, so a store can
 * replay stored items and then read the new input with the same calls known). */
export class KnownCalls {
  readonly functions = new Map<string, ToolCall>(); // a function_call's call_id → the call
  readonly tools = new Map<string, ToolCall>(); // a vendor-prefixed call item's id → the call
}

/** What a list of input items says: instructions for the developer message, and the conversation's turns. */
export interface ItemMessages {
  readonly instructions: string[]; // the text of each system or developer message, in order
  readonly messages: Message[]; // every other item as the Harmony message it stands for, in order
}

function optionalText(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}

/** The header field `key` (`harmony:channel`, `harmony:content_type`) of an input item: its value when given (null:
 * none), else `fallback`. */
function header(item: AnyItem, key: string, fallback: string | null): string | null {
  return Object.hasOwn(item, key) ? optionalText(item[key]) : fallback;
}

/** An input item at `where` read: the instructions it gives (their text), the turn it stands for, or nothing. */
type ItemReader = (item: AnyItem, where: string, calls: KnownCalls, sealed: ReasoningReader | null) => string | Message | null;

/** The tool's message answering `call`: the output item's text, on the call's channel. */
function toolMessage(call: ToolCall, output: AnyItem, where: string): Message {
  const text = textParts(output, where, ["input_text"], "output").join("");
  return new Message(Author.new(Role.Tool, call.author), [new TextContent(text)], call.channel, Role.Assistant);
}

function extension(item: AnyItem, where: string, calls: KnownCalls): Message {
  const kind = String(item["type"] ?? "");
  if (CALL_TYPES.includes(kind)) {
    const call = validated<AnyItem>(spec.INPUT_CALL_SCHEMA, item, where);
    const author = String(call["recipient"]);
    const channel = optionalText(call["channel"]);
    if (typeof call["id"] === "string") calls.tools.set(call["id"], { author, channel });
    return assistant(String(call["arguments"]), channel, optionalText(call["content_type"])).withRecipient(author);
  }
  if (kind === spec.INPUT_TOOL_OUTPUT_TYPE) {
    const output = validated<AnyItem>(spec.INPUT_TOOL_OUTPUT_SCHEMA, item, where);
    const callId = String(output["call_id"]);
    const known = calls.tools.get(callId);
    if (known === undefined) {
      const fields = { types: new Verbatim(choices(CALL_TYPES)), call_id: callId };
      throw RequestError.of(spec.REQUEST_ERROR_UNKNOWN_TOOL_CALL, `${where}.call_id`, fields);
    }
    return toolMessage(known, output, where);
  }
  // a compaction summary too: nothing here opens one
  throw RequestError.of(spec.REQUEST_ERROR_UNSUPPORTED_ITEM, `${where}.type`, { type: kind });
}

/**
 * Opens a reasoning input item's `encrypted_content` found at request path `where`: the analysis message the model
 * wrote, or a `RequestError` (`bridge/encrypted.ts`, `ReasoningSeal.reader`). Without a reader, such items are refused.
 */
export type ReasoningReader = (item: JsonObject, where: string) => Message;

const instructionsOf: ItemReader = (item, where) => textParts(item, where, ["input_text"]).join("");

/** The reader of each input item model; any other item (a vendor-prefixed `ExtensionItem`) is read by `extension`. */
const READERS: Readonly<Record<string, ItemReader>> = {
  SystemMessageItemParam: instructionsOf,
  DeveloperMessageItemParam: instructionsOf,
  UserMessageItemParam: (item, where) =>
    Message.fromRoleAndContents(Role.User, textParts(item, where, ["input_text"]).map((t) => new TextContent(t))),
  AssistantMessageItemParam: (item, where) => {
    // on its phase's channel, unless it names the channel the model wrote it on
    const texts = textParts(item, where, [MESSAGE_KIND?.text?.["part"], "refusal"]);
    const channel = header(item, spec.RESPONSE_CHANNEL_FIELD, CHANNEL_OF_PHASE.get(String(item["phase"] ?? "")) ?? spec.CHANNEL_ANSWER);
    return assistant(texts.join(""), channel, header(item, spec.RESPONSE_CONTENT_TYPE_FIELD, null));
  },
  FunctionCallItemParam: (item, _where, calls) => {
    const channel = header(item, spec.RESPONSE_CHANNEL_FIELD, spec.CHANNEL_TOOL_CALLS);
    const author = recipient(qualified(String(item["name"] ?? ""), optionalText(item[spec.RESPONSE_NAMESPACE_FIELD])));
    calls.functions.set(String(item["call_id"] ?? ""), { author, channel });
    const contentType = header(item, spec.RESPONSE_CONTENT_TYPE_FIELD, spec.SPELLING_CONSTRAIN + spec.CONTENT_TYPE_FUNCTION_ARGUMENTS);
    return assistant(String(item["arguments"] ?? ""), channel, contentType).withRecipient(author);
  },
  FunctionCallOutputItemParam: (item, where, calls) => {
    const callId = String(item["call_id"] ?? "");
    const known = calls.functions.get(callId);
    if (known === undefined) throw RequestError.of(spec.REQUEST_ERROR_UNKNOWN_CALL_ID, `${where}.call_id`, { call_id: callId });
    return toolMessage(known, item, where);
  },
  // the analysis message: the item's content (what the model wrote), else its summary; sealed reasoning
  // (`encrypted_content`) is opened by `sealed`, and refused without it
  ReasoningItemParam: (item, where, _calls, sealed) => {
    if ((item["encrypted_content"] ?? null) !== null) {
      if (sealed !== null) return sealed(item, where);
      throw RequestError.of(spec.REQUEST_ERROR_ENCRYPTED_REASONING, `${where}.encrypted_content`);
    }
    const content = item["content"];
    const written = Array.isArray(content) && content.length > 0; // what the model wrote renders even when empty
    const text = ((written ? content : item["summary"]) as Part[]).map((p) => p.text ?? "").join("");
    return written || text ? assistant(text, spec.CHANNEL_REASONING, header(item, spec.RESPONSE_CONTENT_TYPE_FIELD, null)) : null;
  },
  ItemReferenceParam: (item, where) => {
    throw RequestError.of(spec.REQUEST_ERROR_ITEM_REFERENCE_NOT_FOUND, `${where}.id`, { id: String(item["id"] ?? "") });
  },
};

/**
 * Input items → the developer instructions they give and the Harmony messages they stand for, in order. An item's
 * errors name it as `root[i]` (`input[3].call_id`). `calls` holds the calls read before these items (a store
 * replaying earlier turns passes the same `KnownCalls` to each batch); it is updated with the calls these items
 * make. Output items are input items too: validate their JSON as `ItemParam`.
 */
export function itemsToMessages(
  items: Iterable<ItemParamOrExtension>,
  root = "input",
  calls: KnownCalls = new KnownCalls(),
  sealed: ReasoningReader | null = null,
): ItemMessages {
  const read = [...items].map((item, i) =>
    (READERS[modelOf(item) ?? ""] ?? extension)(item as unknown as AnyItem, `${root}[${i}]`, calls, sealed),
  );
  return { instructions: read.filter((r) => typeof r === "string"), messages: read.filter((r) => r instanceof Message) };
}

/**
 * The Harmony conversation for `body`, ready for `renderConversationForCompletion(..., Role.Assistant)`.
 * `system` replaces the default system content (identity, dates); a reasoning effort the request names is
 * applied to it. The input items become messages as `itemsToMessages` says; `sealed` opens reasoning items that
 * carry `encrypted_content` (refused without it).
 */
export function requestToConversation(
  body: CreateResponseBody,
  system: SystemContent | null = null,
  sealed: ReasoningReader | null = null,
): Conversation {
  checkSchemas(body); // a body built in code skipped `parseRequest`
  const sysContent = systemOf(body, system);
  refuse("previous_response_id", body.previous_response_id ?? null, NOTHING_MORE); // a store's own to read
  const input = body.input ?? [];
  const items =
    typeof input === "string" ? [validateAs<ItemParamOrExtension>("UserMessageItemParam", { role: Role.User, content: input })] : input;
  const read = itemsToMessages(items, "input", new KnownCalls(), sealed);
  const instructions = [...(body.instructions ? [body.instructions] : []), ...read.instructions];
  const [tools] = toolsOf(body);
  const developer = DeveloperContent.new();
  if (instructions.length > 0) developer.withInstructions(instructions.join(spec.SYS_SECTION_SEPARATOR));
  const describe = (d: DeclaredTool): ToolDescription =>
    ToolDescription.new(d.tool.name, d.tool.description ?? "", (d.tool.parameters ?? null) as JsonObject | null);
  const functions = tools.filter((t) => t.namespace === null);
  if (functions.length > 0) developer.withFunctionTools(functions.map(describe));
  for (const namespace of namespaceTools(body)) {
    const members = tools.filter((d) => d.namespace === namespace.name);
    const config = new ToolNamespaceConfig(namespace.name, namespace.description ?? null, members.map(describe));
    if (members.length > 0) developer.withTools(config);
  }
  const contents: Content[] = instructions.length > 0 || tools.length > 0 ? [developer] : [];
  const fmt = responseFormat(body);
  // The section follows whatever the developer content renders (instructions, then tools).
  if (fmt !== null) contents.push(new TextContent((contents.length > 0 ? spec.SYS_SECTION_SEPARATOR : "") + responseFormatSection(fmt)));
  const developerMessage = contents.length > 0 ? [Message.fromRoleAndContents(Role.Developer, contents)] : [];
  return Conversation.fromMessages([Message.fromRoleAndContent(Role.System, sysContent), ...developerMessage, ...read.messages]);
}
