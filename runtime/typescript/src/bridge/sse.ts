/** Server-sent events: the wire form of an Open Responses event stream, written and read back. */

import type { CreateResponseBody, StreamingEvent } from "#types";

import type { HarmonyEncoding } from "../encoding.js";
import { isJsonObject, type JsonData, readJson, JsonSyntaxError } from "../json.js";
import { pyRepr } from "../pyformat.js";
import { spec } from "../tables.js";
import { type BuilderOptions, type Completion, feedAll, type OpenItem, ResponseBuilder, type Sink } from "./items.js";
import { dumpAs, jsonString, pydanticJson, validateAs } from "./schema.js";

export const OPENAI_REASONING_EVENTS: Readonly<Record<string, string>> = { ...spec.OPENAI_REASONING_EVENTS };
const FROM_OPENAI: ReadonlyMap<string, string> = new Map(Object.entries(OPENAI_REASONING_EVENTS).map(([k, v]) => [v, k]));
export const DONE = spec.SSE_DONE;
export const DONE_FRAME = `data: ${DONE}\n\n`;
const EVENT_UNION = "StreamingEvent";
export type ReasoningNames = "spec" | "openai";

/** One event's JSON body, on one line (pydantic's `model_dump_json`). */
export function eventJson(event: StreamingEvent): string {
  return pydanticJson(dumpAs(EVENT_UNION, event));
}

/** One event as SSE text: its `event:` line, its `data:` line and the blank line that ends it. */
export function frame(event: StreamingEvent, reasoningNames: ReasoningNames = "spec"): string {
  let body = eventJson(event);
  let name: string = event.type;
  const renamed = OPENAI_REASONING_EVENTS[name];
  if (reasoningNames === "openai" && renamed !== undefined) {
    body = body.replace(jsonString(name), jsonString(renamed));
    name = renamed;
  }
  return `event: ${name}\ndata: ${body}\n\n`;
}

/** The wire form: `event: TYPE` and `data: JSON` lines, a blank line after each, then `data: [DONE]`.
 * `reasoningNames: "openai"` names raw reasoning events `response.reasoning_text.*` instead of the spec's. */
export function* toSse(events: Iterable<StreamingEvent>, reasoningNames: ReasoningNames = "spec"): Generator<string> {
  for (const event of events) yield frame(event, reasoningNames);
  yield DONE_FRAME;
}

// The delta frame's template is cut from a sample event's JSON at these two places.
const SEQUENCE_KEY = '"sequence_number":';
const SEQUENCE_ZERO = SEQUENCE_KEY + "0";
const DELTA_KEY = ',"delta":';
const DELTA_EMPTY = DELTA_KEY + '""';

/** A `ResponseBuilder` sink that writes SSE text: deltas straight from their text, never as typed events. */
class Frames implements Sink<string> {
  readonly frames: string[] = [];
  private readonly escaped = new Map<string, string>(); // a piece of text → its JSON string; tokens repeat

  constructor(private readonly names: ReasoningNames) {}

  event(event: StreamingEvent): void {
    this.frames.push(frame(event, this.names));
  }

  delta(item: OpenItem, sequenceNumber: number, text: string): void {
    this.frames.push(this.handDelta(item, sequenceNumber, text));
  }

  handDelta(item: OpenItem, sequenceNumber: number, text: string): string {
    let parts = item.wire as readonly [string, string] | null;
    if (parts === null) parts = (item.wire = this.deltaParts(item)) as readonly [string, string];
    let escaped = this.escaped.get(text);
    if (escaped === undefined) {
      escaped = jsonString(text);
      this.escaped.set(text, escaped);
    }
    return `${parts[0]}${sequenceNumber}${parts[1]}${escaped}}\n\n`;
  }

  /** The delta frame of `item` around its sequence number and its text, written as its model would be. */
  private deltaParts(item: OpenItem): readonly [string, string] {
    const type = item.spec.delta ?? "";
    const sample = { type, sequence_number: 0, item_id: item.id, output_index: item.outputIndex, content_index: 0, delta: "" };
    let name = type;
    if (this.names === "openai") name = OPENAI_REASONING_EVENTS[name] ?? name;
    let body = pydanticJson(dumpAs(EVENT_UNION, sample));
    if (body.includes(jsonString(type))) body = body.replace(jsonString(type), jsonString(name));
    const at = body.indexOf(SEQUENCE_ZERO);
    const head = body.slice(0, at);
    const rest = body.slice(at + SEQUENCE_ZERO.length);
    const middle = rest.slice(0, rest.lastIndexOf(DELTA_EMPTY));
    return [`event: ${name}\ndata: ${head}${SEQUENCE_KEY}`, middle + DELTA_KEY];
  }

  take(): string {
    const out = this.frames.join("");
    this.frames.length = 0;
    return out;
  }
}

/** Options of `SSEStreamer`: `ResponseBuilder`'s and the naming of reasoning events. */
export interface SSEOptions extends BuilderOptions {
  readonly reasoningNames?: ReasoningNames;
}

/**
 * Completion tokens (or text) → SSE text, for servers: `start`, `feed`, `feedText`, `finish`, `fail`.
 *
 * Each call returns the SSE text of the events it caused ("" when none); `finish` and `fail` end it with
 * `data: [DONE]`. The events are those `ResponseStreamer` yields, written as `toSse` writes them, but a delta's
 * frame is made from its text without building the typed event.
 */
export class SSEStreamer {
  private readonly frames: Frames;
  readonly builder: ResponseBuilder<string>;

  constructor(encoding: HarmonyEncoding, request: CreateResponseBody | null = null, options: SSEOptions = {}) {
    this.frames = new Frames(options.reasoningNames ?? "spec");
    this.builder = new ResponseBuilder(encoding, request, this.frames, options);
  }

  start(): string {
    this.builder.start();
    return this.frames.take();
  }

  feed(token: number): string {
    const delta = this.builder.feedToken(token);
    return delta !== null ? delta : this.frames.take(); // a delta from the fast path: no other event came with it
  }

  feedText(chunk: string): string {
    this.builder.feedText(chunk);
    return this.frames.take();
  }

  finish(stopped: boolean | null = null): string {
    const done = !this.builder.finished;
    this.builder.finish(stopped);
    return this.frames.take() + (done ? DONE_FRAME : "");
  }

  fail(message: string, code: string = spec.ERROR_MODEL_OUTPUT_INVALID): string {
    const done = !this.builder.finished;
    this.builder.fail(message, code);
    return this.frames.take() + (done ? DONE_FRAME : "");
  }
}

/** The SSE text for a completion given as token ids or text chunks: the same bytes as `toSse(streamResponse(...))`,
 * produced without a typed event per delta. Yields no empty strings. */
export function* streamSse(completion: Completion, encoding: HarmonyEncoding, request: CreateResponseBody | null = null, options: SSEOptions = {}): Generator<string> {
  const streamer = new SSEStreamer(encoding, request, options);
  yield streamer.start();
  for (const text of feedAll(completion, (t) => streamer.feed(t), (c) => streamer.feedText(c))) if (text) yield text;
  yield streamer.finish();
}

/** Malformed SSE text: names the line. */
export class SSEError extends Error {
  override readonly name = "SSEError";
}

/** Read `toSse` output back (either naming of reasoning events) into typed events. Accepts the text as lines or as
 * chunks holding several lines; stops at `data: [DONE]`. */
export function parseSse(lines: Iterable<string>): StreamingEvent[] {
  const events: StreamingEvent[] = [];
  let name: string | null = null;
  let data: string[] = [];
  const text = [...lines].join("").replace(/\r\n/g, "\n");
  const all = text.split("\n");
  for (let i = 0; i < all.length; i++) {
    const line = all[i] ?? "";
    const number = i + 1;
    if (line === "") {
      if (data.length > 0) {
        const payload = data.join("\n");
        if (payload === DONE) return events;
        let raw: JsonData;
        try {
          raw = readJson(payload);
        } catch (e) {
          if (e instanceof JsonSyntaxError) throw new SSEError(`line ${number - 1}: data is not JSON: ${e.msg}`);
          throw e;
        }
        if (!isJsonObject(raw)) throw new TypeError(`line ${number}: data is not an object`);
        const type = raw["type"];
        const fromOpenai = typeof type === "string" ? FROM_OPENAI.get(type) : undefined;
        if (fromOpenai !== undefined) raw["type"] = fromOpenai;
        if (name !== null && (FROM_OPENAI.get(name) ?? name) !== raw["type"]) {
          const shown = typeof raw["type"] === "string" ? pyRepr(raw["type"]) : String(raw["type"]);
          throw new SSEError(`line ${number}: event name ${pyRepr(name)} differs from the body's type ${shown}`);
        }
        events.push(validateAs<StreamingEvent>(EVENT_UNION, raw));
      }
      name = null;
      data = [];
    } else if (line.startsWith("event:")) {
      name = line.slice("event:".length).trim();
    } else if (line.startsWith("data:")) {
      const value = line.slice("data:".length);
      data.push(value.startsWith(" ") ? value.slice(1) : value);
    } else if (line.startsWith(":")) {
      continue;
    } else {
      throw new SSEError(`line ${number}: not an SSE field: ${pyRepr([...line].slice(0, 40).join(""))}`);
    }
  }
  return events;
}
