/**
 * Chat data: authors, contents, messages and conversations, in the reference's shapes and JSON form.
 *
 * The classes mirror the Python package's (and openai-harmony's): same fields (camelCase here), defaults,
 * builder methods and `toDict`/`toJson` output. `fromDict` validates like the Python models do and throws a
 * `ValidationError` naming the path and what was expected, in the Python package's words.
 */

import { loadJson } from "./jsonInput.js";
import { isJsonObject, JsonFloat, type JsonObject, keysOf, readJson, writeJson } from "./json.js";
import { fill } from "./texts.js";
import { ReasoningEffort, REASONING_EFFORT_VALUES, Role, ROLE_VALUES, spec } from "./tables.js";

/**
 * The reference's JSON form tags content items with these `type`s. They belong to the reference's API,
 * not to the Harmony format, so they are not in the spec (the Python models spell them the same way).
 */
const CONTENT_TAGS = { text: "text", system: "system_content", developer: "developer_content" } as const;

/** A path into validated data (`["tools", "functions", "tools", 0]`) and what was wrong there. */
export class ValidationError extends Error {
  override readonly name = "ValidationError";
  constructor(
    readonly loc: readonly (string | number)[],
    readonly msg: string,
  ) {
    super(`${loc.join(".")}: ${msg}`);
  }
}

/** Parse a role's value, as `Role(value)` does in Python (same error text). */
export function parseRole(value: unknown): Role {
  const found = ROLE_VALUES.find((r) => r === value);
  if (found === undefined) {
    throw new RangeError(fill(spec.ERR_UNKNOWN_ROLE, { value: typeof value === "string" ? value : String(value) }));
  }
  return found;
}

// -- validation in the Python models' words -----------------------------------------------------------------

type Loc = readonly (string | number)[];

function fail(loc: Loc, msg: string): never {
  throw new ValidationError(loc, msg);
}

function str(value: unknown, loc: Loc): string {
  if (typeof value !== "string") fail(loc, "Input should be a valid string");
  return value;
}

function optStr(value: unknown, loc: Loc): string | null {
  return value === null || value === undefined ? null : str(value, loc);
}

const TRUE_WORDS = new Set(["1", "on", "t", "true", "y", "yes"]);
const FALSE_WORDS = new Set(["0", "off", "f", "false", "n", "no"]);

function bool(value: unknown, loc: Loc): boolean {
  if (typeof value === "boolean") return value;
  if (typeof value === "number" && Number.isInteger(value)) {
    if (value === 0 || value === 1) return value === 1;
    fail(loc, "Input should be a valid boolean, unable to interpret input");
  }
  if (value instanceof JsonFloat && (value.value === 0 || value.value === 1)) return value.value === 1;
  if (typeof value === "bigint") fail(loc, "Input should be a valid boolean, unable to interpret input");
  if (typeof value === "string") {
    const word = value.toLowerCase();
    if (TRUE_WORDS.has(word)) return true;
    if (FALSE_WORDS.has(word)) return false;
    fail(loc, "Input should be a valid boolean, unable to interpret input");
  }
  return fail(loc, "Input should be a valid boolean");
}

function record(value: unknown, loc: Loc, model: string | null): JsonObject {
  if (!isJsonObject(value)) {
    fail(loc, model === null ? "Input should be a valid dictionary" : `Input should be a valid dictionary or instance of ${model}`);
  }
  return value;
}

function list(value: unknown, loc: Loc): unknown[] {
  if (!Array.isArray(value)) fail(loc, "Input should be a valid list");
  return value;
}

function required(obj: JsonObject, key: string, loc: Loc): unknown {
  if (!Object.prototype.hasOwnProperty.call(obj, key)) fail([...loc, key], "Field required");
  return obj[key];
}

function optional(obj: JsonObject, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined;
}

function effort(value: unknown, loc: Loc): ReasoningEffort {
  const found = REASONING_EFFORT_VALUES.find((e) => e === value);
  if (found === undefined) {
    const names = REASONING_EFFORT_VALUES.map((e) => `'${e}'`);
    fail(loc, `Input should be ${names.slice(0, -1).join(", ")} or ${names[names.length - 1] ?? ""}`);
  }
  return found;
}

// -- the models ----------------------------------------------------------------------------------------------

/** A message author: a role and, for tools or named participants, a name. */
export class Author {
  constructor(
    public role: Role,
    public name: string | null = null,
  ) {}

  static new(role: Role, name: string): Author {
    return new Author(role, name);
  }
}

/** Plain text. */
export class TextContent {
  constructor(public text: string) {}

  toDict(): JsonObject {
    return { type: CONTENT_TAGS.text, text: this.text };
  }
}

/** One tool of a namespace: its name, description and JSON Schema parameters. */
export class ToolDescription {
  constructor(
    public name: string,
    public description: string,
    public parameters: JsonObject | null = null,
  ) {}

  static new(name: string, description: string, parameters: JsonObject | null = null): ToolDescription {
    return new ToolDescription(name, description, parameters);
  }

  toDict(): JsonObject {
    const out: JsonObject = { name: this.name, description: this.description };
    if (this.parameters !== null) out["parameters"] = this.parameters;
    return out;
  }

  static fromDict(raw: unknown, loc: Loc = []): ToolDescription {
    const obj = record(raw, loc, "ToolDescription");
    const name = str(required(obj, "name", loc), [...loc, "name"]);
    const description = str(required(obj, "description", loc), [...loc, "description"]);
    const params = optional(obj, "parameters");
    const parameters = params === null || params === undefined ? null : record(params, [...loc, "parameters"], null);
    return new ToolDescription(name, description, parameters);
  }
}

/** The channels the model may use and whether every message must name one. */
export class ChannelConfig {
  constructor(
    public validChannels: string[],
    public channelRequired: boolean,
  ) {}

  static requireChannels(channels: readonly string[]): ChannelConfig {
    return new ChannelConfig([...channels], true);
  }

  toDict(): JsonObject {
    return { valid_channels: [...this.validChannels], channel_required: this.channelRequired };
  }

  static fromDict(raw: unknown, loc: Loc = []): ChannelConfig {
    const obj = record(raw, loc, "ChannelConfig");
    const channels = list(required(obj, "valid_channels", loc), [...loc, "valid_channels"]).map((c, i) =>
      str(c, [...loc, "valid_channels", i]),
    );
    return new ChannelConfig(channels, bool(required(obj, "channel_required", loc), [...loc, "channel_required"]));
  }
}

/** A namespace of tools (`functions`, `browser`, `python`, ...). */
export class ToolNamespaceConfig {
  constructor(
    public name: string,
    public description: string | null,
    public tools: ToolDescription[],
  ) {}

  static browser(): ToolNamespaceConfig {
    return ToolNamespaceConfig.builtin(0);
  }

  static python(): ToolNamespaceConfig {
    return ToolNamespaceConfig.builtin(1);
  }

  /** The spec's built-in namespaces, in the spec's order (browser, python). */
  private static builtin(index: number): ToolNamespaceConfig {
    const data = Object.values(spec.BUILTIN_NAMESPACES)[index];
    if (data === undefined) throw new Error(`the spec has no built-in namespace number ${index}`);
    return ToolNamespaceConfig.fromDict(readJson(JSON.stringify(data)));
  }

  toDict(): JsonObject {
    const out: JsonObject = { name: this.name };
    if (this.description !== null) out["description"] = this.description;
    out["tools"] = this.tools.map((t) => t.toDict());
    return out;
  }

  static fromDict(raw: unknown, loc: Loc = []): ToolNamespaceConfig {
    const obj = record(raw, loc, "ToolNamespaceConfig");
    const name = str(required(obj, "name", loc), [...loc, "name"]);
    const description = optStr(optional(obj, "description"), [...loc, "description"]);
    const tools = list(required(obj, "tools", loc), [...loc, "tools"]).map((t, i) =>
      ToolDescription.fromDict(t, [...loc, "tools", i]),
    );
    return new ToolNamespaceConfig(name, description, tools);
  }
}

/** `tools` with `ns` set under its name (a new map when there was none). */
function withNamespace(tools: Map<string, ToolNamespaceConfig> | null, ns: ToolNamespaceConfig): Map<string, ToolNamespaceConfig> {
  return (tools ?? new Map<string, ToolNamespaceConfig>()).set(ns.name, ns);
}

function namespacesToDict(tools: ReadonlyMap<string, ToolNamespaceConfig>): JsonObject {
  const out: JsonObject = {};
  for (const [key, ns] of tools) out[key] = ns.toDict();
  return out;
}

function namespacesFromDict(raw: unknown, loc: Loc): Map<string, ToolNamespaceConfig> | null {
  if (raw === null || raw === undefined) return null;
  const obj = record(raw, loc, null);
  const out = new Map<string, ToolNamespaceConfig>();
  for (const key of keysOf(obj)) out.set(key, ToolNamespaceConfig.fromDict(obj[key], [...loc, key]));
  return out;
}

/** The system message: identity, dates, reasoning effort, built-in tools, channels. */
export class SystemContent {
  modelIdentity: string | null = spec.SYSTEM_DEFAULT_MODEL_IDENTITY;
  reasoningEffort: ReasoningEffort | null = effort(spec.SYSTEM_DEFAULT_REASONING_EFFORT, []);
  conversationStartDate: string | null = spec.SYSTEM_DEFAULT_CONVERSATION_START_DATE;
  knowledgeCutoff: string | null = spec.SYSTEM_DEFAULT_KNOWLEDGE_CUTOFF;
  channelConfig: ChannelConfig | null = new ChannelConfig(
    [...spec.SYSTEM_DEFAULT_VALID_CHANNELS],
    spec.SYSTEM_DEFAULT_CHANNEL_REQUIRED,
  );
  tools: Map<string, ToolNamespaceConfig> | null = null;

  static new(): SystemContent {
    return new SystemContent();
  }

  withModelIdentity(modelIdentity: string): this { this.modelIdentity = modelIdentity; return this; }

  withReasoningEffort(reasoningEffort: ReasoningEffort): this { this.reasoningEffort = reasoningEffort; return this; }

  withConversationStartDate(date: string): this { this.conversationStartDate = date; return this; }

  withKnowledgeCutoff(knowledgeCutoff: string): this { this.knowledgeCutoff = knowledgeCutoff; return this; }

  withChannelConfig(channelConfig: ChannelConfig): this { this.channelConfig = channelConfig; return this; }

  withRequiredChannels(channels: readonly string[]): this { return this.withChannelConfig(ChannelConfig.requireChannels(channels)); }

  withTools(nsConfig: ToolNamespaceConfig): this { this.tools = withNamespace(this.tools, nsConfig); return this; }

  withBrowserTool(): this { return this.withTools(ToolNamespaceConfig.browser()); }

  withPythonTool(): this { return this.withTools(ToolNamespaceConfig.python()); }

  toDict(): JsonObject {
    const out: JsonObject = {};
    if (this.modelIdentity !== null) out["model_identity"] = this.modelIdentity;
    if (this.reasoningEffort !== null) out["reasoning_effort"] = this.reasoningEffort;
    if (this.conversationStartDate !== null) out["conversation_start_date"] = this.conversationStartDate;
    if (this.knowledgeCutoff !== null) out["knowledge_cutoff"] = this.knowledgeCutoff;
    if (this.channelConfig !== null) out["channel_config"] = this.channelConfig.toDict();
    if (this.tools !== null) out["tools"] = namespacesToDict(this.tools);
    out["type"] = CONTENT_TAGS.system;
    return out;
  }

  /** From the reference's JSON form (the `type` key is ignored); a missing key keeps its default. */
  static fromDict(raw: unknown, loc: Loc = []): SystemContent {
    const obj = record(raw, loc, "SystemContent");
    const out = new SystemContent();
    const has = (key: string): boolean => Object.prototype.hasOwnProperty.call(obj, key);
    if (has("model_identity")) out.modelIdentity = optStr(obj["model_identity"], [...loc, "model_identity"]);
    if (has("reasoning_effort")) {
      const value = obj["reasoning_effort"];
      out.reasoningEffort = value === null ? null : effort(value, [...loc, "reasoning_effort"]);
    }
    if (has("conversation_start_date")) {
      out.conversationStartDate = optStr(obj["conversation_start_date"], [...loc, "conversation_start_date"]);
    }
    if (has("knowledge_cutoff")) out.knowledgeCutoff = optStr(obj["knowledge_cutoff"], [...loc, "knowledge_cutoff"]);
    if (has("channel_config")) {
      const value = obj["channel_config"];
      out.channelConfig = value === null ? null : ChannelConfig.fromDict(value, [...loc, "channel_config"]);
    }
    if (has("tools")) out.tools = namespacesFromDict(obj["tools"], [...loc, "tools"]);
    return out;
  }
}

/** The developer message: instructions and function tools. */
export class DeveloperContent {
  instructions: string | null = null;
  tools: Map<string, ToolNamespaceConfig> | null = null;

  static new(): DeveloperContent {
    return new DeveloperContent();
  }

  withInstructions(instructions: string): this { this.instructions = instructions; return this; }

  withTools(nsConfig: ToolNamespaceConfig): this { this.tools = withNamespace(this.tools, nsConfig); return this; }

  withFunctionTools(tools: readonly ToolDescription[]): this {
    return this.withTools(new ToolNamespaceConfig(spec.HEADER_FUNCTION_NAMESPACE, null, [...tools]));
  }

  toDict(): JsonObject {
    const out: JsonObject = {};
    if (this.instructions !== null) out["instructions"] = this.instructions;
    if (this.tools !== null) out["tools"] = namespacesToDict(this.tools);
    out["type"] = CONTENT_TAGS.developer;
    return out;
  }

  static fromDict(raw: unknown, loc: Loc = []): DeveloperContent {
    const obj = record(raw, loc, "DeveloperContent");
    const out = new DeveloperContent();
    out.instructions = optStr(optional(obj, "instructions"), [...loc, "instructions"]);
    out.tools = namespacesFromDict(optional(obj, "tools"), [...loc, "tools"]);
    return out;
  }
}

/** What a message can hold. */
export type Content = TextContent | SystemContent | DeveloperContent;

/** The content `type`s of the reference's JSON form. */
export const CONTENT_TYPE_TAGS: readonly string[] = Object.values(CONTENT_TAGS);

/** A content item from the reference's JSON form; throws `ValidationError` (path relative to the item). */
export function contentFromDict(raw: unknown): Content {
  const kind = isJsonObject(raw) ? raw["type"] : undefined;
  if (kind === CONTENT_TAGS.text && isJsonObject(raw)) {
    return new TextContent(str(required(raw, "text", []), ["text"]));
  }
  if (kind === CONTENT_TAGS.system) return SystemContent.fromDict(raw);
  if (kind === CONTENT_TAGS.developer) return DeveloperContent.fromDict(raw);
  throw new RangeError(fill(spec.ERR_UNKNOWN_CONTENT, { raw }));
}

/** One Harmony message: author, contents, and the optional channel, recipient and content type. */
export class Message {
  constructor(
    public author: Author,
    public content: Content[] = [],
    public channel: string | null = null,
    public recipient: string | null = null,
    public contentType: string | null = null,
  ) {}

  static fromAuthorAndContent(author: Author, content: string | Content): Message {
    return new Message(author, [typeof content === "string" ? new TextContent(content) : content]);
  }

  static fromRoleAndContent(role: Role, content: string | Content): Message {
    return Message.fromAuthorAndContent(new Author(role), content);
  }

  static fromRoleAndContents(role: Role, contents: readonly Content[]): Message {
    return new Message(new Author(role), [...contents]);
  }

  addingContent(content: string | Content): this {
    this.content.push(typeof content === "string" ? new TextContent(content) : content);
    return this;
  }

  withChannel(channel: string): this { this.channel = channel; return this; }

  withRecipient(recipient: string): this { this.recipient = recipient; return this; }

  withContentType(contentType: string): this { this.contentType = contentType; return this; }

  toDict(): JsonObject {
    const out: JsonObject = {
      role: this.author.role,
      name: this.author.name,
      content: this.content.map((c) => c.toDict()),
    };
    if (this.channel !== null) out["channel"] = this.channel;
    if (this.recipient !== null) out["recipient"] = this.recipient;
    if (this.contentType !== null) out["content_type"] = this.contentType;
    return out;
  }

  toJson(): string {
    return writeJson(this.toDict());
  }

  static fromDict(data: JsonObject): Message {
    const author = new Author(parseRole(data["role"]), optStr(optional(data, "name"), ["name"]));
    let raw = data["content"];
    if (typeof raw === "string") raw = [{ type: CONTENT_TAGS.text, text: raw }];
    const contents = list(raw, ["content"]).map(contentFromDict);
    const header: (string | null)[] = [];
    for (const key of ["channel", "recipient", "content_type"]) header.push(optStr(optional(data, key), [key]));
    return new Message(author, contents, header[0] ?? null, header[1] ?? null, header[2] ?? null);
  }
}

/** An ordered list of messages. */
export class Conversation implements Iterable<Message> {
  constructor(public messages: Message[] = []) {}

  static fromMessages(messages: readonly Message[]): Conversation {
    return new Conversation([...messages]);
  }

  [Symbol.iterator](): Iterator<Message> {
    return this.messages[Symbol.iterator]();
  }

  toDict(): JsonObject {
    return { messages: this.messages.map((m) => m.toDict()) };
  }

  toJson(): string {
    return writeJson(this.toDict());
  }

  /** Read `toJson` output; JSON beyond `jsonInput`'s limits or with a lone surrogate throws `JSONInputError`. */
  static fromJson(payload: string): Conversation {
    const data = record(loadJson(payload), [], null);
    return new Conversation(list(data["messages"], ["messages"]).map((m, i) => Message.fromDict(record(m, ["messages", i], null))));
  }
}

/** Options for rendering a whole conversation. */
export class RenderConversationConfig {
  constructor(public autoDropAnalysis: boolean = spec.CONV_AUTO_DROP_ANALYSIS_DEFAULT) {}
}

/** Options for rendering one message. */
export class RenderOptions {
  constructor(public conversationHasFunctionTools = false) {}
}
