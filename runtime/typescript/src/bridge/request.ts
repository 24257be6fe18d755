/**
 * Open Responses request → Harmony conversation, for gpt-oss.
 *
 * `requestToConversation(body)` maps a `CreateResponseBody` onto the messages the model is trained on:
 * `instructions` and `system`/`developer` input messages become the developer message's instructions, function
 * tools its `functions` namespace, `reasoning.effort` the system message's reasoning line, `text.format`
 * (json_schema) a `# Response Formats` section closing the developer message; user and assistant messages,
 * function calls, their outputs and reasoning items become messages in order. Whatever the model cannot take
 * throws `RequestError`, a 400-style error that names the offending parameter; nothing is dropped silently.
 * Mirrors the Python package's `bridge/request.py`, error texts included.
 */

import type { CreateResponseBody, FunctionToolParam, ItemParamOrExtension, JsonSchemaResponseFormatParam } from "#types";

import { type JsonData, type JsonObject, writeJson } from "../json.js";
import { Author, type Content, Conversation, DeveloperContent, Message, SystemContent, TextContent, ToolDescription } from "../models.js";
import { pyFormat, pyRepr } from "../pyformat.js";
import { ItemKind, REASONING_EFFORT_VALUES, type ReasoningEffort, Role, spec } from "../tables.js";
import { compareCodePoints } from "../toolNamespace.js";
import { dumpAs, type Loc, make, ModelValidationError, modelOf, validateAs } from "./schema.js";

const FUNCTIONS_PREFIX = spec.HEADER_FUNCTION_NAMESPACE + spec.HEADER_NAMESPACE_SEPARATOR;
const JSON_CONTENT_TYPE = spec.SPELLING_CONSTRAIN + spec.CONTENT_TYPE_FUNCTION_ARGUMENTS;
const EFFORTS: ReadonlyMap<string, ReasoningEffort> = new Map(REASONING_EFFORT_VALUES.map((e) => [e.toLowerCase(), e]));
const MESSAGE_KIND = spec.ITEM_KINDS[ItemKind.Message];
const OUTPUT_TEXT = MESSAGE_KIND?.text?.["part"] ?? "";
/** An assistant message's phase → the channel it was written on. */
const CHANNEL_OF_PHASE: ReadonlyMap<string, string> = new Map(
  Object.entries(MESSAGE_KIND?.phases ?? {}).map(([purpose, phase]) => [phase, spec.CHANNEL_BY_PURPOSE[purpose] ?? ""]),
);

/** A request the model cannot serve: an HTTP 400 with an Open Responses error body.
 * `param` names the request field (`input[2].content[0]`, `tools[1]`, `reasoning.effort`); `reason` is the
 * message alone (Python's `RequestError.message`), `message` the two together. */
export class RequestError extends Error {
  override readonly name = "RequestError";
  readonly status = 400;
  readonly type = "invalid_request_error";

  constructor(
    readonly code: string,
    readonly reason: string,
    readonly param: string | null = null,
  ) {
    super(param ? `${param}: ${reason}` : reason);
  }

  /** The error as the spec's `ErrorPayload` (the `error` of an error event or response body). */
  toPayload(): JsonObject {
    return make("ErrorPayload", { type: this.type, code: this.code, message: this.reason, param: this.param });
  }

  /** The HTTP 400 JSON body: `{"error": {...}}`. */
  toBody(): JsonObject {
    return { error: dumpAs("ErrorPayload", this.toPayload()) };
  }
}

function isUpper(ch: string): boolean {
  return ch !== ch.toLowerCase() && ch === ch.toUpperCase();
}

function locText(loc: Loc): string {
  let out = "";
  for (const part of loc) {
    if (typeof part === "number") out += `[${part}]`;
    else if (part && isUpper(part[0] ?? "")) continue; // a union member's tag, not a key of the request
    else out += out ? `.${part}` : part;
  }
  return out;
}

/** Validate a JSON request body; the first problem becomes a `RequestError` naming its place. */
export function parseRequest(raw: unknown): CreateResponseBody {
  try {
    return validateAs<CreateResponseBody>("CreateResponseBody", raw);
  } catch (e) {
    if (!(e instanceof ModelValidationError)) throw e;
    // A wrong `type` (an unknown tool or item kind) explains the other errors of its object.
    const first = e.issues.find((i) => i.loc.length > 0 && i.loc[i.loc.length - 1] === "type") ?? e.issues[0];
    throw new RequestError("invalid_request", first?.msg ?? "", locText(first?.loc ?? []) || null);
  }
}

/** What `tool_choice` asks of the sampler: the prompt alone cannot force or forbid a call. */
export interface ToolPolicy {
  readonly mode: "none" | "auto" | "required";
  readonly allowed: readonly string[]; // the function names the model may call (all of them are in the prompt)
}

type Part = { readonly type?: string | null; readonly text?: string; readonly refusal?: string };

function textParts(content: string | readonly Part[], where: string, accepted: readonly string[], key = "content"): string[] {
  if (typeof content === "string") return [content];
  return content.map((part, j) => {
    const kind = part.type ?? null;
    if (kind === null || !accepted.includes(kind)) {
      throw new RequestError("unsupported_content", `content of type ${pyRepr(kind)} is not supported: gpt-oss reads text only`, `${where}.${key}[${j}]`);
    }
    return (kind === "refusal" ? part.refusal : part.text) ?? "";
  });
}

function inputItems(body: CreateResponseBody): ItemParamOrExtension[] {
  if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
    throw new RequestError("previous_response_not_found", "responses are not stored here: send the whole conversation as input", "previous_response_id");
  }
  const input = body.input;
  if (input === undefined || input === null) return [];
  if (typeof input === "string") return [validateAs<ItemParamOrExtension>("UserMessageItemParam", { content: input })];
  return [...input];
}

function toolsOf(body: CreateResponseBody): [FunctionToolParam[], ToolPolicy] {
  const tools = [...(body.tools ?? [])];
  const names = tools.map((t) => t.name);
  names.forEach((name, i) => {
    if (names.indexOf(name) !== i) throw new RequestError("duplicate_tool", `function ${pyRepr(name)} is declared twice`, `tools[${i}]`);
  });
  const choice = body.tool_choice ?? null;
  if (choice === null || choice === "auto") return [tools, { mode: "auto", allowed: names }];
  if (choice === "none") return [[], { mode: "none", allowed: [] }];
  if (choice === "required") {
    if (tools.length === 0) throw new RequestError("invalid_tool_choice", "tool_choice is 'required' but no tools are given", "tool_choice");
    return [tools, { mode: "required", allowed: names }];
  }
  if (typeof choice === "object" && modelOf(choice) === "SpecificFunctionParam" && "name" in choice) {
    if (!names.includes(choice.name)) throw new RequestError("invalid_tool_choice", `no function named ${pyRepr(choice.name)} in tools`, "tool_choice.name");
    return [tools.filter((t) => t.name === choice.name), { mode: "required", allowed: [choice.name] }];
  }
  if (typeof choice === "object" && "tools" in choice) {
    const allowed: string[] = [];
    choice.tools.forEach((ref, k) => {
      if (!names.includes(ref.name)) {
        throw new RequestError("invalid_tool_choice", `no function named ${pyRepr(ref.name)} in tools`, `tool_choice.tools[${k}].name`);
      }
      allowed.push(ref.name);
    });
    const mode = choice.mode ?? "auto";
    const kept = mode === "none" ? [] : tools.filter((t) => allowed.includes(t.name));
    return [kept, { mode, allowed: mode === "none" ? [] : names.filter((n) => allowed.includes(n)) }];
  }
  throw new RequestError("invalid_tool_choice", `unsupported tool_choice ${pyRepr(String(choice))}`, "tool_choice");
}

/** The tool constraint a sampler should enforce for `body` (e.g. `required`: the first message must call). */
export function toolPolicy(body: CreateResponseBody): ToolPolicy {
  return toolsOf(body)[1];
}

function responseFormatSection(fmt: JsonSchemaResponseFormatParam): string {
  if (!fmt.name) throw new RequestError("missing_required_parameter", "a json_schema format needs a name", "text.format.name");
  if (fmt.schema === undefined || fmt.schema === null) {
    throw new RequestError("missing_required_parameter", "a json_schema format needs a schema", "text.format.schema");
  }
  const lines = [spec.DEV_RESPONSE_FORMATS_HEADING, pyFormat(spec.DEV_RESPONSE_FORMAT_NAME, { name: fmt.name })];
  const head = fmt.description ? pyFormat(spec.DEV_RESPONSE_FORMAT_DESCRIPTION, { description: fmt.description }) + spec.SYS_LINE_SEPARATOR : "";
  lines.push(head + writeJson(fmt.schema, { ensureAscii: false, separators: [",", ":"] }));
  return lines.join(spec.SYS_SECTION_SEPARATOR);
}

function systemOf(body: CreateResponseBody): SystemContent {
  const system = SystemContent.new();
  const effort = body.reasoning?.effort ?? null;
  if (effort !== null) {
    const found = EFFORTS.get(effort);
    if (found === undefined) {
      const choices = [...EFFORTS.keys()].sort(compareCodePoints).map((e) => pyRepr(e));
      throw new RequestError(
        "unsupported_reasoning_effort",
        `reasoning effort ${pyRepr(effort)} is not supported by gpt-oss: use one of [${choices.join(", ")}]`,
        "reasoning.effort",
      );
    }
    system.withReasoningEffort(found);
  }
  return system;
}

function assistant(text: string, channel: string): Message {
  return Message.fromRoleAndContent(Role.Assistant, text).withChannel(channel);
}

type AnyItem = JsonObject & { readonly type?: string | null };

/**
 * The Harmony conversation for `body`, ready for `renderConversationForCompletion(..., Role.Assistant)`.
 * `system` replaces the default system content (identity, dates); a reasoning effort the request names is
 * applied to it.
 */
export function requestToConversation(body: CreateResponseBody, system: SystemContent | null = null): Conversation {
  let sysContent = systemOf(body);
  if (system !== null) {
    const requested = body.reasoning?.effort !== undefined && body.reasoning?.effort !== null;
    if (requested) {
      const copy = Object.assign(Object.create(Object.getPrototypeOf(system) as object) as SystemContent, system);
      copy.reasoningEffort = sysContent.reasoningEffort;
      sysContent = copy;
    } else sysContent = system;
  }
  const instructions: string[] = body.instructions ? [body.instructions] : [];
  const turns: Message[] = [];
  const callNames = new Map<string, string>();
  inputItems(body).forEach((raw, i) => {
    const item = raw as unknown as AnyItem;
    const where = `input[${i}]`;
    const str = (key: string): string => String(item[key] ?? "");
    const content = item["content"] as string | Part[];
    switch (modelOf(item)) {
      case "SystemMessageItemParam":
      case "DeveloperMessageItemParam":
        instructions.push(textParts(content, where, ["input_text"]).join(""));
        break;
      case "UserMessageItemParam": {
        const texts = textParts(content, where, ["input_text"]);
        turns.push(Message.fromRoleAndContents(Role.User, texts.map((t) => new TextContent(t))));
        break;
      }
      case "AssistantMessageItemParam": {
        const texts = textParts(content, where, [OUTPUT_TEXT, "refusal"]);
        turns.push(assistant(texts.join(""), CHANNEL_OF_PHASE.get(str("phase")) ?? spec.CHANNEL_ANSWER));
        break;
      }
      case "FunctionCallItemParam":
        callNames.set(str("call_id"), str("name"));
        turns.push(
          assistant(str("arguments"), spec.CHANNEL_TOOL_CALLS)
            .withRecipient(FUNCTIONS_PREFIX + str("name"))
            .withContentType(JSON_CONTENT_TYPE),
        );
        break;
      case "FunctionCallOutputItemParam": {
        const name = callNames.get(str("call_id"));
        if (name === undefined) {
          throw new RequestError("unknown_call_id", `no earlier function_call item has call_id ${pyRepr(str("call_id"))}`, `${where}.call_id`);
        }
        const output = textParts(item["output"] as string | Part[], where, ["input_text"], "output");
        turns.push(
          Message.fromAuthorAndContent(Author.new(Role.Tool, FUNCTIONS_PREFIX + name), output.join(""))
            .withRecipient(Role.Assistant)
            .withChannel(spec.CHANNEL_TOOL_CALLS),
        );
        break;
      }
      case "ReasoningItemParam": {
        if (item["encrypted_content"] !== undefined && item["encrypted_content"] !== null) {
          throw new RequestError("unsupported_parameter", "encrypted reasoning cannot be read here", `${where}.encrypted_content`);
        }
        const text = (item["summary"] as Part[]).map((p) => p.text ?? "").join("");
        if (text) turns.push(assistant(text, spec.CHANNEL_REASONING));
        break;
      }
      case "ItemReferenceParam":
        throw new RequestError("item_reference_not_found", `item ${pyRepr(str("id"))} cannot be referenced: items are not stored here`, `${where}.id`);
      case "CompactionSummaryItemParam":
        throw new RequestError("unsupported_item", "compaction items are not supported by gpt-oss", `${where}.type`);
      default:
        throw new RequestError("unsupported_item", `item type ${pyRepr(str("type"))} is not supported`, `${where}.type`);
    }
  });
  const [tools] = toolsOf(body);
  const developer = DeveloperContent.new();
  if (instructions.length > 0) developer.withInstructions(instructions.join(spec.SYS_SECTION_SEPARATOR));
  if (tools.length > 0) {
    developer.withFunctionTools(
      tools.map((t) => ToolDescription.new(t.name, t.description ?? "", t.parameters !== undefined && t.parameters !== null ? (t.parameters as JsonObject) : null)),
    );
  }
  const contents: Content[] = instructions.length > 0 || tools.length > 0 ? [developer] : [];
  const fmt = body.text?.format ?? null;
  if (fmt !== null && modelOf(fmt) === "JsonSchemaResponseFormatParam") {
    // The section follows whatever the developer content renders (instructions, then tools).
    const separator = contents.length > 0 ? spec.SYS_SECTION_SEPARATOR : "";
    contents.push(new TextContent(separator + responseFormatSection(fmt as JsonSchemaResponseFormatParam)));
  }
  const messages = [Message.fromRoleAndContent(Role.System, sysContent)];
  if (contents.length > 0) messages.push(Message.fromRoleAndContents(Role.Developer, contents));
  return Conversation.fromMessages([...messages, ...turns]);
}

export type { JsonData };
