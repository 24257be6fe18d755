/** Chat Completions: an Open Responses response or event stream in the `chat.completion` shapes. */

import type { ResponseResource, StreamingEvent } from "#types";

import type { JsonData, JsonObject } from "../json.js";
import { ItemKind, Role, spec } from "../tables.js";
import { Status } from "./items.js";
import { dumpAs } from "./schema.js";

const KIND = {
  message: spec.ITEM_KINDS[ItemKind.Message],
  reasoning: spec.ITEM_KINDS[ItemKind.Reasoning],
  call: spec.ITEM_KINDS[ItemKind.FunctionCall],
};
const OUTPUT_TEXT = KIND.message?.text?.["part"];
const REASONING_TEXT = KIND.reasoning?.text?.["part"];
const TEXT_DELTA = KIND.message?.text?.["delta"];
const REASONING_DELTA = KIND.reasoning?.text?.["delta"];
const ARGUMENTS_DELTA = KIND.call?.arguments?.["delta"];
const [CREATED] = spec.STREAM_OPENING;
const INCOMPLETE: string = Status.Incomplete;

function chatId(responseId: string): string {
  const prefix = spec.RESPONSE_ID_PREFIX + "_";
  return spec.CHAT_ID_PREFIX + "_" + (responseId.startsWith(prefix) ? responseId.slice(prefix.length) : responseId);
}

function finishReason(incomplete: boolean, hasCalls: boolean): string {
  if (incomplete) return spec.CHAT_FINISH_REASONS["incomplete"] ?? "";
  return (hasCalls ? spec.CHAT_FINISH_REASONS["tool_calls"] : spec.CHAT_FINISH_REASONS["stop"]) ?? "";
}

type Part = { readonly type: string; readonly text?: string };
type Item = { readonly type: string; readonly content?: readonly Part[] | null; readonly call_id?: string; readonly name?: string; readonly arguments?: string };

/** The response as a Chat Completions object: `content`, `reasoning_content`, `tool_calls`, `finish_reason`. */
export function toChatCompletion(response: ResponseResource): JsonObject {
  const content: string[] = [];
  const reasoning: string[] = [];
  const calls: JsonObject[] = [];
  for (const raw of response.output as readonly unknown[]) {
    const item = raw as Item;
    if (item.type === KIND.message?.type) {
      for (const p of item.content ?? []) if (p.type === OUTPUT_TEXT) content.push(p.text ?? "");
    } else if (item.type === KIND.reasoning?.type) {
      for (const p of item.content ?? []) if (p.type === REASONING_TEXT) reasoning.push(p.text ?? "");
    } else if (item.type === KIND.call?.type) {
      calls.push({ id: item.call_id ?? "", type: "function", function: { name: item.name ?? "", arguments: item.arguments ?? "" } });
    }
  }
  const finish = finishReason(response.status === INCOMPLETE, calls.length > 0);
  const message: JsonObject = {
    role: Role.Assistant,
    content: content.join("") || null, // empty text is no content
    reasoning_content: reasoning.join("") || null,
  };
  if (calls.length > 0) message["tool_calls"] = calls;
  const usage = response.usage ?? null;
  return {
    id: chatId(response.id),
    object: spec.CHAT_OBJECT,
    created: response.created_at,
    model: response.model,
    choices: [{ index: 0, message, finish_reason: finish }],
    usage: usage !== null ? usageOf(usage) : null,
  };
}

type AnyEvent = { readonly type: string; readonly [key: string]: unknown };
type UsageLike = NonNullable<ResponseResource["usage"]>;

function usageOf(usage: UsageLike): JsonObject {
  return {
    prompt_tokens: usage.input_tokens,
    completion_tokens: usage.output_tokens,
    total_tokens: usage.total_tokens,
    completion_tokens_details: { reasoning_tokens: usage.output_tokens_details.reasoning_tokens },
  };
}

/**
 * Open Responses events → `chat.completion.chunk` objects, as they come (`feed` may be called per event): a role
 * chunk first, `content` / `reasoning_content` / `tool_calls` deltas, a finish chunk (`stop`, `tool_calls`,
 * `length`) or, for a failed response, an `error` object (Chat Completions has no failed finish reason); with
 * `includeUsage`, `close()` gives a last chunk with `usage` and no choices.
 */
export class ChatChunks {
  private head: JsonObject = {};
  private readonly calls = new Map<string, number>();
  private usage: JsonObject | null = null;

  constructor(readonly includeUsage = false) {}

  private chunk(delta: JsonObject, finish: string | null = null): JsonObject {
    return { ...this.head, choices: [{ index: 0, delta, finish_reason: finish }] };
  }

  feed(events: Iterable<StreamingEvent>): JsonObject[] {
    const out: JsonObject[] = [];
    for (const raw of events) {
      const event = raw as unknown as AnyEvent;
      const type = event.type;
      if (type === TEXT_DELTA) out.push(this.chunk({ content: event["delta"] as string }));
      else if (type === REASONING_DELTA) out.push(this.chunk({ reasoning_content: event["delta"] as string }));
      else if (type === ARGUMENTS_DELTA) {
        const index = this.calls.get(event["item_id"] as string) ?? 0;
        out.push(this.chunk({ tool_calls: [{ index, function: { arguments: event["delta"] as string } }] }));
      } else if (type === CREATED) {
        const r = event["response"] as ResponseResource;
        this.head = { id: chatId(r.id), object: spec.CHAT_CHUNK_OBJECT, created: r.created_at, model: r.model };
        out.push(this.chunk({ role: Role.Assistant, content: "" }));
      } else if (type === spec.STREAM_ITEM_ADDED && (event["item"] as Item | null)?.type === KIND.call?.type) {
        const call = event["item"] as Item & { readonly id: string };
        const index = this.calls.size;
        this.calls.set(call.id, index);
        const fn = { name: call.name ?? "", arguments: "" };
        out.push(this.chunk({ tool_calls: [{ index, id: call.call_id ?? "", type: "function", function: fn }] }));
      } else if (type === spec.STREAM_CLOSING[Status.Completed] || type === spec.STREAM_CLOSING[INCOMPLETE]) {
        const done = event["response"] as ResponseResource;
        out.push(this.chunk({}, finishReason(done.status === INCOMPLETE, this.calls.size > 0)));
        if (done.usage !== undefined && done.usage !== null) this.usage = usageOf(done.usage);
      } else if (type === spec.STREAM_CLOSING[Status.Failed]) {
        const error = (event["response"] as ResponseResource).error ?? null;
        out.push({ ...this.head, error: error !== null ? dumpAs("Error", error) : (null as JsonData) });
      }
    }
    return out;
  }

  /** The usage chunk (`choices: []`), when it was asked for and the response finished. */
  close(): JsonObject[] {
    return this.includeUsage && this.usage !== null ? [{ ...this.head, choices: [], usage: this.usage }] : [];
  }
}

/** The event stream as Chat Completions streaming chunks (`chat.completion.chunk`). */
export function* chatCompletionChunks(events: Iterable<StreamingEvent>, includeUsage = false): Generator<JsonObject> {
  const chunks = new ChatChunks(includeUsage);
  for (const event of events) yield* chunks.feed([event]);
  yield* chunks.close();
}
