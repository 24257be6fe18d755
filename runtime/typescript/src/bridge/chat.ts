/**
 * Chat Completions: an Open Responses response or event stream in the `chat.completion` shapes.
 *
 * `content` is the turn's visible text: its preambles and its answer, one message item each, joined with a new line
 * (as vLLM does); `reasoning_content` its reasoning. A function call is a `tool_calls` entry only once it is
 * complete: a call the token budget cut (its item `incomplete`, as the response is, `finish_reason` `length`) is no
 * call to run and is kept in the vendor field `harmony:partial_tool_calls`. Streaming, a call's chunks are held
 * until its item is done and then sent in the order they came. Mirrors the Python package's `bridge/chat.py`.
 */

import type { FunctionCall, ResponseResource, StreamingEvent } from "#types";

import type { JsonObject } from "../json.js";
import { ItemKind, Role, spec } from "../tables.js";
import { Status } from "./items.js";
import { dumpAs } from "./schema.js";

const [MESSAGE, REASONING, CALL] = [ItemKind.Message, ItemKind.Reasoning, ItemKind.FunctionCall].map((k) => spec.ITEM_KINDS[k]);
const INCOMPLETE: string = Status.Incomplete;
const SEPARATOR = spec.CHAT_VISIBLE_SEPARATOR; // between the visible parts of a turn in `content`
const PARTIAL_CALLS = spec.CHAT_PARTIAL_CALLS_FIELD; // calls the budget cut: not to be run

/** The fields a Chat Completions object (`object`: a completion or a chunk) for `response` begins with; its id is the
 * response's under the chat prefix. */
function headOf(response: ResponseResource, object: string): JsonObject {
  const prefix = spec.RESPONSE_ID_PREFIX + "_";
  const id = response.id.startsWith(prefix) ? response.id.slice(prefix.length) : response.id;
  return { id: spec.CHAT_ID_PREFIX + "_" + id, object, created: response.created_at, model: response.model };
}

function finishReason(incomplete: boolean, hasCalls: boolean): string {
  return spec.CHAT_FINISH_REASONS[incomplete ? "incomplete" : hasCalls ? "tool_calls" : "stop"] ?? "";
}

type Part = { readonly type: string; readonly text?: string };
/** What the projection reads of an output item: a function call's fields, or another item's content parts. */
type Item = Partial<Omit<FunctionCall, "type">> & { readonly type: string; readonly content?: readonly Part[] | null };
/** What the chunks read of an event. */
type AnyEvent = { readonly type: string } & Partial<{ delta: string; item_id: string; item: Item | null; response: ResponseResource }>;

function callOf(item: Item): JsonObject {
  return { id: item.call_id ?? "", type: "function", function: { name: item.name ?? "", arguments: item.arguments ?? "" } };
}

function texts(item: Item, type: unknown): string[] {
  return (item.content ?? []).filter((p) => p.type === type).map((p) => p.text ?? "");
}

/** The response as a Chat Completions object: `content`, `reasoning_content`, `tool_calls`, `finish_reason`. */
export function toChatCompletion(response: ResponseResource): JsonObject {
  const output = response.output as unknown as readonly Item[];
  const ofKind = (row: typeof CALL): Item[] => output.filter((item) => item.type === row?.type);
  const content = ofKind(MESSAGE).map((item) => texts(item, MESSAGE?.text?.["part"]).join("")); // the text of each message item
  const reasoning = ofKind(REASONING).flatMap((item) => texts(item, REASONING?.text?.["part"]));
  const calls = ofKind(CALL).filter((item) => item.status !== INCOMPLETE).map(callOf);
  const partial = ofKind(CALL).filter((item) => item.status === INCOMPLETE).map(callOf);
  const message: JsonObject = {
    role: Role.Assistant,
    content: content.filter((text) => text !== "").join(SEPARATOR) || null, // empty text is no content
    reasoning_content: reasoning.join("") || null,
  };
  if (calls.length > 0) message["tool_calls"] = calls;
  if (partial.length > 0) message[PARTIAL_CALLS] = partial;
  return {
    ...headOf(response, spec.CHAT_OBJECT),
    choices: [{ index: 0, message, finish_reason: finishReason(response.status === INCOMPLETE, calls.length > 0) }],
    usage: response.usage ? usageOf(response.usage) : null,
  };
}

function usageOf(usage: NonNullable<ResponseResource["usage"]>): JsonObject {
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
 * `includeUsage`, `close()` gives a last chunk with `usage` and no choices. A message item's text that follows
 * another's starts with the new line that separates them in `content`; a function call's chunks are held until its
 * item is done (a call the budget cut comes as `harmony:partial_tool_calls`).
 */
export class ChatChunks {
  private head: JsonObject = {};
  private calls = 0; // the complete calls sent: the next one's index among `tool_calls`
  private readonly held = new Map<string, string[]>(); // item id → the argument deltas of a call not done yet
  private shown = false; // some message item's text was sent
  private separate = false; // a message item opened after text was sent: its text starts with the separator
  private usage: JsonObject | null = null;

  constructor(readonly includeUsage = false) {}

  private chunk(delta: JsonObject, finish: string | null = null): JsonObject {
    return { ...this.head, choices: [{ index: 0, delta, finish_reason: finish }] };
  }

  feed(events: Iterable<StreamingEvent>): JsonObject[] {
    const out: JsonObject[] = [];
    for (const event of events as unknown as Iterable<AnyEvent>) {
      const { type, delta = "", item, response } = event;
      if (type === MESSAGE?.text?.["delta"]) {
        let text = delta;
        if (text && this.separate) {
          text = SEPARATOR + text;
          this.separate = false;
        }
        this.shown = this.shown || text.length > 0;
        out.push(this.chunk({ content: text }));
      } else if (type === REASONING?.text?.["delta"]) out.push(this.chunk({ reasoning_content: delta }));
      else if (type === CALL?.arguments?.["delta"]) this.held.get(event.item_id ?? "")?.push(delta);
      else if (type === spec.STREAM_OPENING[0]) {
        this.head = headOf(response as ResponseResource, spec.CHAT_CHUNK_OBJECT);
        out.push(this.chunk({ role: Role.Assistant, content: "" }));
      } else if (type === spec.STREAM_ITEM_ADDED) {
        if (item?.type === CALL?.type) this.held.set(item?.id ?? "", []);
        else if (item?.type === MESSAGE?.type && this.shown) this.separate = true;
      } else if (type === spec.STREAM_ITEM_DONE && item?.type === CALL?.type) out.push(...this.callDone(item as Item));
      else if (type === spec.STREAM_CLOSING[Status.Completed] || type === spec.STREAM_CLOSING[INCOMPLETE]) {
        out.push(this.chunk({}, finishReason(response?.status === INCOMPLETE, this.calls > 0)));
        if (response?.usage) this.usage = usageOf(response.usage);
      } else if (type === spec.STREAM_CLOSING[Status.Failed]) {
        out.push({ ...this.head, error: response?.error ? dumpAs("Error", response.error) : null });
      }
    }
    return out;
  }

  /** A call's held chunks: as `tool_calls` deltas when it is complete, else as a partial call. */
  private callDone(call: Item): JsonObject[] {
    const id = call.id ?? "";
    const deltas = this.held.get(id) ?? [];
    this.held.delete(id);
    if (call.status === INCOMPLETE) return [this.chunk({ [PARTIAL_CALLS]: [callOf(call)] })];
    const index = this.calls++;
    const first = this.chunk({ tool_calls: [{ index, ...callOf({ ...call, arguments: "" }) }] });
    return [first, ...deltas.map((delta) => this.chunk({ tool_calls: [{ index, function: { arguments: delta } }] }))];
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
