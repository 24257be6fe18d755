/** Server-sent events: the wire form of an Open Responses event stream, written and read back. */

import type { CreateResponseBody, StreamingEvent } from "#types";

import type { HarmonyEncoding } from "../encoding.js";
import { rethrow } from "../errors.js";
import { isJsonObject } from "../json.js";
import { JSONInputError, loadJson } from "../jsonInput.js";
import { spec } from "../tables.js";
import { type BuilderOptions, type Completion, drive, EVENTS, type OpenItem, ResponseBuilder } from "./items.js";
import type { StreamOptions, Writer } from "./items.js";
import { compactJson, dumpAs, jsonString, ModelValidationError, validateAs } from "./schema.js";
import { explain, found, problemPath } from "./validation.js";

export const OPENAI_REASONING_EVENTS: Readonly<Record<string, string>> = { ...spec.OPENAI_REASONING_EVENTS };
const FROM_OPENAI: ReadonlyMap<string, string> = new Map(Object.entries(OPENAI_REASONING_EVENTS).map(([k, v]) => [v, k]));
export const DONE = spec.SSE_DONE;
export const DONE_FRAME = `data: ${DONE}\n\n`;
const EVENT_UNION = "StreamingEvent";
export type ReasoningNames = "spec" | "openai";

/** One event's JSON body, on one line (pydantic's `model_dump_json`). */
export function eventJson(event: StreamingEvent): string {
  return compactJson(dumpAs(EVENT_UNION, event));
}

/** One event as SSE text: its `event:` line, its `data:` line and the blank line that ends it. */
export function frame(event: StreamingEvent, reasoningNames: ReasoningNames = "spec"): string {
  const renamed = reasoningNames === "openai" ? OPENAI_REASONING_EVENTS[event.type] : undefined;
  if (renamed === undefined) return `event: ${event.type}\ndata: ${eventJson(event)}\n\n`;
  return `event: ${renamed}\ndata: ${eventJson(event).replace(jsonString(event.type), jsonString(renamed))}\n\n`;
}

/** The wire form: `event: TYPE` and `data: JSON` lines, a blank line after each, then `data: [DONE]`.
 * `reasoningNames: "openai"` names raw reasoning events `response.reasoning_text.*` instead of the spec's. */
export function* toSse(events: Iterable<StreamingEvent>, reasoningNames: ReasoningNames = "spec"): Generator<string> {
  for (const event of events) yield frame(event, reasoningNames);
  yield DONE_FRAME;
}

// A delta frame's template is cut from a sample frame at these two places.
const SEQUENCE_KEY = '"sequence_number":';
const SEQUENCE_ZERO = SEQUENCE_KEY + "0";
const DELTA_KEY = ',"delta":';
const DELTA_EMPTY = DELTA_KEY + '""';

/** A `ResponseBuilder` writer of SSE text: a delta's frame is made straight from its text, never as a typed event,
 * around the sequence number and the text in a sample frame of its item's. `data: [DONE]` ends the stream. */
export function sseWriter(names: ReasoningNames = "spec"): Writer<string, string> {
  const escaped = new Map<string, string>(); // a piece of text → its JSON string; tokens repeat
  let open: OpenItem | null = null; // the item `head` and `middle` are cut for
  let head = "";
  let middle = "";
  return {
    event: (event) => frame(event, names),
    delta(item, sequenceNumber, text) {
      if (item !== open) {
        const sample = frame(EVENTS.delta(item, 0, ""), names);
        const at = sample.indexOf(SEQUENCE_ZERO);
        head = sample.slice(0, at + SEQUENCE_KEY.length);
        middle = sample.slice(at + SEQUENCE_ZERO.length, sample.lastIndexOf(DELTA_EMPTY)) + DELTA_KEY;
        open = item;
      }
      let json = escaped.get(text);
      if (json === undefined) escaped.set(text, (json = jsonString(text)));
      return `${head}${sequenceNumber}${middle}${json}}\n\n`;
    },
    step: (frames) => frames.join(""),
    last: DONE_FRAME,
  };
}

/** Options of `SSEStreamer`: `ResponseBuilder`'s and the naming of reasoning events. */
export interface SSEOptions extends BuilderOptions {
  readonly reasoningNames?: ReasoningNames;
}

/** Options of `streamSse`: `SSEStreamer`'s and the engine's finish reason (`stopped`, see `ResponseBuilder.finish`). */
export interface StreamSSEOptions extends SSEOptions, StreamOptions {}

/**
 * Completion tokens (or text) → SSE text, for servers: `start`, `feed`, `feedText`, `finish`, `fail`.
 *
 * Each call returns the SSE text of the events it caused ("" when none); `finish` and `fail` end it with
 * `data: [DONE]`. The events are those `ResponseStreamer` yields, written as `toSse` writes them, but a delta's
 * frame is made from its text without building the typed event (`sseWriter`).
 */
export class SSEStreamer extends ResponseBuilder<string, string> {
  constructor(encoding: HarmonyEncoding, request: CreateResponseBody | null = null, options: SSEOptions = {}) {
    super(encoding, request, sseWriter(options.reasoningNames), options);
  }
}

/** The SSE text for a completion given as token ids or text chunks: the same bytes as `toSse(streamResponse(...))`,
 * produced without a typed event per delta. Yields no empty strings. */
export function* streamSse(
  completion: Completion,
  encoding: HarmonyEncoding,
  request: CreateResponseBody | null = null,
  options: StreamSSEOptions = {},
): Generator<string> {
  for (const text of drive(new SSEStreamer(encoding, request, options), completion, options.stopped ?? null)) if (text) yield text;
}

/** Malformed or cut SSE text: `line` is the 1-based line, `events` what was read before the problem. */
export class SSEError extends Error {
  override readonly name = "SSEError";

  constructor(
    readonly line: number,
    message: string,
    public events: StreamingEvent[] = [],
  ) {
    super(`line ${line}: ${message}`);
  }
}

const FIELD = /^([^:]*)(?:: ?(.*))?$/s; // a field's name, and its value after the colon and one space

function shortRepr(text: string): string {
  return JSON.stringify([...text].slice(0, 40).join(""));
}

/** One event's `data` (on lines from `number`) as a typed event; every problem an `SSEError` carrying `events`. */
function readEvent(number: number, name: string | null, payload: string, events: StreamingEvent[]): StreamingEvent {
  const raw = rethrow(JSONInputError, () => loadJson(payload, "data"), (e) => new SSEError(number, e.message, events));
  if (!isJsonObject(raw)) throw new SSEError(number, `data: expected a JSON object (an event), found ${found(raw)}`, events);
  const type = raw["type"];
  if (typeof type !== "string") throw new SSEError(number, `data.type: expected a string, found ${found(type)}`, events);
  const kind = (raw["type"] = FROM_OPENAI.get(type) ?? type); // the spec's name of the event
  if (name !== null && (FROM_OPENAI.get(name) ?? name) !== kind) {
    throw new SSEError(number, `event name ${JSON.stringify(name)} differs from the body's type ${JSON.stringify(kind)}`, events);
  }
  return rethrow(ModelValidationError, () => validateAs<StreamingEvent>(EVENT_UNION, raw), (e) => {
    const problem = explain(e.issues, raw);
    return new SSEError(number, `${problemPath(problem, "data")}: ${problem.message} (event ${JSON.stringify(kind)})`, events);
  });
}

/**
 * Read an Open Responses event stream (`toSse` output, either naming of reasoning events) into typed events, by
 * the WHATWG event-stream rules: a leading byte-order mark is skipped; lines end with CRLF, LF or CR; `:` starts a
 * comment; a field without a colon has an empty value; `data` lines join with newlines; `id` and `retry` are
 * accepted (not used: this reader does not reconnect); a blank line dispatches the event. The stream ends with
 * `data: [DONE]`. Where WHATWG has a reader silently drop text, this one throws `SSEError` naming the line instead,
 * with the events read so far in `.events` (the Python package's `parse_sse`, same rules, same messages).
 */
export function parseSse(lines: Iterable<string> | string): StreamingEvent[] {
  const text = typeof lines === "string" ? lines : [...lines].join("");
  const parts = text.replace(/^\ufeff/, "").split(/\r\n|\r|\n/); // a byte-order mark first is skipped
  if (parts[parts.length - 1] === "") parts.pop(); // the text ends with a line end: no unterminated last line
  const events: StreamingEvent[] = []; // what each SSEError carries: the events read before it
  let number = 0; // the line being read
  const fail = (message: string, line = number): SSEError => new SSEError(line, message, events);
  let name: string | null = null;
  let data: (readonly [number, string])[] = []; // the pending event's `data` fields: each one's line and value
  let first = 0; // the line of its first field
  let done = 0; // the line of `data: [DONE]` once dispatched
  for (const line of parts) {
    number += 1;
    if (line === "") {
      if (data.length > 0) {
        const payload = data.map(([, value]) => value).join("\n");
        if (done) throw fail(`an event after data: ${DONE} (line ${done})`, number - 1);
        if (payload === DONE) done = first;
        else events.push(readEvent(data[0]?.[0] ?? first, name, payload, events));
      } else if (name !== null) throw fail(`event ${JSON.stringify(name)} has no data`, first);
      name = null;
      data = [];
      first = 0;
      continue;
    }
    if (line.startsWith(":")) continue; // a comment
    const [, field, value = ""] = FIELD.exec(line) ?? [];
    first = first || number;
    if (field === "data") data.push([number, value]);
    else if (field === "event") name = value || null;
    else if (field === "id") {
      if (value.includes("\0")) throw fail("an id holding NUL, which readers ignore");
    } else if (field === "retry") {
      if (!/^[0-9]+$/.test(value)) throw fail(`retry expects a number of milliseconds, found ${shortRepr(value)}`);
    } else throw fail(`not an SSE field: ${shortRepr(line)} (fields: data, event, id, retry)`);
  }
  if (first) throw fail("the stream ends inside an event: no blank line after it, so it is never dispatched", first);
  if (!done) throw fail(`the stream ends before data: ${DONE}: it was cut`, parts.length);
  return events;
}
