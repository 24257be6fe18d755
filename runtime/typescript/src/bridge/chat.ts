/** Chat Completions: an Open Responses response or event stream in the `chat.completion` shapes. */

import type { ResponseResource, StreamingEvent } from "#types";

import type { JsonData, JsonObject } from "../json.js";
import { ItemKind, Role, spec } from "../tables.js";
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
const INCOMPLETE = "incomplete"; // the status of a response cut short

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
    content: content.length > 0 ? content.join("") : null,
    reasoning_content: reasoning.length > 0 ? reasoning.join("") : null,
  };
  if (calls.length > 0) message["tool_calls"] = calls;
  const usage = response.usage ?? null;
  return {
    id: chatId(response.id),
    object: spec.CHAT_OBJECT,
    created: response.created_at,
    model: response.model,
    choices: [{ index: 0, message, finish_reason: finish }],
    usage:
      usage !== null
        ? {
            prompt_tokens: usage.input_tokens,
            completion_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens,
            completion_tokens_details: { reasoning_tokens: usage.output_tokens_details.reasoning_tokens },
          }
        : null,
  };
}

type AnyEvent = { readonly type: string; readonly [key: string]: unknown };

/** The event stream as Chat Completions streaming chunks (`chat.completion.chunk`). */
export function* chatCompletionChunks(events: Iterable<StreamingEvent>): Generator<JsonObject> {
  let head: JsonObject = {};
  const calls = new Map<string, number>();
  const chunk = (delta: JsonObject, finish: string | null = null): JsonObject => ({ ...head, choices: [{ index: 0, delta, finish_reason: finish }] });
  for (const raw of events) {
    const event = raw as unknown as AnyEvent;
    const type = event.type;
    if (type === CREATED) {
      const r = event["response"] as ResponseResource;
      head = { id: chatId(r.id), object: spec.CHAT_CHUNK_OBJECT, created: r.created_at, model: r.model };
      yield chunk({ role: Role.Assistant, content: "" });
    } else if (type === TEXT_DELTA) {
      yield chunk({ content: event["delta"] as string });
    } else if (type === REASONING_DELTA) {
      yield chunk({ reasoning_content: event["delta"] as string });
    } else if (type === spec.STREAM_ITEM_ADDED && (event["item"] as Item | null)?.type === KIND.call?.type) {
      const call = event["item"] as Item & { readonly id: string };
      calls.set(call.id, calls.size);
      yield chunk({ tool_calls: [{ index: calls.get(call.id) ?? 0, id: call.call_id ?? "", type: "function", function: { name: call.name ?? "", arguments: "" } }] });
    } else if (type === ARGUMENTS_DELTA) {
      yield chunk({ tool_calls: [{ index: calls.get(event["item_id"] as string) ?? 0, function: { arguments: event["delta"] as string } }] });
    } else if (type === spec.STREAM_CLOSING["completed"] || type === spec.STREAM_CLOSING[INCOMPLETE]) {
      const done = event["response"] as ResponseResource;
      yield chunk({}, finishReason(done.status === INCOMPLETE, calls.size > 0));
    } else if (type === spec.STREAM_CLOSING["failed"]) {
      // Chat Completions has no failed finish reason: streams end with an error object instead.
      const error = (event["response"] as ResponseResource).error ?? null;
      yield { ...head, error: error !== null ? dumpAs("Error", error) : (null as JsonData) };
    }
  }
}
