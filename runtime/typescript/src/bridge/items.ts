/**
 * Harmony completion → Open Responses output items and their ordered events: the item/event state machine.
 *
 * `ResponseBuilder` reads the completion with the grammar-driven `HarmonyStreamParser`: lenient by default (a
 * server never fails a turn on a glitch the parser can repair), strict on request, with the function names of the
 * request for the repairs that need them. Each message becomes one output item, of the kind the spec's
 * `ITEM_KINDS` table names:
 *
 * - a recipient in the function namespace → `function_call` (the name after the namespace, the arguments verbatim,
 *   a fresh call id), its arguments streamed as deltas; empty arguments become `{}`, and a strict tool's arguments
 *   are checked against its `parameters` schema (`arguments.ts`; a violation is reported on the item and listed
 *   among the repairs, never a failure and never a change);
 * - a recipient in a namespace the spec's table names (the built-in tools: `browser.search`, `python`,
 *   `container.exec`) → that vendor-prefixed extension item; any other recipient, or a message not by the
 *   assistant → the generic vendor-prefixed tool-call item. Extension items carry `id`, `type`, `status`,
 *   `recipient`, `arguments`, `channel` and `content_type`;
 * - the reasoning channel, or a channel the format does not know (hidden text is never shown) → `reasoning`;
 *   anything else → an assistant `message`, its phase by the channel's purpose.
 *
 * An item keeps the header the model wrote where its kind alone would not render it back so, in the vendor-prefixed
 * fields the spec names (`harmony:channel`, `harmony:content_type`; null: none): a `function_call` written on another
 * channel than the tool-calls one or with another content type than the constrained function-arguments type; a
 * `message` written on another channel than its phase's (the answer with no header at all: null), or with a content
 * type; a `reasoning` item written with a content type.
 *
 * Events follow the spec's order (`EVENT_ORDER`). A completion cut mid-message ends `incomplete`; in strict mode
 * a parse error ends with an `error` event and `response.failed`. Every repair lenient parsing makes is passed to
 * `onRepair` when it happens and listed on the final response in the vendor-prefixed field named by the spec
 * (`harmony:repairs`). What each event becomes is the writer's business: `EVENTS` keeps it typed
 * (`ResponseStreamer`, `streamResponse`, `buildResponse`); `sse.sseWriter` writes SSE text without building an
 * event per delta (`SSEStreamer`).
 * Mirrors the Python package's `bridge/items.py`.
 */

import { randomBytes } from "node:crypto";

import type { CreateResponseBody, ResponseResource, StreamingEvent, Usage } from "#types";

import type { HarmonyEncoding } from "../encoding.js";
import { recover } from "../errors.js";
import { type JsonData, type JsonObject, JsonSyntaxError, readJson } from "../json.js";
import { fill, strip } from "../texts.js";
import { ContentDelta, type Event, HarmonyParseError, MessageEnd, MessageStart, Recovered } from "../stream/events.js";
import { HarmonyStreamParser, Region } from "../stream/parser.js";
import { ItemKind, ITEM_KIND_VALUES, Role, spec } from "../tables.js";
import { checkArguments } from "./arguments.js";
import { type RepairRecord, responseSnapshot, type SnapshotState, usage } from "./resource.js";
import { eventModelOf, fieldMember, itemModelOf, make, model } from "./schema.js";
import { declaredTools, FUNCTIONS_PREFIX, namespaceTools, qualified } from "./tools.js";

export type IdFactory = (prefix: string) => string;
const SEPARATOR = spec.HEADER_NAMESPACE_SEPARATOR;
const EMPTY_ARGUMENTS = "{}"; // JSON's empty object: what a call without arguments passes
const OPEN = spec.SPELLING_OPEN;
const SPECIALS = Object.keys(spec.NAMED_TOKENS).sort((a, b) => b.length - a.length);
const OUTPUT_INVALID = spec.ERRORS[spec.ERROR_MODEL_OUTPUT_INVALID]; // the error of an output that is not Harmony

/** An item's or a response's status. */
export enum Status {
  InProgress = "in_progress",
  Completed = "completed",
  Incomplete = "incomplete",
  Failed = "failed",
}

/** `fc_…`, `msg_…`, `rs_…`, `call_…`, `resp_…` ids: the prefix and 24 random hex digits. */
export function randomId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString("hex")}`;
}

/** Deterministic ids (`msg_0001`, …), one counter per prefix: for tests and goldens. */
export function countingIds(): IdFactory {
  const counters = new Map<string, number>();
  return (prefix) => {
    const n = (counters.get(prefix) ?? 0) + 1;
    counters.set(prefix, n);
    return `${prefix}_${String(n).padStart(4, "0")}`;
  };
}

/** Tokenize streamed completion text, holding back a chunk's tail that may be half a control token. */
export function* tokensFromText(chunks: Iterable<string>, encoding: HarmonyEncoding): Generator<number> {
  let pending = "";
  for (const chunk of chunks) {
    pending += chunk;
    let cut = pending.lastIndexOf(OPEN);
    if (cut === -1 && pending.endsWith(OPEN[0] ?? "")) cut = pending.length - 1;
    const tail = cut !== -1 ? pending.slice(cut) : "";
    const held = cut !== -1 && SPECIALS.some((s) => s.startsWith(tail)) && !SPECIALS.includes(tail);
    const ready = held ? pending.slice(0, cut) : pending;
    pending = held ? tail : "";
    if (ready) yield* encoding.encode(ready, { allowedSpecial: "all" });
  }
  if (pending) yield* encoding.encode(pending, { allowedSpecial: "all" });
}

// -- the item kinds, from the spec's table ---------------------------------------------------------------------

/** An event to send: its type and its model's fields, in order. */
type EventSpec = readonly [string, readonly string[]];

/** The event of `spec` with sequence number `sequenceNumber`, given the fields of its model that `values` hold
 * (null: not given; none holds `type` or `sequence_number`, which come first). */
function eventOf([type, fields]: EventSpec, sequenceNumber: number, values: JsonObject): StreamingEvent {
  const given: JsonObject = { type, sequence_number: sequenceNumber };
  for (const key of fields) if (values[key] !== undefined && values[key] !== null) given[key] = values[key];
  return given as unknown as StreamingEvent;
}

/** A maker of the content part `partType` of an output item of wire type `itemType` (in `ItemField`, the union the
 * response's `output` holds): the part's model is the one the item's `content` takes for that tag, and its other
 * required lists start empty. */
function partMaker(itemType: string, partType: string): (text: string) => JsonObject {
  const name = fieldMember(itemModelOf("ItemField", itemType) ?? "", "content", partType);
  const lists = model(name).fields.filter((f) => f.required && f.type.kind === "list").map((f) => f.key);
  return (text) => make(name, { type: partType, text, ...Object.fromEntries(lists.map((key) => [key, []])) });
}

/** One kind of output item: its row of `ITEM_KINDS`, with its events from `EVENT_ORDER`: those before the repeated
 * one (its deltas) when it opens, the first alone when none repeats, the rest when it ends. */
function kindSpec(kind: ItemKind) {
  const row = spec.ITEM_KINDS[kind];
  const order = spec.EVENT_ORDER[kind];
  if (row === undefined || order === undefined) throw new Error(`the spec has no item kind ${kind}`);
  const at = order.findIndex((name) => name.endsWith(spec.EVENT_REPEATS));
  const types = order.map((name, i) => (i === at ? name.slice(0, -spec.EVENT_REPEATS.length) : name));
  const events = types.map((type): EventSpec => [type, model(eventModelOf(type)).fields.map((f) => f.key)]);
  return {
    kind,
    row, // its wire type and id prefixes
    part: row.text !== null ? partMaker(row.type, row.text["part"] ?? "") : null, // text → the content part, for items that stream text
    delta: events[at] ?? null, // the event of a piece of text or of arguments
    opening: events.slice(0, at === -1 ? 1 : at), // the events the item opens with
    closing: events.slice(at === -1 ? 1 : at + 1), // the events it ends with
  } as const;
}

export type KindSpec = ReturnType<typeof kindSpec>;

export const KINDS: ReadonlyMap<ItemKind, KindSpec> = new Map(ITEM_KIND_VALUES.map((k) => [k, kindSpec(k)]));
const REASONING_CHANNEL = spec.CHANNEL_BY_PURPOSE[spec.ITEM_KINDS[ItemKind.Reasoning]?.channel_purpose ?? ""] ?? "";
// the kinds a namespace names (the kinds that none names under null, which no recipient's namespace is)
const KIND_OF_NAMESPACE = new Map(ITEM_KIND_VALUES.map((kind) => [spec.ITEM_KINDS[kind]?.namespace ?? null, kind]));
const PHASES = Object.entries(spec.ITEM_KINDS[ItemKind.Message]?.phases ?? {});
const PHASE_OF_CHANNEL = new Map(PHASES.map(([purpose, phase]) => [spec.CHANNEL_BY_PURPOSE[purpose] ?? "", phase]));

/** The kind of item a message becomes, by its recipient, author and channel; a call to a tool of one of the
 * request's namespace tools (`namespaces`) is a function call. */
export function kindOf(start: MessageStart, namespaces: ReadonlySet<string> = new Set()): ItemKind {
  const { recipient, channel } = start;
  const assistant = start.role === Role.Assistant;
  const namespace = recipient?.split(SEPARATOR, 1)[0] ?? null; // all of the recipient when it has no separator
  if (recipient?.startsWith(FUNCTIONS_PREFIX) || (assistant && namespace !== null && namespaces.has(namespace))) {
    return ItemKind.FunctionCall;
  }
  if (!assistant) return ItemKind.ToolCall;
  if (recipient !== null && recipient !== spec.HEADER_BROADCAST_RECIPIENT) return KIND_OF_NAMESPACE.get(namespace) ?? ItemKind.ToolCall;
  // a channel the format does not know is hidden, as reasoning is
  return channel === REASONING_CHANNEL || (channel !== null && !spec.CHANNELS.includes(channel)) ? ItemKind.Reasoning : ItemKind.Message;
}

export class OpenItem {
  readonly name: string | null = null;
  readonly namespace: string | null = null; // a namespace tool's call: the namespace (`name` is the tool's own name)
  validation: JsonObject | null = null; // what checking a strict tool's arguments found, when they broke it

  constructor(
    readonly kind: KindSpec,
    readonly id: string,
    readonly outputIndex: number,
    readonly header: MessageStart, // the header the model wrote
    readonly callId: string | null = null,
  ) {
    if (kind.kind !== ItemKind.FunctionCall) return;
    const to = header.recipient ?? "";
    const at = to.indexOf(SEPARATOR);
    if (to.startsWith(FUNCTIONS_PREFIX)) this.name = to.slice(FUNCTIONS_PREFIX.length);
    else [this.namespace, this.name] = [to.slice(0, at), to.slice(at + SEPARATOR.length)];
  }

  /** The item as the spec's model: empty while in progress, with its whole `text` when it ends. */
  body(status: Status, text = ""): JsonObject {
    const { kind, part, row: { type } } = this.kind;
    const { channel, recipient, contentType } = this.header;
    const content = status !== Status.InProgress && part !== null ? [part(text)] : [];
    let item: JsonObject;
    let channelKept = false; // the header's channel is kept in the vendor field: the kind would render another
    let contentTypeKept = contentType !== null;
    if (kind === ItemKind.Reasoning) item = { type, id: this.id, summary: [], content };
    else if (kind === ItemKind.Message) {
      const phase = PHASE_OF_CHANNEL.get(channel ?? "") ?? PHASE_OF_CHANNEL.get(spec.CHANNEL_ANSWER) ?? null;
      item = { type, id: this.id, status, role: Role.Assistant, content, phase };
      channelKept = channel === null || !PHASE_OF_CHANNEL.has(channel);
    } else if (kind === ItemKind.FunctionCall) {
      item = { type, id: this.id, call_id: this.callId ?? "", name: this.name ?? "", arguments: text, status };
      // the header a function call is rendered back with, unless it says otherwise
      channelKept = channel !== spec.CHANNEL_TOOL_CALLS;
      contentTypeKept = contentType !== spec.SPELLING_CONSTRAIN + spec.CONTENT_TYPE_FUNCTION_ARGUMENTS;
    } else {
      // A vendor-prefixed item: every key besides `type` is an extra field.
      return { type, id: this.id, status, recipient, arguments: text, channel, content_type: contentType };
    }
    if (channelKept) item[spec.RESPONSE_CHANNEL_FIELD] = channel;
    if (contentTypeKept) item[spec.RESPONSE_CONTENT_TYPE_FIELD] = contentType;
    if (this.validation !== null && status !== Status.InProgress) item[spec.RESPONSE_VALIDATION_FIELD] = this.validation;
    if (this.namespace !== null) item[spec.RESPONSE_NAMESPACE_FIELD] = this.namespace;
    return item;
  }
}

// -- the builder -------------------------------------------------------------------------------------------------

/** What a builder makes of each event (`D`: a typed event, `EVENTS`; an SSE frame, `sse.sseWriter`), and what a
 * step returns of those it made (`R`: the list; SSE text). */
export interface Writer<D, R = D[]> {
  event(event: StreamingEvent): D;
  /** A delta of `item`'s text or arguments (made from its text, where the writer can do without the typed event). */
  delta(item: OpenItem, sequenceNumber: number, text: string): D;
  step(written: D[]): R;
  /** What follows the closing event of a response `finish` or `fail` ended, if anything (SSE: `data: [DONE]`). */
  readonly last?: D;
}

/** The typed events themselves. */
export const EVENTS: Writer<StreamingEvent> = {
  event: (event) => event,
  delta(item, sequenceNumber, text) {
    const values = { item_id: item.id, output_index: item.outputIndex, content_index: 0, delta: text };
    return eventOf(item.kind.delta ?? ["", []], sequenceNumber, values);
  },
  step: (events) => events,
};

/** Options of `ResponseBuilder` (the Python keyword arguments, camelCased). */
export interface BuilderOptions {
  readonly model?: string;
  readonly inputTokens?: number;
  readonly responseId?: string | null;
  readonly createdAt?: number | null;
  readonly ids?: IdFactory;
  readonly clock?: () => number;
  readonly role?: Role | null;
  readonly stopAtTurnEnd?: boolean;
  readonly strict?: boolean;
  readonly tools?: Iterable<string> | null;
  readonly onRepair?: ((repair: Recovered) => void) | null;
}

/**
 * Completion tokens or text → the response's events in the spec's order, each made by `writer`.
 *
 * `start`, `feed` (a token id), `feedText` (a chunk of text), `finish` and `fail` each return what their events
 * became, in order. `request` is the request the completion answers (its settings are echoed; its function names
 * feed the parser's repairs, its strict tools' schemas check their calls). `inputTokens` is the prompt's length,
 * for `usage`. `role: null` reads a completion that starts with its own `<|start|>`; by default the completion is
 * read as one turn (several calls, each an item, when the engine did not stop at `<|call|>`, up to the request's
 * `max_tool_calls`, and one with `parallel_tool_calls: false`; a tool result the model wrote itself cut and
 * reported; nothing after `<|return|>`), and `stopAtTurnEnd: false` reads a whole transcript. `strict: true` fails
 * the response on the first deviation from the grammar instead of repairing it.
 */
export class ResponseBuilder<D, R = D[]> {
  readonly responseId: string;
  private readonly parser: HarmonyStreamParser;
  private readonly schemas: ReadonlyMap<string, JsonObject>; // strict tools' `parameters`, by qualified name
  private readonly namespaces: ReadonlySet<string>; // the request's namespace tools' names
  private readonly ids: IdFactory;
  private readonly clock: () => number;
  private readonly createdAt: number;
  private out: D[] = []; // what the events of the call being answered became
  private seq = 0;
  private readonly outputItems: JsonObject[] = []; // finished items
  private item: OpenItem | null = null;
  private readonly repairList: Recovered[] = [];
  private reasoningTokens = 0; // of the reasoning items closed so far
  private reasoningFrom = 0; // the token that opened the reasoning item being read
  private readonly text: string[] = []; // completion text, when it came as text (for usage)
  private started = false;
  private finished = false; // the closing event is sent

  constructor(
    private readonly encoding: HarmonyEncoding,
    private readonly request: CreateResponseBody | null,
    private readonly writer: Writer<D, R>,
    private readonly options: BuilderOptions = {},
  ) {
    const declared = declaredTools(request);
    const names = options.tools ?? declared.filter((d) => d.namespace === null).map((d) => d.name);
    const strict = declared.filter((d) => d.tool.strict === true);
    this.schemas = new Map(strict.map((d) => [d.name, (d.tool.parameters ?? {}) as unknown as JsonObject]));
    this.namespaces = new Set(namespaceTools(request).map((t) => t.name));
    const role = options.role === undefined ? Role.Assistant : options.role;
    // how many tool calls one response may make (null: no limit); a big integer is a bigint until here
    const limits = [request?.parallel_tool_calls === false ? 1 : 0, Number(request?.max_tool_calls ?? 0)].filter((n) => !!n);
    this.parser = new HarmonyStreamParser(encoding, role, options.strict ? "strict" : "lenient", names, {
      stopAtTurnEnd: options.stopAtTurnEnd ?? true,
      maxToolCalls: limits.length > 0 ? Math.min(...limits) : null,
    });
    this.ids = options.ids ?? randomId;
    this.clock = options.clock ?? ((): number => Date.now() / 1000);
    this.responseId = options.responseId || this.ids(spec.RESPONSE_ID_PREFIX);
    this.createdAt = options.createdAt ?? Math.floor(this.clock());
  }

  // -- state -------------------------------------------------------------------------------------------------

  /** The response as it stands (an open item is included as `incomplete` unless in progress). */
  snapshot(status: Status, extra: Partial<SnapshotState> = {}): ResponseResource {
    const output = [...this.outputItems];
    if (this.item !== null && status !== Status.InProgress) output.push(this.item.body(Status.Incomplete, this.parser.currentContent));
    const record = ({ rule, detail, position, text }: Recovered): RepairRecord => ({ rule, detail, position, text });
    const repairs = status !== Status.InProgress ? this.repairList.map(record) : null;
    const state = { responseId: this.responseId, createdAt: this.createdAt, model: this.options.model ?? "gpt-oss", status, output };
    return responseSnapshot(this.request, { ...state, repairs, ...extra });
  }

  usage(): Usage {
    const input = this.options.inputTokens ?? 0;
    if (this.text.length > 0) {
      // the completion came as text: count its tokens now
      return usage(input, this.encoding.encode(this.text.join(""), { allowedSpecial: "all" }).length, this.reasoningTokens);
    }
    const read = this.parser.tokensRead;
    return usage(input, read, this.reasoningTokens + (this.item?.kind.kind === ItemKind.Reasoning ? read - this.reasoningFrom : 0));
  }

  // -- input -------------------------------------------------------------------------------------------------

  /** `response.created` and `response.in_progress` (sent once, before anything else). */
  start(): R {
    this.begin();
    return this.take();
  }

  /** One more completion token. Plain text continuing a streamed body (the fast path) makes its delta alone. */
  feed(token: number): R {
    const item = this.item; // set only while an item's body is streaming
    if (item !== null) {
      const text = this.parser.feedBodyToken(token);
      if (text !== null) return this.writer.step(item.kind.delta !== null ? [this.writer.delta(item, this.seq++, text)] : []);
    } else if (this.finished) return this.take();
    this.read(() => this.parser.feedTokens([token]));
    return this.take();
  }

  /** A chunk of completion text, control tokens spelled out (for engines that return no ids). */
  feedText(chunk: string): R {
    if (this.finished) return this.take();
    this.text.push(chunk);
    this.read(() => this.parser.feedText(chunk));
    return this.take();
  }

  /**
   * The end of the completion: a cut item and `response.incomplete`, or `response.completed`. `stopped` is what
   * the engine said: true, it stopped on a stop token (which it may not have passed on, as llama.cpp and Ollama do
   * not): an open message is complete; false, the budget ran out: the response is incomplete; null (not known): for
   * token ids, incomplete when the completion ends inside a message (engines keep the stop token among the ids).
   * For text, engines leave the stop token's text out, so text ending inside a message is no sign of a cut by
   * itself: it is taken as stopped, unless it ends where no stop token can end it (inside a header or reasoning,
   * right after a header, or inside a call's JSON arguments).
   */
  finish(stopped: boolean | null = null): R {
    if (this.finished) return this.take();
    const region = this.parser.region;
    let cut = region === Region.Body || region === Region.Header || region === Region.Stripped; // inside a message
    cut = cut && (this.parser.tokensRead > 0 || this.text.some((t) => t !== "")); // an empty completion is not cut
    if (stopped === null) stopped = !cut || (this.text.length > 0 && this.stopTokenMayEndIt());
    const status = stopped ? Status.Completed : Status.Incomplete;
    this.read(() => this.parser.close(), status);
    if (this.item !== null) this.close(status, this.parser.currentContent);
    this.end(status, stopped ? { completedAt: Math.floor(this.clock()) } : { incompleteReason: spec.RESPONSE_INCOMPLETE_REASON });
    return this.last();
  }

  /** End with `error` and `response.failed` (the engine went away, or the output is not Harmony). `code` and
   * `errorType` are the error's on the wire; `errorType` defaults to the spec's for `code`. */
  fail(message: string, code: string = spec.ERROR_MODEL_OUTPUT_INVALID, errorType: string | null = null): R {
    if (this.finished) return this.take();
    this.failed(message, code, errorType);
    return this.last();
  }

  private failed(message: string, code: string = spec.ERROR_MODEL_OUTPUT_INVALID, errorType: string | null = null): void {
    if (this.finished) return;
    this.begin();
    const type = errorType ?? spec.ERRORS[code]?.type ?? OUTPUT_INVALID?.type ?? "";
    this.send(spec.STREAM_ERROR, { error: make("ErrorPayload", { type, code, message, param: null }) });
    this.end(Status.Failed, { error: make("Error", { code, message }) });
  }

  private begin(): void {
    if (this.started) return;
    this.started = true;
    const response = this.snapshot(Status.InProgress) as unknown as JsonData;
    for (const type of spec.STREAM_OPENING) this.send(type, { response });
  }

  private take(): R {
    return this.writer.step(this.out.splice(0));
  }

  private send(type: string, fields: JsonObject): void {
    this.out.push(this.writer.event({ type, sequence_number: this.seq++, ...fields } as unknown as StreamingEvent));
  }

  private end(status: Status, extra: Partial<SnapshotState>): void {
    this.finished = true;
    const response = this.snapshot(status, { usage: this.usage(), ...extra }) as unknown as JsonData;
    this.send(spec.STREAM_CLOSING[status] ?? "", { response });
  }

  /** What this call wrote, and the writer's `last`: `finish` or `fail` ended the response (one the parser failed
   * ends without it). */
  private last(): R {
    if (this.writer.last !== undefined) this.out.push(this.writer.last);
    return this.take();
  }

  /** Whether text that ends inside a message may end there because the engine left out a stop token. Not inside
   * reasoning: it ends at `<|end|>`, which is no stop token of the assistant's actions (the ones engines sample
   * with), and the turn goes on to a preamble, a call or the answer (a preamble may end a turn: models do stop
   * there). Nor in a message cut right after its header, nor inside a header, nor inside a call's JSON arguments
   * (the model closes them before `<|call|>`). */
  private stopTokenMayEndIt(): boolean {
    const item = this.item;
    if (item === null) return !this.parser.seenControl; // a header, or text with no control token at all (the answer)
    const text = strip(this.parser.currentContent);
    if (!text) return false; // cut right after its header
    if (item.kind.part !== null) return item.kind.kind !== ItemKind.Reasoning;
    if (!/^[{[]/.test(text)) return true; // not JSON, which arguments begin with `{` or `[`
    const parses = (): boolean => {
      readJson(text);
      return true;
    };
    return recover(JsonSyntaxError, parses, () => false); // a syntax error: cut inside the JSON
  }

  // -- parser events → item events ---------------------------------------------------------------------------

  /** Start when not started, and hand the parser's events to `handle`; a parse error (strict mode) fails, but not at
   * the end (`eosStatus` given): a header cut short there is the budget's doing, not a failure. */
  private read(parse: () => Event[], eosStatus?: Status): void {
    this.begin();
    const events = recover(HarmonyParseError, parse, (e): Event[] => {
      if (eosStatus === undefined) this.failed(fill(OUTPUT_INVALID?.message ?? "{detail}", { detail: e.message }));
      return [];
    });
    this.handle(events, eosStatus);
  }

  private handle(events: readonly Event[], eosStatus: Status = Status.Incomplete): void {
    for (const e of events) {
      if (e instanceof ContentDelta) {
        if (this.item?.kind.delta) this.out.push(this.writer.delta(this.item, this.seq++, e.text));
      } else if (e instanceof MessageStart) this.open(e);
      else if (e instanceof MessageEnd) {
        this.close(e.terminator === spec.PARSE_EOS_TERMINATOR ? eosStatus : Status.Completed, e.message.content);
      } else this.noteRepair(e);
    }
  }

  private open(start: MessageStart): void {
    const kind = KINDS.get(kindOf(start, this.namespaces)) as KindSpec;
    const callId = kind.row.call_id_prefix !== null ? this.ids(kind.row.call_id_prefix) : null;
    const item = new OpenItem(kind, this.ids(kind.row.id_prefix), this.outputItems.length, start, callId);
    this.item = item;
    this.reasoningFrom = this.parser.tokensRead - 1;
    this.emit(kind.opening, item, { item: item.body(Status.InProgress), part: kind.part?.("") ?? null });
  }

  private close(status: Status, text: string): void {
    const item = this.item;
    if (item === null) throw new Error("ResponseBuilder: no item is open");
    if (item.kind.kind === ItemKind.FunctionCall && status === Status.Completed) text = this.checkArguments(item, text);
    else if (item.kind.kind === ItemKind.FunctionCall && status === Status.Incomplete) {
      this.repair(spec.RECOVERY_CALL_CUT_BY_BUDGET, fill(spec.PARSE_DETAIL_CALL_CUT_BY_BUDGET, { name: item.name }));
    }
    if (item.kind.kind === ItemKind.Reasoning && this.text.length > 0) {
      // text input: count the tokens it stands for: <|message|>, the text, the stop
      const read = this.encoding.encode(text, { disallowedSpecial: new Set<string>() }).length;
      this.reasoningTokens += read + 1 + (status === Status.Completed ? 1 : 0);
    } else if (item.kind.kind === ItemKind.Reasoning) {
      // from the token that opened the body to the one that closed it
      this.reasoningTokens += this.parser.tokensRead - this.reasoningFrom;
    }
    const body = item.body(status, text);
    this.emit(item.kind.closing, item, { item: body, part: item.kind.part?.(text) ?? null, text, arguments: text });
    this.outputItems.push(body);
    this.item = null;
  }

  /** Send `events` in order, each given the fields of its model that `values` hold, and the item's place. */
  private emit(events: readonly EventSpec[], item: OpenItem, values: JsonObject): void {
    Object.assign(values, { item_id: item.id, output_index: item.outputIndex, content_index: 0 });
    for (const e of events) this.out.push(this.writer.event(eventOf(e, this.seq++, values)));
  }

  /** A finished call's arguments: `{}` for empty ones (one more delta), and a strict tool's check. */
  private checkArguments(item: OpenItem, text: string): string {
    const name = item.name ?? "";
    if (!strip(text)) {
      if (item.kind.delta !== null) this.out.push(this.writer.delta(item, this.seq++, EMPTY_ARGUMENTS));
      text += EMPTY_ARGUMENTS;
      this.repair(spec.RECOVERY_EMPTY_ARGUMENTS, fill(spec.PARSE_DETAIL_EMPTY_ARGUMENTS, { name }));
    }
    const schema = this.schemas.get(qualified(name, item.namespace));
    const found = schema !== undefined ? checkArguments(text, schema) : null;
    if (found !== null && found.valid !== true) {
      item.validation = found.toDict();
      const error = found.errors[0]?.message ?? "";
      this.repair(spec.RECOVERY_ARGUMENTS_INVALID, fill(spec.PARSE_DETAIL_ARGUMENTS_INVALID, { name, item: item.id, error }));
    }
    return text;
  }

  private repair(rule: string, detail: string): void {
    this.noteRepair(new Recovered(rule, detail, this.parser.tokensRead));
  }

  private noteRepair(repair: Recovered): void {
    this.repairList.push(repair);
    this.options.onRepair?.(repair);
  }
}

/** Completion tokens (or text) → typed Open Responses events; the options are `ResponseBuilder`'s. */
export class ResponseStreamer extends ResponseBuilder<StreamingEvent> {
  constructor(encoding: HarmonyEncoding, request: CreateResponseBody | null = null, options: BuilderOptions = {}) {
    super(encoding, request, EVENTS, options);
  }
}

export type Completion = Iterable<number> | Iterable<string>;

/** Options of `streamResponse` and `buildResponse`: `ResponseBuilder`'s, and the engine's finish reason. */
export interface StreamOptions extends BuilderOptions {
  /** What the engine said (see `ResponseBuilder.finish`): stopped on a stop token, cut by the budget, or unknown. */
  readonly stopped?: boolean | null;
}

/** Drive `builder` through a whole completion given as token ids or text chunks: what each step wrote. */
export function* drive<D, R>(builder: ResponseBuilder<D, R>, completion: Completion, stopped: boolean | null = null): Generator<R> {
  yield builder.start();
  for (const piece of completion as Iterable<number | string>) {
    yield typeof piece === "string" ? builder.feedText(piece) : builder.feed(piece);
  }
  yield builder.finish(stopped);
}

/** The typed event stream for a completion given as token ids or text chunks (`options`: `ResponseBuilder`'s, and
 * `stopped`, the engine's finish reason). */
export function* streamResponse(
  completion: Completion,
  encoding: HarmonyEncoding,
  request: CreateResponseBody | null = null,
  options: StreamOptions = {},
): Generator<StreamingEvent> {
  for (const events of drive(new ResponseStreamer(encoding, request, options), completion, options.stopped ?? null)) yield* events;
}

/** The final `ResponseResource` for a completion (the non-streaming case), given what `streamResponse` takes. */
export function buildResponse(...args: Parameters<typeof streamResponse>): ResponseResource {
  let last: StreamingEvent | null = null;
  for (const e of streamResponse(...args)) last = e;
  return (last as unknown as { response: ResponseResource }).response;
}
