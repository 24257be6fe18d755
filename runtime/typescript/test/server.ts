/**
 * A long-lived JSON Lines process for the Python side's cross-language tests: one request a line on stdin,
 * one answer a line on stdout. Requests name an operation; answers hold the result or the error text.
 *
 * - `render`: {conversation (the reference's JSON text), function, next_turn_role, auto_drop_analysis}
 * - `parse`: {tokens, role, strict} → the messages, or the error
 * - `stream`: {tokens, role, strict} → the parser's observable state after every token, then the messages
 * - `tools`: {name, tools (JSON text), description} → the namespace text
 * - `safety`: {text} → escape, unescape, JSON escape and leaks
 * - `events`: {chunks (strings, or lists of token ids), role, mode, tools, stop_after_tool_call, stop_at_turn_end
 *   (null: the parser's default), max_tool_calls}
 *   → the event parser's events as the CLI's `parse --events` writes them, or the error and the events before it
 * - `bridge`: {request (JSON text or null), pieces (text chunks and token ids), strict, reasoning_names, stopped,
 *   include_usage, and optionally role (default assistant) and tools (the declared names; default the request's)}
 *   → the SSE text from `SSEStreamer` fed piece by piece, the same from `toSse(streamResponse(...))`, the
 *   response JSON, the Chat Completions object and chunks (counting ids, created_at 0; `stopped` given to each)
 * - `arguments`: {arguments (text), schema (JSON text)} → what checking a strict tool's arguments finds
 * - `request`: {request (JSON text)} → the rendered prompt, the tool policy and the echoing snapshot, or the error
 * - `models`: → every Open Responses model's fields (key, required, default) as the runtime reads the schemas
 * - `cli`: {argv} → exit code, stdout, stderr of the CLI
 */

import { createInterface } from "node:readline";

import { main } from "../src/cli.js";
import {
  Conversation,
  detectLeak,
  escapeControlTokens,
  escapeControlTokensJson,
  HarmonyError,
  loadHarmonyEncoding,
  type Message,
  parseRole,
  RenderConversationConfig,
  renderToolNamespace,
  StreamableParser,
  unescapeControlTokens,
} from "../src/index.js";
import type { StreamingEvent } from "#types";

import { isJsonObject, type JsonObject, readJson } from "../src/json.js";
import { eventDict, type Event, HarmonyStreamParser, type Mode } from "../src/stream/index.js";
import {
  type BuilderOptions,
  buildResponse,
  chatCompletionChunks,
  checkArguments,
  countingIds,
  dumpAs,
  parseRequest,
  RequestError,
  requestToConversation,
  responseSnapshot,
  SSEStreamer,
  streamResponse,
  toChatCompletion,
  toolPolicy,
  toSse,
  type ReasoningNames,
} from "../src/bridge/index.js";
import { ReasoningSeal } from "../src/bridge/encrypted.js";
import { model } from "../src/bridge/schema.js";
import { writeJson } from "../src/json.js";
import { responses, Role } from "../src/tables.js";
import { spec } from "../src/tables.js";

const encoding = loadHarmonyEncoding(spec.ENCODING_NAME);
type Request = Record<string, unknown>;

function dicts(messages: readonly Message[]): JsonObject[] {
  return messages.map((m) => m.toDict());
}

function role(value: unknown): ReturnType<typeof parseRole> | null {
  return value === null || value === undefined ? null : parseRole(value);
}

function render(req: Request): unknown {
  const conversation = Conversation.fromJson(String(req["conversation"]));
  const drop = req["auto_drop_analysis"];
  const config = typeof drop === "boolean" ? new RenderConversationConfig(drop) : null;
  switch (req["function"]) {
    case "render_conversation_for_completion":
      return encoding.renderConversationForCompletion(conversation, parseRole(req["next_turn_role"]), config);
    case "render_conversation_for_training":
      return encoding.renderConversationForTraining(conversation, config);
    default:
      return encoding.renderConversation(conversation, config);
  }
}

function stream(req: Request): unknown {
  const parser = new StreamableParser(encoding, role(req["role"]), req["strict"] === true);
  const steps: unknown[] = [];
  for (const token of req["tokens"] as number[]) {
    try {
      parser.process(token);
    } catch (e) {
      if (!(e instanceof HarmonyError)) throw e;
      return { steps, error: e.message };
    }
    steps.push({
      state: parser.state,
      current_role: parser.currentRole,
      current_channel: parser.currentChannel,
      current_recipient: parser.currentRecipient,
      current_content_type: parser.currentContentType,
      last_content_delta: parser.lastContentDelta,
      current_content: parser.currentContent,
      messages: dicts(parser.messages),
      state_data: parser.stateData,
    });
  }
  try {
    parser.processEos();
  } catch (e) {
    if (!(e instanceof HarmonyError)) throw e;
    return { steps, eos_error: e.message };
  }
  return { steps, messages: dicts(parser.messages) };
}

function events(req: Request): unknown {
  const parser = new HarmonyStreamParser(encoding, role(req["role"]), req["mode"] as Mode, (req["tools"] as string[] | null) ?? null, {
    stopAfterToolCall: req["stop_after_tool_call"] === true,
    stopAtTurnEnd: (req["stop_at_turn_end"] ?? null) as boolean | null,
    maxToolCalls: (req["max_tool_calls"] ?? null) as number | null,
  });
  const out: Event[] = [];
  try {
    for (const chunk of req["chunks"] as (string | number[])[]) {
      out.push(...(typeof chunk === "string" ? parser.feedText(chunk) : parser.feedTokens(chunk)));
    }
    out.push(...parser.close());
  } catch (e) {
    if (!(e instanceof HarmonyError)) throw e;
    return { events: out.map(eventDict), error: e.message };
  }
  return { events: out.map(eventDict) };
}

function fixed(strict: boolean, req: Request = {}): BuilderOptions {
  const options: BuilderOptions = { ids: countingIds(), createdAt: 0, clock: () => 0, strict, inputTokens: 7 };
  const extra: { role?: ReturnType<typeof role>; tools?: string[] | null } = {};
  if ("role" in req) extra.role = role(req["role"]);
  if (Array.isArray(req["tools"])) extra.tools = req["tools"] as string[];
  return { ...options, ...extra };
}

function bridge(req: Request): unknown {
  const text = req["request"];
  const body = typeof text === "string" ? parseRequest(readJson(text)) : null;
  const pieces = req["pieces"] as (string | number)[];
  const strict = req["strict"] === true;
  const stopped = (req["stopped"] ?? null) as boolean | null;
  try {
    const streamer = new SSEStreamer(encoding, body, { ...fixed(strict, req), reasoningNames: req["reasoning_names"] as ReasoningNames });
    let sse = streamer.start();
    for (const piece of pieces) sse += typeof piece === "string" ? streamer.feedText(piece) : streamer.feed(piece);
    sse += streamer.finish(stopped);
    const stream = (): Iterable<StreamingEvent> => streamResponse(pieces as Iterable<number>, encoding, body, { ...fixed(strict, req), stopped });
    const typed = [...toSse(stream(), req["reasoning_names"] as ReasoningNames)].join("");
    const response = buildResponse(pieces as Iterable<number>, encoding, body, { ...fixed(strict, req), stopped });
    return {
      sse,
      typed,
      response: writeJson(dumpAs("ResponseResource", response), { ensureAscii: false, indent: 2 }),
      chat: writeJson(toChatCompletion(response), { ensureAscii: false, indent: 2 }),
      chunks: [...chatCompletionChunks(stream(), req["include_usage"] === true)].map((c) =>
        writeJson(c, { ensureAscii: false }),
      ),
    };
  } catch (e) {
    if (!(e instanceof HarmonyError)) throw e;
    return { error: e.message };
  }
}

function request(req: Request): unknown {
  let body;
  try {
    body = parseRequest(readJson(String(req["request"])));
  } catch (e) {
    if (e instanceof RequestError) return { error: { code: e.code, param: e.param, message: e.reason } };
    throw e;
  }
  const snapshot = dumpAs("ResponseResource", responseSnapshot(body, { responseId: "resp_x", createdAt: 0, model: "m", status: "completed", output: [] }));
  const key = req["reasoning_key"];
  const sealed = typeof key === "string" ? new ReasoningSeal(Buffer.from(key, "hex")).reader() : null;
  try {
    const conversation = requestToConversation(body, null, sealed);
    const policy = toolPolicy(body);
    return { snapshot, prompt: encoding.renderConversationForCompletion(conversation, Role.Assistant), policy: [policy.mode, [...policy.allowed]] };
  } catch (e) {
    if (e instanceof RequestError) return { snapshot, error: { code: e.code, param: e.param, message: e.reason } };
    throw e;
  }
}

function models(): unknown {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(responses.SCHEMAS)) {
    const schema = responses.SCHEMAS[name];
    if (schema?.type !== "object" || (schema.properties === undefined && schema.additionalProperties !== undefined)) continue;
    out[name] = model(name).fields.map((f) => [f.key, f.required, f.default]);
  }
  return out;
}

function cli(req: Request): unknown {
  let stdout = "";
  let stderr = "";
  let code: number;
  try {
    code = main(
      req["argv"] as string[],
      (t) => (stdout += t),
      (t) => (stderr += t),
    );
  } catch (e) {
    code = 1;
    stderr += String(e);
  }
  return { code, stdout, stderr };
}

function answer(req: Request): unknown {
  switch (req["op"]) {
    case "render":
      return { tokens: render(req) };
    case "parse":
      return { messages: dicts(encoding.parseMessagesFromCompletionTokens(req["tokens"] as number[], role(req["role"]), req["strict"] === true)) };
    case "stream":
      return stream(req);
    case "tools": {
      const tools = readJson(String(req["tools"]));
      const list = Array.isArray(tools) ? tools.filter(isJsonObject) : [];
      const description = req["description"];
      return { text: renderToolNamespace(String(req["name"]), list, typeof description === "string" ? description : null) };
    }
    case "safety": {
      const text = String(req["text"]);
      return {
        escaped: escapeControlTokens(text),
        unescaped: unescapeControlTokens(text),
        json: escapeControlTokensJson(text),
        leaks: detectLeak(text),
      };
    }
    case "events":
      return events(req);
    case "bridge":
      return bridge(req);
    case "request":
      return request(req);
    case "reasoning_seal": {
      const seal = new ReasoningSeal(Buffer.from(String(req["key"]), "hex"));
      const optional = (v: unknown): string | null => (typeof v === "string" ? v : null);
      const blob = seal.seal(String(req["text"]), optional(req["channel"]), optional(req["content_type"]));
      const opened = seal.open(typeof req["blob"] === "string" ? req["blob"] : blob);
      return { blob, opened: opened === null ? null : [opened.text, opened.channel, opened.contentType] };
    }
    case "models":
      return models();
    case "arguments": {
      const schema = readJson(String(req["schema"]));
      return checkArguments(String(req["arguments"]), isJsonObject(schema) ? schema : {}).toDict();
    }
    case "cli":
      return cli(req);
    default:
      throw new Error(`unknown op ${String(req["op"])}`);
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (line.trim() === "") continue;
  let out: unknown;
  try {
    out = answer(JSON.parse(line) as Request);
  } catch (e) {
    out = e instanceof Error ? { error: e.message, error_type: e.name } : { error: String(e), error_type: "unknown" };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
