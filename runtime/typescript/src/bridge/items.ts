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
 * - the reasoning channel, or a channel the format does not know (hidden text is never shown) → `reasoning`; anything else → an assistant `message`, its phase by the channel's
 *   purpose.
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
 * (`harmony:repairs`). Where events go is the sink's business: `ResponseStreamer` collects typed events
 * (`streamResponse`, `buildResponse`); `sse.SSEStreamer` writes SSE text without building an event per delta.
 * Mirrors the Python package's `bridge/items.py`.
 */

import { randomBytes } from "node:crypto";

import type { CreateResponseBody, ResponseResource, StreamingEvent, Usage } from "#types";

import type { HarmonyEncoding } from "../encoding.js";
import { type JsonData, type JsonObject, JsonSyntaxError, readJson } from "../json.js";
import { fill, strip } from "../texts.js";
import { ContentDelta, type Event, HarmonyParseError, MessageEnd, MessageStart, Recovered } from "../stream/events.js";
import { HarmonyStreamParser, Region } from "../stream/parser.js";
import { ItemKind, ITEM_KIND_VALUES, Role, spec } from "../tables.js";
import { checkArguments } from "./arguments.js";
import { type RepairRecord, responseSnapshot, usage } from "./resource.js";
import { eventModelOf, fieldMember, itemModelOf, make, model } from "./schema.js";
import { declaredTools, namespaceTools, qualified } from "./tools.js";

export type IdFactory = (prefix: string) => string;
export type RepairHook = (repair: Recovered) => void;
const FUNCTIONS_PREFIX = spec.HEADER_FUNCTION_NAMESPACE + spec.HEADER_NAMESPACE_SEPARATOR;
const SEPARATOR = spec.HEADER_NAMESPACE_SEPARATOR;
const VALIDATION_FIELD = spec.RESPONSE_VALIDATION_FIELD;
const CHANNEL_FIELD = spec.RESPONSE_CHANNEL_FIELD; // where an item keeps the header the model wrote, when it must
const CONTENT_TYPE_FIELD = spec.RESPONSE_CONTENT_TYPE_FIELD;
const CALL_CHANNEL = spec.CHANNEL_TOOL_CALLS; // the header a function call is rendered back with, unless it says otherwise
const CALL_CONTENT_TYPE = spec.SPELLING_CONSTRAIN + spec.CONTENT_TYPE_FUNCTION_ARGUMENTS;
const EMPTY_ARGUMENTS = "{}"; // JSON's empty object: what a call without arguments passes
const JSON_OPENERS = "{["; // what JSON arguments begin with
const SPELLING_OPEN = spec.SPELLING_OPEN;
const SPECIALS = Object.keys(spec.NAMED_TOKENS).sort((a, b) => b.length - a.length);
const SERVER_ERROR = spec.ERRORS[spec.ERROR_MODEL_OUTPUT_INVALID]?.type ?? ""; // the type of an error in the output

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
    let cut = pending.lastIndexOf(SPELLING_OPEN);
    if (cut === -1 && pending.endsWith(SPELLING_OPEN[0] ?? "")) cut = pending.length - 1;
    let ready: string;
    const tail = cut !== -1 ? pending.slice(cut) : "";
    if (cut !== -1 && SPECIALS.some((s) => s.startsWith(tail)) && !SPECIALS.includes(tail)) {
      ready = pending.slice(0, cut);
      pending = tail;
    } else {
      ready = pending;
      pending = "";
    }
    if (ready) yield* encoding.encode(ready, { allowedSpecial: "all" });
  }
  if (pending) yield* encoding.encode(pending, { allowedSpecial: "all" });
}

// -- the item kinds, from the spec's table ---------------------------------------------------------------------

/** One kind of output item, as the spec's `ITEM_KINDS` describes it. */
export interface KindSpec {
  readonly kind: ItemKind;
  readonly type: string;
  readonly idPrefix: string;
  readonly callIdPrefix: string | null;
  readonly part: ((text: string) => JsonObject) | null; // text → the content part, for items that stream text
  readonly delta: string | null; // the event of a piece of text or of arguments
  readonly opening: Emitted; // the events the item opens with
  readonly closing: Emitted; // the events it ends with
}

/** Events to send: each one's type and the fields it is given (its model's, in order). */
type Emitted = readonly (readonly [string, readonly string[]])[];
const HEAD: ReadonlySet<string> = new Set(["type", "sequence_number"]);
const emitted = (types: readonly string[]): Emitted => types.map((t) => [t, model(eventModelOf(t)).fields.map((f) => f.key).filter((k) => !HEAD.has(k))]);

/** The item union the response's `output` holds. */
const OUTPUT_UNION = "ItemField";
const CONTENT_KEY = "content"; // the field of an output item that holds its content parts

/** A maker of the content part `partType` of an output item of wire type `itemType`: the part's model is the one
 * the item's `content` takes for that tag, and its other required lists start empty. */
function partMaker(itemType: string, partType: string): (text: string) => JsonObject {
  const name = fieldMember(itemModelOf(OUTPUT_UNION, itemType) ?? "", CONTENT_KEY, partType);
  const lists = model(name)
    .fields.filter((f) => f.required && f.type.kind === "list")
    .map((f) => f.key);
  return (text) => {
    const part: JsonObject = { type: partType, text };
    for (const key of lists) part[key] = [];
    return make(name, part);
  };
}

/** A kind's row of `ITEM_KINDS`, with its events from `EVENT_ORDER`: those before the repeated one (its deltas) when
 * it opens, the first alone when none repeats, the rest when it ends. */
function kindSpec(kind: ItemKind): KindSpec {
  const row = spec.ITEM_KINDS[kind];
  const order = spec.EVENT_ORDER[kind];
  if (row === undefined || order === undefined) throw new Error(`the spec has no item kind ${kind}`);
  const at = order.findIndex((name) => name.endsWith(spec.EVENT_REPEATS));
  return {
    kind,
    type: row.type,
    idPrefix: row.id_prefix,
    callIdPrefix: row.call_id_prefix,
    part: row.text !== null ? partMaker(row.type, row.text["part"] ?? "") : null,
    delta: at === -1 ? null : (order[at] ?? "").slice(0, -spec.EVENT_REPEATS.length),
    opening: emitted(order.slice(0, at === -1 ? 1 : at)),
    closing: emitted(order.slice(at === -1 ? 1 : at + 1)),
  };
}

export const KINDS: ReadonlyMap<ItemKind, KindSpec> = new Map(ITEM_KIND_VALUES.map((k) => [k, kindSpec(k)]));
const REASONING_CHANNEL = spec.CHANNEL_BY_PURPOSE[spec.ITEM_KINDS[ItemKind.Reasoning]?.channel_purpose ?? ""] ?? "";
const KNOWN_CHANNELS: ReadonlySet<string> = new Set(spec.CHANNELS);
const KIND_OF_NAMESPACE: ReadonlyMap<string, ItemKind> = new Map(
  ITEM_KIND_VALUES.flatMap((kind) => {
    const namespace = spec.ITEM_KINDS[kind]?.namespace;
    return namespace ? [[namespace, kind] as const] : [];
  }),
);
const PHASE_OF_CHANNEL: ReadonlyMap<string, string> = new Map(
  Object.entries(spec.ITEM_KINDS[ItemKind.Message]?.phases ?? {}).map(([purpose, phase]) => [spec.CHANNEL_BY_PURPOSE[purpose] ?? "", phase]),
);
const DEFAULT_PHASE = PHASE_OF_CHANNEL.get(spec.CHANNEL_ANSWER) ?? null;
const [CREATED = "", IN_PROGRESS = ""] = spec.STREAM_OPENING;

/** The kind of item a message becomes, by its recipient, author and channel; a call to a tool of one of the
 * request's namespace tools (`namespaces`) is a function call. */
export function kindOf(start: MessageStart, namespaces: ReadonlySet<string> = new Set()): ItemKind {
  const recipient = start.recipient;
  if (recipient !== null && recipient.startsWith(FUNCTIONS_PREFIX)) return ItemKind.FunctionCall;
  if (recipient !== null && start.role === Role.Assistant && namespaces.has(recipient.split(SEPARATOR, 1)[0] ?? "")) return ItemKind.FunctionCall;
  if (start.role !== Role.Assistant) return ItemKind.ToolCall;
  if (recipient !== null && recipient !== spec.HEADER_BROADCAST_RECIPIENT) {
    const at = recipient.indexOf(SEPARATOR);
    return KIND_OF_NAMESPACE.get(at === -1 ? recipient : recipient.slice(0, at)) ?? ItemKind.ToolCall;
  }
  const channel = start.channel;
  if (channel === REASONING_CHANNEL || (channel !== null && !KNOWN_CHANNELS.has(channel))) return ItemKind.Reasoning; // a channel the format does not know is hidden, as reasoning is
  return ItemKind.Message;
}

/** An event: its `type` and fields (the generated types name every member of the union). */
function event(type: string, fields: JsonObject): StreamingEvent {
  return { type, ...fields } as unknown as StreamingEvent;
}

/** An output item being streamed. */
export class OpenItem {
  callId: string | null = null;
  name: string | null = null;
  namespace: string | null = null; // a namespace tool's call: the namespace (`name` is the tool's own name)
  validation: JsonObject | null = null; // what checking a strict tool's arguments found, when they broke it
  wire: unknown = null; // whatever the sink keeps for this item (the SSE sink: its delta frame's pieces)
  readonly reasoning: boolean;
  readonly streams: boolean; // its text or arguments go out as deltas

  constructor(
    readonly spec: KindSpec,
    readonly id: string,
    readonly outputIndex: number,
    readonly channel: string | null,
    readonly recipient: string | null,
    readonly contentType: string | null = null,
  ) {
    this.reasoning = spec.kind === ItemKind.Reasoning;
    this.streams = spec.delta !== null;
  }

  /** The item as the spec's model: empty while in progress, with its whole `text` when it ends. */
  body(status: Status, text = ""): JsonObject {
    const kind = this.spec.kind;
    const done = status !== Status.InProgress;
    const part = this.spec.part;
    if (kind === ItemKind.Reasoning) {
      const reasoning: JsonObject = { type: this.spec.type, id: this.id, summary: [], content: done && part !== null ? [part(text)] : [] };
      if (this.contentType !== null) reasoning[CONTENT_TYPE_FIELD] = this.contentType;
      return reasoning;
    }
    if (kind === ItemKind.Message) {
      const phase = PHASE_OF_CHANNEL.get(this.channel ?? "") ?? DEFAULT_PHASE;
      const message: JsonObject = { type: this.spec.type, id: this.id, status, role: Role.Assistant, content: done && part !== null ? [part(text)] : [], phase };
      // its phase would render it on another channel (or none)
      if (this.channel === null || !PHASE_OF_CHANNEL.has(this.channel)) message[CHANNEL_FIELD] = this.channel;
      if (this.contentType !== null) message[CONTENT_TYPE_FIELD] = this.contentType;
      return message;
    }
    if (kind === ItemKind.FunctionCall) {
      const call: JsonObject = { type: this.spec.type, id: this.id, call_id: this.callId ?? "", name: this.name ?? "", arguments: text, status };
      if (this.channel !== CALL_CHANNEL) call[CHANNEL_FIELD] = this.channel;
      if (this.contentType !== CALL_CONTENT_TYPE) call[CONTENT_TYPE_FIELD] = this.contentType;
      if (this.validation !== null && done) call[VALIDATION_FIELD] = this.validation;
      if (this.namespace !== null) call[spec.RESPONSE_NAMESPACE_FIELD] = this.namespace;
      return call;
    }
    // A vendor-prefixed item: every key besides `type` is an extra field.
    return {
      type: this.spec.type,
      id: this.id,
      status,
      recipient: this.recipient,
      arguments: text,
      channel: this.channel,
      content_type: this.contentType,
    };
  }
}

/** Where a builder's events go. */
export interface Sink<D> {
  event(event: StreamingEvent): void;
  /** Keep a delta, after the events kept before it. */
  delta(item: OpenItem, sequenceNumber: number, text: string): void;
  /** Make a delta and return it instead of keeping it (nothing is kept when this is called). */
  handDelta(item: OpenItem, sequenceNumber: number, text: string): D;
  /** Keep a delta `handDelta` made (for a caller of `feedToken` that does not send it itself). */
  keep(delta: D): void;
}

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
  readonly onRepair?: RepairHook | null;
}

/** How many tool calls the request lets one response make (null: no limit). */
function callsAllowed(request: CreateResponseBody | null): number | null {
  if (request === null) return null;
  const most = request.max_tool_calls as number | bigint | null | undefined; // a big integer stays a bigint
  const limits = [request.parallel_tool_calls === false ? 1 : null, most === null || most === undefined ? null : Number(most)].filter((n): n is number => !!n);
  return limits.length > 0 ? Math.min(...limits) : null;
}

function repairRecord(r: Recovered): RepairRecord {
  return { rule: r.rule, detail: r.detail, position: r.position, text: r.text };
}

/**
 * Completion tokens or text → the response's events, sent to `sink` in the spec's order.
 *
 * `request` is the request the completion answers (its settings are echoed; its function names feed the parser's
 * repairs, its strict tools' schemas check their calls). `inputTokens` is the prompt's length, for `usage`.
 * `role: null` reads a completion that starts with its own `<|start|>`; by default the completion is read as one
 * turn (several calls, each an item, when the engine did not stop at `<|call|>`, up to the request's
 * `max_tool_calls`, and one with `parallel_tool_calls: false`; a tool result the model wrote itself cut and
 * reported; nothing after `<|return|>`), and `stopAtTurnEnd: false` reads a whole transcript. `strict: true` fails
 * the response on the first deviation from the grammar instead of repairing it.
 */
export class ResponseBuilder<D> {
  readonly responseId: string;
  private readonly parser: HarmonyStreamParser;
  private readonly schemas: ReadonlyMap<string, JsonObject>; // strict tools' `parameters`, by qualified name
  private readonly namespaces: ReadonlySet<string>; // the request's namespace tools' names
  private readonly model: string;
  private readonly ids: IdFactory;
  private readonly clock: () => number;
  private readonly onRepair: RepairHook | null;
  private readonly inputTokens: number;
  private readonly createdAt: number;
  private seq = 0;
  private readonly outputItems: JsonObject[] = []; // finished items
  private item: OpenItem | null = null;
  private readonly repairList: Recovered[] = [];
  private reasoningTokens = 0; // of the reasoning items closed so far
  private reasoningFrom = 0; // the token that opened the reasoning item being read
  private readonly text: string[] = []; // completion text, when it came as text (for usage)
  private started = false;
  private finishedFlag = false;
  private finalResponse: ResponseResource | null = null;
  private statusValue: Status = Status.InProgress;

  constructor(
    private readonly encoding: HarmonyEncoding,
    private readonly request: CreateResponseBody | null,
    private readonly sink: Sink<D>,
    options: BuilderOptions = {},
  ) {
    const declared = declaredTools(request);
    const names = options.tools ?? declared.filter((d) => d.namespace === null).map((d) => d.name);
    this.schemas = new Map(declared.filter((d) => d.tool.strict === true).map((d) => [d.name, (d.tool.parameters ?? {}) as unknown as JsonObject]));
    this.namespaces = new Set(namespaceTools(request).map((t) => t.name));
    this.parser = new HarmonyStreamParser(encoding, options.role === undefined ? Role.Assistant : options.role, options.strict ? "strict" : "lenient", names, {
      stopAtTurnEnd: options.stopAtTurnEnd ?? true,
      maxToolCalls: callsAllowed(request),
    });
    this.model = options.model ?? "gpt-oss";
    this.ids = options.ids ?? randomId;
    this.clock = options.clock ?? ((): number => Date.now() / 1000);
    this.onRepair = options.onRepair ?? null;
    this.inputTokens = options.inputTokens ?? 0;
    this.responseId = options.responseId || this.ids(spec.RESPONSE_ID_PREFIX);
    this.createdAt = options.createdAt ?? Math.floor(this.clock());
  }

  // -- state -------------------------------------------------------------------------------------------------

  get finished(): boolean {
    return this.finishedFlag;
  }

  /** The response its closing event carried (completed, incomplete or failed), once it ended. */
  get final(): ResponseResource | null {
    return this.finalResponse;
  }

  get status(): Status {
    return this.statusValue;
  }

  /** The item whose body is being read, if any. */
  get currentItem(): OpenItem | null {
    return this.item;
  }

  /** The items finished so far, in order. */
  get output(): JsonObject[] {
    return [...this.outputItems];
  }

  /** Tokens of the completion read so far (for text input: counted when asked). */
  get outputTokens(): number {
    return this.text.length > 0 ? this.usage().output_tokens : this.parser.tokensRead;
  }

  get repairs(): Recovered[] {
    return [...this.repairList];
  }

  nextSequenceNumber(): number {
    return this.seq++;
  }

  /** The response as it stands (an open item is included as `incomplete` unless in progress). */
  snapshot(status: Status, extra: { usage?: Usage; error?: JsonObject; incompleteReason?: string; completedAt?: number } = {}): ResponseResource {
    const output = [...this.outputItems];
    if (this.item !== null && status !== Status.InProgress) output.push(this.item.body(Status.Incomplete, this.parser.currentContent));
    const repairs = status !== Status.InProgress ? this.repairList.map(repairRecord) : null;
    return responseSnapshot(this.request, {
      responseId: this.responseId,
      createdAt: this.createdAt,
      model: this.model,
      status,
      output,
      repairs,
      ...(extra.usage !== undefined ? { usage: extra.usage } : {}),
      ...(extra.error !== undefined ? { error: extra.error } : {}),
      ...(extra.incompleteReason !== undefined ? { incompleteReason: extra.incompleteReason } : {}),
      ...(extra.completedAt !== undefined ? { completedAt: extra.completedAt } : {}),
    });
  }

  usage(): Usage {
    let outputTokens = this.parser.tokensRead;
    let reasoningTokens = this.reasoningTokens;
    if (this.item !== null && this.item.reasoning && this.text.length === 0) reasoningTokens += outputTokens - this.reasoningFrom;
    if (this.text.length > 0) outputTokens = this.encoding.encode(this.text.join(""), { allowedSpecial: "all" }).length; // the completion came as text: count its tokens now
    return usage(this.inputTokens, outputTokens, reasoningTokens);
  }

  // -- input -------------------------------------------------------------------------------------------------

  /** `response.created` and `response.in_progress` (sent once, before anything else). */
  start(): void {
    if (this.started) return;
    this.started = true;
    const snap = this.snapshot(Status.InProgress) as unknown as JsonData;
    this.sink.event(event(CREATED, { sequence_number: this.nextSequenceNumber(), response: snap }));
    this.sink.event(event(IN_PROGRESS, { sequence_number: this.nextSequenceNumber(), response: snap }));
  }

  /** One more completion token. When it is plain text continuing a streamed body (the fast path), its delta is
   * made by the sink's `handDelta` and returned; otherwise the events go to the sink, and the result is null. */
  feedToken(token: number): D | null {
    const item = this.item; // set only while an item's body is streaming
    if (item !== null) {
      const text = this.parser.feedBodyToken(token);
      if (text !== null) {
        // the fast path: plain text continuing the body
        return item.streams ? this.sink.handDelta(item, this.seq++, text) : null;
      }
    } else if (this.finishedFlag) return null;
    else if (!this.started) this.start();
    let events: Event[];
    try {
      events = this.parser.feedTokens([token]);
    } catch (e) {
      if (!(e instanceof HarmonyParseError)) throw e;
      this.failParse(e);
      return null;
    }
    this.handle(events);
    return null;
  }

  /** A chunk of completion text, control tokens spelled out (for engines that return no ids). */
  feedText(chunk: string): void {
    if (this.finishedFlag) return;
    if (!this.started) this.start();
    this.text.push(chunk);
    let events: Event[];
    try {
      events = this.parser.feedText(chunk);
    } catch (e) {
      if (!(e instanceof HarmonyParseError)) throw e;
      this.failParse(e);
      return;
    }
    this.handle(events);
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
  finish(stopped: boolean | null = null): void {
    if (this.finishedFlag) return;
    if (!this.started) this.start();
    const region = this.parser.region;
    let cut = region === Region.Body || region === Region.Header || region === Region.Stripped; // inside a message
    cut = cut && (this.parser.tokensRead > 0 || this.text.some((t) => t !== "")); // an empty completion is not cut
    if (stopped === null) stopped = !cut || (this.text.length > 0 && this.stopTokenMayEndIt());
    let events: Event[];
    try {
      events = this.parser.close();
    } catch (e) {
      if (!(e instanceof HarmonyParseError)) throw e;
      events = []; // strict mode, a header cut short: that is the budget's doing, not a failure
    }
    this.handle(events, stopped ? Status.Completed : Status.Incomplete);
    this.finishedFlag = true;
    if (this.item !== null) this.close(stopped ? Status.Completed : Status.Incomplete, this.parser.currentContent);
    if (!stopped) this.closeResponse(Status.Incomplete, { incompleteReason: spec.RESPONSE_INCOMPLETE_REASON });
    else this.closeResponse(Status.Completed, { completedAt: Math.floor(this.clock()) });
  }

  private closeResponse(status: Status, extra: { error?: JsonObject; incompleteReason?: string; completedAt?: number }): void {
    this.statusValue = status;
    const snap = this.snapshot(status, { usage: this.usage(), ...extra });
    this.finalResponse = snap;
    this.sink.event(event(spec.STREAM_CLOSING[status] ?? "", { sequence_number: this.nextSequenceNumber(), response: snap as unknown as JsonData }));
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
    if (item.spec.part !== null) return !item.reasoning;
    if (!JSON_OPENERS.includes(text[0] as string)) return true;
    try {
      readJson(text);
    } catch (e) {
      if (e instanceof JsonSyntaxError) return false; // cut inside the JSON
      throw e;
    }
    return true;
  }

  /** End with `error` and `response.failed` (the engine went away, or the output is not Harmony). `code` and
   * `errorType` are the error's on the wire; `errorType` defaults to the spec's for `code`. */
  fail(message: string, code: string = spec.ERROR_MODEL_OUTPUT_INVALID, errorType: string | null = null): void {
    if (this.finishedFlag) return;
    if (!this.started) this.start();
    this.finishedFlag = true;
    const type = errorType ?? spec.ERRORS[code]?.type ?? SERVER_ERROR;
    const payload = make("ErrorPayload", { type, code, message, param: null });
    this.sink.event(event(spec.STREAM_ERROR, { sequence_number: this.nextSequenceNumber(), error: payload }));
    this.closeResponse(Status.Failed, { error: make("Error", { code, message }) });
  }

  // -- parser events → item events ---------------------------------------------------------------------------

  private failParse(exc: HarmonyParseError): void {
    const template = spec.ERRORS[spec.ERROR_MODEL_OUTPUT_INVALID]?.message ?? "{detail}";
    this.fail(fill(template, { detail: exc.message }));
  }

  private handle(events: readonly Event[], eosStatus: Status = Status.Incomplete): void {
    for (const e of events) {
      if (e instanceof ContentDelta) {
        const item = this.item;
        if (item !== null && item.streams) this.sink.delta(item, this.nextSequenceNumber(), e.text);
      } else if (e instanceof MessageStart) {
        this.open(e);
      } else if (e instanceof MessageEnd) {
        const endedByStream = e.terminator === spec.PARSE_EOS_TERMINATOR;
        this.close(endedByStream ? eosStatus : Status.Completed, e.message.content);
      } else {
        this.repairList.push(e);
        if (this.onRepair !== null) this.onRepair(e);
      }
    }
  }

  private open(start: MessageStart): OpenItem {
    const kind = KINDS.get(kindOf(start, this.namespaces)) as KindSpec;
    const item = new OpenItem(kind, this.ids(kind.idPrefix), this.outputItems.length, start.channel, start.recipient, start.contentType);
    if (kind.kind === ItemKind.FunctionCall) {
      item.callId = this.ids(kind.callIdPrefix ?? kind.idPrefix);
      const to = start.recipient ?? "";
      if (to.startsWith(FUNCTIONS_PREFIX)) item.name = to.slice(FUNCTIONS_PREFIX.length);
      else {
        const at = to.indexOf(SEPARATOR);
        item.namespace = to.slice(0, at);
        item.name = to.slice(at + SEPARATOR.length);
      }
    }
    this.item = item;
    this.reasoningFrom = this.parser.tokensRead - 1;
    this.emit(kind.opening, item, { item: item.body(Status.InProgress), part: kind.part !== null ? kind.part("") : null });
    return item;
  }

  private close(status: Status, text: string): void {
    const item = this.item;
    if (item === null) throw new Error("ResponseBuilder: no item is open");
    const kind = item.spec;
    if (kind.kind === ItemKind.FunctionCall && status === Status.Completed) text = this.checkArguments(item, text);
    else if (kind.kind === ItemKind.FunctionCall && status === Status.Incomplete) {
      this.repair(spec.RECOVERY_CALL_CUT_BY_BUDGET, fill(spec.PARSE_DETAIL_CALL_CUT_BY_BUDGET, { name: item.name }));
    }
    if (item.reasoning) {
      if (this.text.length > 0) {
        // text input: count the tokens it stands for: <|message|>, the text, the stop
        this.reasoningTokens += this.encoding.encode(text, { disallowedSpecial: new Set<string>() }).length + 1 + (status === Status.Completed ? 1 : 0);
      } else {
        this.reasoningTokens += this.parser.tokensRead - this.reasoningFrom; // from the token that opened the body to the one that closed it
      }
    }
    const body = item.body(status, text);
    this.emit(kind.closing, item, { item: body, part: kind.part !== null ? kind.part(text) : null, text, arguments: text });
    this.outputItems.push(body);
    this.item = null;
  }

  /** Send `events` in order, each given the fields of its model that `values` hold (null: not given), and the
   * item's place. */
  private emit(events: Emitted, item: OpenItem, values: JsonObject): void {
    Object.assign(values, { item_id: item.id, output_index: item.outputIndex, content_index: 0 });
    for (const [type, fields] of events) {
      const given: JsonObject = { sequence_number: this.nextSequenceNumber() };
      for (const key of fields) if (values[key] !== undefined && values[key] !== null) given[key] = values[key];
      this.sink.event(event(type, given));
    }
  }

  /** A finished call's arguments: `{}` for empty ones (one more delta), and a strict tool's check. */
  private checkArguments(item: OpenItem, text: string): string {
    const name = item.name ?? "";
    if (!strip(text)) {
      if (item.streams) this.sink.delta(item, this.nextSequenceNumber(), EMPTY_ARGUMENTS);
      text += EMPTY_ARGUMENTS;
      this.repair(spec.RECOVERY_EMPTY_ARGUMENTS, fill(spec.PARSE_DETAIL_EMPTY_ARGUMENTS, { name }));
    }
    const schema = this.schemas.get(qualified(name, item.namespace));
    if (schema !== undefined) {
      const found = checkArguments(text, schema);
      if (found.valid !== true) {
        item.validation = found.toDict();
        const error = found.errors[0]?.message ?? "";
        this.repair(spec.RECOVERY_ARGUMENTS_INVALID, fill(spec.PARSE_DETAIL_ARGUMENTS_INVALID, { name, item: item.id, error }));
      }
    }
    return text;
  }

  private repair(rule: string, detail: string): void {
    const repair = new Recovered(rule, detail, this.parser.tokensRead);
    this.repairList.push(repair);
    if (this.onRepair !== null) this.onRepair(repair);
  }
}

// -- typed events ------------------------------------------------------------------------------------------------

const CONTENT_INDEX = "content_index";

/** A sink that keeps typed events until they are taken. */
export class EventSink implements Sink<StreamingEvent> {
  events: StreamingEvent[] = [];

  event(e: StreamingEvent): void {
    this.events.push(e);
  }

  /** Keep a delta `handDelta` made (a caller of `ResponseBuilder.feedToken` that wants it kept). */
  keep(e: StreamingEvent): void {
    this.events.push(e);
  }

  delta(item: OpenItem, sequenceNumber: number, text: string): void {
    this.events.push(this.handDelta(item, sequenceNumber, text));
  }

  handDelta(item: OpenItem, sequenceNumber: number, text: string): StreamingEvent {
    let base = item.wire as JsonObject | null;
    if (base === null) {
      // the fields every delta of `item` shares, as its event's model has them
      const type = item.spec.delta ?? "";
      base = { item_id: item.id, output_index: item.outputIndex };
      if (model(eventModelOf(type)).byKey.has(CONTENT_INDEX)) base[CONTENT_INDEX] = 0;
      item.wire = base;
    }
    return event(item.spec.delta ?? "", { sequence_number: sequenceNumber, ...base, delta: text });
  }

  take(): StreamingEvent[] {
    const events = this.events;
    this.events = [];
    return events;
  }
}

/** A sink that keeps nothing: for a caller that wants only the final response (`ResponseBuilder.final`). */
export class NullSink implements Sink<null> {
  event(): void {}

  delta(): void {}

  handDelta(): null {
    return null;
  }

  keep(): void {}
}

/** Completion tokens (or text) → typed Open Responses events: `feed`, `feedText`, `finish`, `fail`. Each call
 * returns the events it caused, in order; the options are `ResponseBuilder`'s. */
export class ResponseStreamer {
  private readonly sink = new EventSink();
  private readonly builder: ResponseBuilder<StreamingEvent>;

  constructor(encoding: HarmonyEncoding, request: CreateResponseBody | null = null, options: BuilderOptions = {}) {
    this.builder = new ResponseBuilder(encoding, request, this.sink, options);
  }

  get responseId(): string {
    return this.builder.responseId;
  }

  get repairs(): Recovered[] {
    return this.builder.repairs;
  }

  snapshot(status: Status): ResponseResource {
    return this.builder.snapshot(status);
  }

  start(): StreamingEvent[] {
    this.builder.start();
    return this.sink.take();
  }

  feed(token: number): StreamingEvent[] {
    const delta = this.builder.feedToken(token);
    return delta !== null ? [delta] : this.sink.take();
  }

  feedText(chunk: string): StreamingEvent[] {
    this.builder.feedText(chunk);
    return this.sink.take();
  }

  finish(stopped: boolean | null = null): StreamingEvent[] {
    this.builder.finish(stopped);
    return this.sink.take();
  }

  fail(message: string, code: string = spec.ERROR_MODEL_OUTPUT_INVALID, errorType: string | null = null): StreamingEvent[] {
    this.builder.fail(message, code, errorType);
    return this.sink.take();
  }
}

/** A completion given as token ids or as text chunks. */
export type Completion = Iterable<number> | Iterable<string>;

/** Feed a completion given as token ids or as text chunks (each piece by its own kind). */
export function* feedAll<T>(completion: Completion, feedToken: (token: number) => T, feedText: (chunk: string) => T): Generator<T> {
  for (const piece of completion as Iterable<number | string>) yield typeof piece === "string" ? feedText(piece) : feedToken(piece);
}

/** Options of `streamResponse` and `buildResponse`: `ResponseBuilder`'s, and the engine's finish reason. */
export interface StreamOptions extends BuilderOptions {
  /** What the engine said (see `ResponseBuilder.finish`): stopped on a stop token, cut by the budget, or unknown. */
  readonly stopped?: boolean | null;
}

/** The typed event stream for a completion given as token ids or text chunks (`options`: `ResponseBuilder`'s, and
 * `stopped`, the engine's finish reason). */
export function* streamResponse(
  completion: Completion,
  encoding: HarmonyEncoding,
  request: CreateResponseBody | null = null,
  options: StreamOptions = {},
): Generator<StreamingEvent> {
  const streamer = new ResponseStreamer(encoding, request, options);
  yield* streamer.start();
  for (const events of feedAll(completion, (t) => streamer.feed(t), (c) => streamer.feedText(c))) yield* events;
  yield* streamer.finish(options.stopped ?? null);
}

/** The final `ResponseResource` for a completion (the non-streaming case). */
export function buildResponse(
  completion: Completion,
  encoding: HarmonyEncoding,
  request: CreateResponseBody | null = null,
  options: StreamOptions = {},
): ResponseResource {
  let last: StreamingEvent | null = null;
  for (const e of streamResponse(completion, encoding, request, options)) last = e;
  return (last as unknown as { response: ResponseResource }).response;
}
