/**
 * The reference-compatible incremental parser: same messages, per-token state and error texts.
 *
 * Strict mode (the default) and non-strict mode behave exactly as openai-harmony 0.0.8, defects included,
 * and exactly as the Python package's `StreamableParser`, token for token.
 */

import type { HarmonyEncoding } from "./encoding.js";
import { HarmonyError, recover, rethrow } from "./errors.js";
import type { JsonObject } from "./json.js";
import { Author, Message, TextContent } from "./models.js";
import { escapeRegExp, escapeText, fill } from "./texts.js";
import { type Role, Role as Roles, ROLE_VALUES, spec } from "./tables.js";
import { decodeReplacing, firstUtf8Problem } from "./utf8.js";

// A header whose bytes are not UTF-8: the spec does not hold this text yet (the Python parser spells it the same way).
const UNDECODABLE_HEADER = "could not decode header";

const REPLACEMENT = "\ufffd";
const TO = spec.HEADER_RECIPIENT_KEYWORD;
// Rust's char::is_whitespace (Unicode White_Space), as a regular-expression class body.
const UNICODE_WS = "\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const CHANNEL = new RegExp(`${escapeRegExp(spec.SPELLING_CHANNEL)}([^<${UNICODE_WS}]*)`); // the first one, and its value
const RUST_TRIM = new RegExp(`^[${UNICODE_WS}]+|[${UNICODE_WS}]+$`, "g");
const ASCII_WS = /[ \t\n\f\r]+/;

/** Where the parser is: before a message, in its header, or in its body. */
export enum StreamState {
  ExpectStart = "ExpectStart",
  Header = "Header",
  Content = "Content",
}

export class ParsedHeader {
  constructor(
    readonly author: Author,
    readonly recipient: string | null,
    readonly channel: string | null,
    readonly contentType: string | null,
  ) {}

  toDict(): JsonObject {
    const author: JsonObject = { role: this.author.role };
    if (this.author.name !== null) author["name"] = this.author.name; // the reference leaves an absent name out
    return { author, recipient: this.recipient, channel: this.channel, content_type: this.contentType };
  }
}

const RUST_ESCAPES: Readonly<Record<string, string>> = { '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0" };

/** A string as Rust's `{:?}` prints it (as the Python package approximates it). */
export function rustDebugStr(text: string): string {
  return '"' + escapeText(text, RUST_ESCAPES, (code) => `\\u{${code.toString(16)}}`) + '"';
}

/** Split a decoded header into author, channel, recipient and content type (reference rules); the words
 * left over, joined by spaces, or null. */
export function parseHeaderText(headerText: string, role: Role | null, parseRecipientAndType: boolean): [ParsedHeader, string | null] {
  const channel = CHANNEL.exec(headerText)?.[1] ?? null;
  if (channel === "") throw new HarmonyError(spec.ERR_PARSE_NO_CHANNEL_VALUE);
  const header = headerText.replace(CHANNEL, "").replace(RUST_TRIM, "");
  const constrain = spec.SPELLING_CONSTRAIN; // starts a word of its own
  const parts = header.replaceAll(constrain, " " + constrain).split(ASCII_WS).filter((p) => p !== "");
  const first = parts[0];
  let found: Role | null = role;
  if (found === null) {
    if (first === undefined) throw new HarmonyError(spec.ERR_PARSE_NO_ROLE);
    found = ROLE_VALUES.find((r) => r === first) ?? null;
    if (found === null) {
      // an unknown first word is a tool's name, when more follows or it names a recipient
      if (parts.length === 1 && !first.startsWith(TO)) throw new HarmonyError(fill(spec.ERR_PARSE_UNKNOWN_ROLE, { role: first }));
      parts.shift();
      found = Roles.Tool;
    }
  }
  if (parts.length > 0 && parts[0] === found) parts.shift();
  let recipient: string | null = null;
  let contentType: string | null = null;
  if (parseRecipientAndType && parts.length > 0) {
    const last = parts.pop() ?? "";
    const bare = (word: string): string => (word.startsWith(TO) ? word.slice(TO.length) : word);
    // a last word without `to=` after another word is the content type, and the word before it the recipient
    if (last.startsWith(TO) || parts.length === 0) recipient = bare(last);
    else [contentType, recipient] = [last, bare(parts.pop() ?? "")];
  }
  const remaining = parts.length > 0 ? parts.join(" ") : null;
  const author = new Author(found, found === Roles.Tool && role === null ? (first ?? null) : null); // a tool's name: the first word
  return [new ParsedHeader(author, recipient, channel, contentType), remaining];
}

const EMPTY = new Uint8Array(0);

/** The parser's observable state: `{"state": "ExpectStart"}`, the header tokens so far, or the header and
 * the body's tokens (re-encoded from the decoded text, as the reference does). */
export type StateData =
  | { readonly state: "ExpectStart" }
  | { readonly state: "Header"; readonly header_tokens: number[] }
  | { readonly state: "Content"; readonly header: JsonObject; readonly content_tokens: number[] };

/** Incremental parser over completion tokens, one `process(token)` at a time. */
export class StreamableParser {
  private stateValue: StreamState;
  private headerTokens: number[] = [];
  private header: ParsedHeader | null = null;
  private deltas: string[] = [];
  private readonly seen: number[] = [];
  private readonly done: (readonly [ParsedHeader, string])[] = []; // messages read: `messages` builds fresh objects from them
  private lastDelta: string | null = null;
  private undecodedTokens: number[] = [];
  private undecodedBytes: Uint8Array = EMPTY;

  constructor(
    private readonly encoding: HarmonyEncoding,
    private nextRole: Role | null,
    private readonly strict = true,
  ) {
    this.stateValue = nextRole !== null ? StreamState.Header : StreamState.ExpectStart;
  }

  // -- feeding ---------------------------------------------------------------------------------------------

  process(token: number): this {
    this.seen.push(token);
    this.step(token);
    return this;
  }

  processEos(): this {
    this.step(null);
    return this;
  }

  private step(token: number | null): void {
    const state = this.stateValue;
    if (state === StreamState.Content) {
      if (token !== null && !this.encoding.isStopToken(token)) this.contentToken(token);
      else this.finishContent();
    } else if (state === StreamState.Header) {
      if (token === spec.TOKEN_MESSAGE) {
        const tokens = this.headerTokens;
        this.stateValue = StreamState.ExpectStart;
        this.headerTokens = [];
        const text = rethrow(HarmonyError, () => this.encoding.decodeUtf8(tokens), () => new HarmonyError(UNDECODABLE_HEADER));
        const [header, rest] = parseHeaderText(text, this.nextRole, true);
        if (rest !== null) throw new HarmonyError(fill(spec.ERR_PARSE_HEADER_REMAINING, { rest: rustDebugStr(rest) }));
        this.header = header;
        this.nextRole = null;
        this.stateValue = StreamState.Content;
      } else if (token !== null && !this.strict && this.encoding.isStopToken(token)) {
        const role = this.nextRole;
        if (role !== null && this.headerTokens.length > 0) {
          const [header, rest] = parseHeaderText(this.encoding.decodeUtf8(this.headerTokens), role, false);
          this.done.push([header, rest ?? ""]);
        }
        this.headerTokens = [];
        this.stateValue = StreamState.ExpectStart;
        this.nextRole = null;
      } else if (token !== null) {
        this.headerTokens.push(token);
      } else {
        throw new HarmonyError(spec.ERR_PARSE_EOS_IN_HEADER);
      }
    } else if (token === spec.TOKEN_START) {
      this.headerTokens = [];
      this.stateValue = StreamState.Header;
    } else if (token !== null) {
      throw new HarmonyError(fill(spec.ERR_PARSE_EXPECTED_START, { token, start: spec.TOKEN_START }));
    }
  }

  private contentToken(token: number): void {
    this.undecodedTokens.push(token);
    const data = recover(HarmonyError, () => this.encoding.decodeBytes(this.undecodedTokens), () => null);
    if (data === null) {
      this.lastDelta = null;
      return;
    }
    const pending = this.undecodedBytes.length > 0 ? Buffer.concat([this.undecodedBytes, data]) : data;
    this.undecodedTokens = [];
    const problem = firstUtf8Problem(pending);
    // the text before the first problem (all of it when there is none) is this token's delta
    const end = problem?.start ?? pending.length;
    const delta = decodeReplacing(pending.subarray(0, end));
    if (delta !== "") this.deltas.push(delta);
    if (problem === null || problem.incomplete) {
      this.undecodedBytes = pending.subarray(end);
      this.lastDelta = delta !== "" ? delta : null;
    } else {
      // the reference keeps the replacement as a piece of its own (state data re-encodes pieces)
      this.deltas.push(REPLACEMENT);
      this.undecodedBytes = pending.subarray(end + problem.length);
      this.lastDelta = delta + REPLACEMENT;
    }
  }

  private finishContent(): void {
    const header = this.header;
    if (header === null) throw new Error("StreamableParser: in a body without a header");
    let text = this.deltas.join("");
    const undecoded = this.undecodedTokens;
    if (undecoded.length > 0) text += recover(HarmonyError, () => this.encoding.decodeUtf8(undecoded), () => REPLACEMENT);
    text += decodeReplacing(this.undecodedBytes);
    this.done.push([header, text]);
    this.stateValue = StreamState.ExpectStart;
    this.header = null;
    this.deltas = [];
    this.lastDelta = null;
    this.undecodedTokens = [];
    this.undecodedBytes = EMPTY;
  }

  // -- observing -------------------------------------------------------------------------------------------

  /** The header of the message being read, while in its body. */
  private get body(): ParsedHeader | null {
    return this.stateValue === StreamState.Content ? this.header : null;
  }

  get currentContent(): string {
    return this.stateValue === StreamState.Content ? this.deltas.join("") : "";
  }

  get currentRole(): Role | null {
    return this.body?.author.role ?? this.nextRole;
  }

  get currentChannel(): string | null {
    return this.body?.channel ?? null;
  }

  get currentRecipient(): string | null {
    return this.body?.recipient ?? null;
  }

  get currentContentType(): string | null {
    return this.body?.contentType ?? null;
  }

  get lastContentDelta(): string | null {
    return this.lastDelta;
  }

  /** The messages completed so far (copies). */
  get messages(): Message[] {
    return this.done.map(([{ author, channel, recipient, contentType }, text]) =>
      new Message(new Author(author.role, author.name), [new TextContent(text)], channel, recipient, contentType));
  }

  get tokens(): number[] {
    return [...this.seen];
  }

  get stateData(): StateData {
    if (this.stateValue === StreamState.Header) return { state: StreamState.Header, header_tokens: [...this.headerTokens] };
    if (this.stateValue === StreamState.Content && this.header !== null) {
      // the reference re-encodes each decoded delta
      const contentTokens = this.deltas.flatMap((delta) => this.encoding.encodeOrdinary(delta));
      return { state: StreamState.Content, header: this.header.toDict(), content_tokens: contentTokens };
    }
    return { state: StreamState.ExpectStart };
  }

  get state(): StreamState {
    return this.stateValue;
  }

  stateJson(): string {
    return JSON.stringify(this.stateData);
  }
}
