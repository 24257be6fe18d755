/**
 * Chat data: authors, contents, messages and conversations, in the reference's shapes and JSON form.
 *
 * The classes mirror the Python package's (and openai-harmony's): same fields (camelCase here), defaults,
 * builder methods and `toDict`/`toJson` output. `fromDict` validates like the Python models do and throws a
 * `ValidationError` naming the path and what was expected, in the Python package's words.
 */

import { loadJson } from "./jsonInput.js";
import { isJsonObject, type JsonData, JsonFloat, type JsonObject, keysOf, readJson, writeJson } from "./json.js";
import { fill, quoted } from "./texts.js";
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
  if (found === undefined) throw new RangeError(fill(spec.ERR_UNKNOWN_ROLE, { value: String(value) }));
  return found;
}

// -- validation in the Python models' words -----------------------------------------------------------------

type Loc = readonly (string | number)[];

/** Reads one value found at `loc`, or throws `ValidationError`. */
type Read<T> = (value: unknown, loc: Loc) => T;

/** `read`, for a value that may also be null (or absent). */
function nullable<T>(read: Read<T>): Read<T | null> {
  return (value, loc) => (value === null || value === undefined ? null : read(value, loc));
}

function listOf<T>(read: Read<T>): Read<T[]> {
  return (value, loc) => list(value, loc).map((item, i) => read(item, [...loc, i]));
}

function str(value: unknown, loc: Loc): string {
  if (typeof value !== "string") throw new ValidationError(loc, "Input should be a valid string");
  return value;
}

const optStr = nullable(str);

/** The words (and integers) pydantic's lax mode reads as true, and as false. */
const TRUE_WORDS = ["1", "on", "t", "true", "y", "yes"];
const FALSE_WORDS = ["0", "off", "f", "false", "n", "no"];

function bool(value: unknown, loc: Loc): boolean {
  if (typeof value === "boolean") return value;
  if (value instanceof JsonFloat && (value.value === 0 || value.value === 1)) return value.value === 1;
  const integral = typeof value === "bigint" || Number.isInteger(value);
  const word = typeof value === "string" ? value.toLowerCase() : integral ? String(value) : null;
  if (word === null) throw new ValidationError(loc, "Input should be a valid boolean");
  if (TRUE_WORDS.includes(word)) return true;
  if (FALSE_WORDS.includes(word)) return false;
  throw new ValidationError(loc, "Input should be a valid boolean, unable to interpret input");
}

/** An object, read as a plain dictionary or (`model`) as the model of that name. */
function dict(value: unknown, loc: Loc, model: string | null = null): JsonObject {
  const expected = model === null ? "a valid dictionary" : `a valid dictionary or instance of ${model}`;
  if (!isJsonObject(value)) throw new ValidationError(loc, `Input should be ${expected}`);
  return value;
}

function list(value: unknown, loc: Loc): unknown[] {
  if (!Array.isArray(value)) throw new ValidationError(loc, "Input should be a valid list");
  return value;
}

/** The field `key` of `obj` read by `read` at its path; "Field required" when it is not there. */
function required<T>(obj: JsonObject, loc: Loc, key: string, read: Read<T>): T {
  if (!Object.prototype.hasOwnProperty.call(obj, key)) throw new ValidationError([...loc, key], "Field required");
  return read(obj[key], [...loc, key]);
}

/** The field `key` of `obj` read by `read` at its path, or `absent` when it is not there. */
function optional<T>(obj: JsonObject, loc: Loc, key: string, read: Read<T>, absent: T): T {
  return Object.prototype.hasOwnProperty.call(obj, key) ? read(obj[key], [...loc, key]) : absent;
}

/** The object without its null fields (the JSON form leaves an unset field out). */
function present(obj: Record<string, JsonData>): JsonObject {
  return Object.fromEntries(Object.entries(obj).filter(([, value]) => value !== null));
}

function effort(value: unknown, loc: Loc): ReasoningEffort {
  const found = REASONING_EFFORT_VALUES.find((e) => e === value);
  if (found === undefined) throw new ValidationError(loc, `Input should be ${quoted(REASONING_EFFORT_VALUES)}`);
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
    return present({ name: this.name, description: this.description, parameters: this.parameters });
  }

  static fromDict(raw: unknown, loc: Loc = []): ToolDescription {
    const obj = dict(raw, loc, "ToolDescription");
    const name = required(obj, loc, "name", str);
    const description = required(obj, loc, "description", str);
    return new ToolDescription(name, description, optional(obj, loc, "parameters", nullable(dict), null));
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
    const obj = dict(raw, loc, "ChannelConfig");
    const channels = required(obj, loc, "valid_channels", listOf(str));
    return new ChannelConfig(channels, required(obj, loc, "channel_required", bool));
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
    return ToolNamespaceConfig.fromDict(readJson(JSON.stringify(Object.values(spec.BUILTIN_NAMESPACES)[index] ?? null)));
  }

  toDict(): JsonObject {
    return present({ name: this.name, description: this.description, tools: this.tools.map((t) => t.toDict()) });
  }

  static fromDict(raw: unknown, loc: Loc = []): ToolNamespaceConfig {
    const obj = dict(raw, loc, "ToolNamespaceConfig");
    const name = required(obj, loc, "name", str);
    const description = optional(obj, loc, "description", optStr, null);
    return new ToolNamespaceConfig(name, description, required(obj, loc, "tools", listOf(ToolDescription.fromDict)));
  }
}

/** `tools` with `ns` set under its name (a new map when there was none). */
function withNamespace(tools: Map<string, ToolNamespaceConfig> | null, ns: ToolNamespaceConfig): Map<string, ToolNamespaceConfig> {
  return (tools ?? new Map<string, ToolNamespaceConfig>()).set(ns.name, ns);
}

function namespacesToDict(tools: ReadonlyMap<string, ToolNamespaceConfig> | null): JsonObject | null {
  return tools === null ? null : Object.fromEntries([...tools].map(([key, ns]) => [key, ns.toDict()]));
}

function namespacesFromDict(raw: unknown, loc: Loc): Map<string, ToolNamespaceConfig> {
  const obj = dict(raw, loc);
  return new Map(keysOf(obj).map((key) => [key, ToolNamespaceConfig.fromDict(obj[key], [...loc, key])]));
}

/** The system message: identity, dates, reasoning effort, built-in tools, channels. */
export class SystemContent {
  modelIdentity: string | null = spec.SYSTEM_DEFAULT_MODEL_IDENTITY;
  reasoningEffort: ReasoningEffort | null = effort(spec.SYSTEM_DEFAULT_REASONING_EFFORT, []);
  conversationStartDate: string | null = spec.SYSTEM_DEFAULT_CONVERSATION_START_DATE;
  knowledgeCutoff: string | null = spec.SYSTEM_DEFAULT_KNOWLEDGE_CUTOFF;
  channelConfig: ChannelConfig | null = new ChannelConfig([...spec.SYSTEM_DEFAULT_VALID_CHANNELS], spec.SYSTEM_DEFAULT_CHANNEL_REQUIRED);
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
    return present({
      model_identity: this.modelIdentity,
      reasoning_effort: this.reasoningEffort,
      conversation_start_date: this.conversationStartDate,
      knowledge_cutoff: this.knowledgeCutoff,
      channel_config: this.channelConfig?.toDict() ?? null,
      tools: namespacesToDict(this.tools),
      type: CONTENT_TAGS.system,
    });
  }

  /** From the reference's JSON form (the `type` key is ignored); a missing key keeps its default. */
  static fromDict(raw: unknown, loc: Loc = []): SystemContent {
    const obj = dict(raw, loc, "SystemContent");
    const out = new SystemContent();
    out.modelIdentity = optional(obj, loc, "model_identity", optStr, out.modelIdentity);
    out.reasoningEffort = optional(obj, loc, "reasoning_effort", nullable(effort), out.reasoningEffort);
    out.conversationStartDate = optional(obj, loc, "conversation_start_date", optStr, out.conversationStartDate);
    out.knowledgeCutoff = optional(obj, loc, "knowledge_cutoff", optStr, out.knowledgeCutoff);
    out.channelConfig = optional(obj, loc, "channel_config", nullable(ChannelConfig.fromDict), out.channelConfig);
    out.tools = optional(obj, loc, "tools", nullable(namespacesFromDict), out.tools);
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
    return present({ instructions: this.instructions, tools: namespacesToDict(this.tools), type: CONTENT_TAGS.developer });
  }

  static fromDict(raw: unknown, loc: Loc = []): DeveloperContent {
    const obj = dict(raw, loc, "DeveloperContent");
    const out = new DeveloperContent();
    out.instructions = optional(obj, loc, "instructions", optStr, null);
    out.tools = optional(obj, loc, "tools", nullable(namespacesFromDict), null);
    return out;
  }
}

export type Content = TextContent | SystemContent | DeveloperContent;

export const CONTENT_TYPE_TAGS: readonly string[] = Object.values(CONTENT_TAGS);

/** A content item from the reference's JSON form; throws `ValidationError` (path relative to the item). */
export function contentFromDict(raw: unknown): Content {
  const kind = isJsonObject(raw) ? raw["type"] : undefined;
  if (kind === CONTENT_TAGS.text && isJsonObject(raw)) return new TextContent(required(raw, [], "text", str));
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

  /** The author's name is written even when null; the header's other fields only when set. */
  toDict(): JsonObject {
    const header = present({ channel: this.channel, recipient: this.recipient, content_type: this.contentType });
    return { role: this.author.role, name: this.author.name, content: this.content.map((c) => c.toDict()), ...header };
  }

  toJson(): string {
    return writeJson(this.toDict());
  }

  static fromDict(data: JsonObject): Message {
    const text = (key: string): string | null => optional(data, [], key, optStr, null);
    const author = new Author(parseRole(data["role"]), text("name"));
    let raw = data["content"];
    if (typeof raw === "string") raw = [{ type: CONTENT_TAGS.text, text: raw }];
    const contents = list(raw, ["content"]).map(contentFromDict);
    return Message.withHeader(author, contents, text);
  }

  /** A message whose channel, recipient and content type `field` reads, in that order (its errors come in it). */
  static withHeader(author: Author, contents: Content[], field: (key: string) => string | null): Message {
    const header: (string | null)[] = [];
    for (const key of ["channel", "recipient", "content_type"]) header.push(field(key));  // field names, walked (test_facts_once)
    return new Message(author, contents, header[0] ?? null, header[1] ?? null, header[2] ?? null);
  }
}

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
    const data = dict(loadJson(payload), []);
    return new Conversation(list(data["messages"], ["messages"]).map((m, i) => Message.fromDict(dict(m, ["messages", i]))));
  }
}

export class RenderConversationConfig {
  constructor(public autoDropAnalysis: boolean = spec.CONV_AUTO_DROP_ANALYSIS_DEFAULT) {}
}

export class RenderOptions {
  constructor(public conversationHasFunctionTools = false) {}
}
