/**
 * `HarmonyStreamParser`: Harmony completions → events, from token ids or text, strictly or leniently.
 *
 * The lexer (`lexer.ts`) turns the input into control terminals and text; this module decides, by the region the
 * parser is in (`Region`), what each piece is: outside a message, text is set aside (lenient) or an error
 * (strict); in a header it goes to the `HeaderReader` (`header.ts`); in a body it is content, and so is any
 * control token the grammar does not accept there. The generated LALR tables (`lalr.IncrementalParser`) follow
 * the whole stream, so every structural decision is the grammar's.
 *
 * Events: `MessageStart` once a header is complete, `ContentDelta` for each piece of body text as it arrives,
 * `MessageEnd` with the whole message and its terminator, and, in lenient mode, `Recovered` for every repair
 * (`RECOVERY_RULES`). Strict mode throws `HarmonyParseError` where the input leaves the grammar. Lenient mode
 * never throws on model output and never drops text. Mirrors the Python package's `stream/parser.py`, event for
 * event and position for position.
 */

import type { HarmonyEncoding } from "../encoding.js";
import { GrammarError, IncrementalParser } from "../lalr.js";
import { parseRole } from "../models.js";
import { pyFormat, pyRepr } from "../pyformat.js";
import { cpPrefix, escapeRegExp, PY_WHITESPACE, strip } from "../pytext.js";
import { grammar, type Role, Role as Roles, spec, Terminator, TERMINATOR_VALUES } from "../tables.js";
import { ContentDelta, type Event, HarmonyParseError, MessageEnd, MessageStart, type Mode, ParsedMessage, Recovered } from "./events.js";
import { applyDeclaredTools, Header, HeaderReader, reduceHeader, ROLES, T_CHANNEL, T_MESSAGE, T_START } from "./header.js";
import { CONTROL_TERMINALS, spellingOf, TextLexer, TokenLexer } from "./lexer.js";

const TEXT = grammar.LEXER_TERMINAL_TEXT;

function terminator(value: string): Terminator {
  const found = TERMINATOR_VALUES.find((t) => t === value);
  if (found === undefined) throw new Error(`the spec names no terminator ${value}`);
  return found;
}

const TERMINATOR_OF: ReadonlyMap<string, Terminator> = new Map(
  [...CONTROL_TERMINALS]
    .filter(([id]) => spec.TERMINATORS[id] !== undefined)
    .map(([id, t]) => [t, terminator(spec.TERMINATORS[id] as string)]),
);
const EOS = terminator(spec.PARSE_EOS_TERMINATOR);
const TURN_ENDS: ReadonlySet<Terminator> = new Set(spec.STOP_TOKENS_FOR_ASSISTANT_ACTIONS.map((id) => terminator(spec.TERMINATORS[id] as string)));
const NOT_SPACE = `[^${PY_WHITESPACE}]`;
const STRIPPED_RE = new RegExp(
  `(?:^|${escapeRegExp(Roles.Assistant)})(${spec.CHANNELS.map(escapeRegExp).join("|")})` +
    `(?: ${escapeRegExp(spec.HEADER_RECIPIENT_KEYWORD)}(${NOT_SPACE}+?))?` +
    `(?: (${spec.CONTENT_TYPES.map(escapeRegExp).join("|")}))?(?=${NOT_SPACE})`,
  "gu",
);

/** Where in the stream the parser is. */
export enum Region {
  Outside, // between messages
  Header, // after `<|start|>`, before `<|message|>`
  Body, // after `<|message|>`, before a stop token
  Stopped, // after a tool call or a turn's end, when asked to stop there
}

/** Options of `HarmonyStreamParser` beyond role, mode and tools. */
export interface StreamParserOptions {
  readonly stopAfterToolCall?: boolean;
  readonly stopAtTurnEnd?: boolean;
}

/**
 * Feed token ids or text in any chunks; get events back. Call `close()` at the end of the stream.
 *
 * `role` is the role of the message the completion starts in (the prompt ended with `<|start|>ROLE`), or null when
 * the completion starts with `<|start|>`. `tools` are the declared function names (without the function
 * namespace), used by the lenient repairs of recipients. `stopAfterToolCall` sets aside what follows the first
 * completed tool call by the assistant; `stopAtTurnEnd` what follows any message ended by a token that ends the
 * model's turn (`<|call|>`, `<|return|>`).
 */
export class HarmonyStreamParser {
  private readonly lenient: boolean;
  private readonly role: Role | null;
  private readonly tools: ReadonlySet<string>;
  private readonly stopAfterCall: boolean;
  private readonly stopAtTurnEnd: boolean;
  private stopRule = spec.RECOVERY_AFTER_TOOL_CALL;
  private readonly lalr = new IncrementalParser(reduceHeader);
  private readonly header: HeaderReader;
  private readonly tokenLexer: TokenLexer;
  private readonly known: ReadonlyMap<number, string | null>;
  private readonly textLexer: TextLexer;
  private out: Event[] = [];
  private unit = spec.PARSE_UNIT_TOKENS;
  private pos = 0; // where the piece being handled began
  private index = 0; // the next message's index
  private regionValue = Region.Outside;
  private current: Header | null = null; // the header of the message whose body is open
  private msgRole: Role = Roles.Assistant;
  private msgName: string | null = null;
  private body: string[] = [];
  private bodyRun = false; // the body's text has been announced to the grammar
  private junk: string[] = [];
  private junkPos = 0;
  private seenControl = false;
  private last: ParsedMessage | null = null;
  private closed = false;

  constructor(
    encoding: HarmonyEncoding,
    role: Role | string | null = Roles.Assistant,
    mode: Mode = "strict",
    tools: Iterable<string> | null = null,
    options: StreamParserOptions = {},
  ) {
    if (mode !== "strict" && mode !== "lenient") throw new RangeError(`mode must be 'strict' or 'lenient', not ${pyRepr(String(mode))}`);
    this.lenient = mode === "lenient";
    this.role = role !== null ? parseRole(role) : null;
    this.tools = new Set(tools ?? []);
    this.stopAfterCall = options.stopAfterToolCall ?? false;
    this.stopAtTurnEnd = options.stopAtTurnEnd ?? false;
    this.header = new HeaderReader(
      this.lalr,
      this.lenient,
      this.role,
      (rule, detail, text, position) => this.report(rule, detail, text, position),
      (message, position) => this.fail(message, position),
    );
    this.tokenLexer = new TokenLexer(encoding, this);
    this.known = this.tokenLexer.knownTexts;
    this.textLexer = new TextLexer(this);
    if (this.role !== null) {
      this.header.open(this.role);
      this.regionValue = Region.Header;
    }
  }

  // -- input -------------------------------------------------------------------------------------------------

  get region(): Region {
    return this.regionValue;
  }

  /** How many token ids were fed (`feedTokens` and `feedBodyToken`). */
  get tokensRead(): number {
    return this.tokenLexer.position;
  }

  /** The text of the body being read so far ("" outside a body). */
  get currentContent(): string {
    return this.regionValue === Region.Body ? this.body.join("") : "";
  }

  /** Feed completion token ids; the events they cause. */
  feedTokens(tokens: Iterable<number>): Event[] {
    const out: Event[] = (this.out = []);
    this.unit = spec.PARSE_UNIT_TOKENS;
    this.tokenLexer.feed(tokens);
    return out;
  }

  /** A fast path for servers: if `token` is plain text continuing the open body, take it and return its text (the
   * one `ContentDelta` it would cause is not built); otherwise take nothing and return null, and the caller feeds
   * the token with `feedTokens`. The parser's state is the same either way. */
  feedBodyToken(token: number): string | null {
    const lexer = this.tokenLexer;
    if (!this.bodyRun || lexer.pending) return null; // bodyRun: inside a body whose text the grammar knows of
    const text = this.known.get(token);
    if (text) {
      lexer.skip();
      this.body.push(text);
    }
    return text ?? null;
  }

  /** Feed detokenized text with control tokens spelled out, in any chunks. */
  feedText(text: string): Event[] {
    this.unit = spec.PARSE_UNIT_TEXT;
    const lexer = this.textLexer;
    if (this.bodyRun && text && lexer.plain(text)) {
      // body text and nothing else: the fast path
      lexer.skip(text);
      this.body.push(text);
      return [new ContentDelta(this.index, text)];
    }
    const out: Event[] = (this.out = []);
    lexer.feed(text);
    return out;
  }

  /** Feed UTF-8 bytes of such text, split anywhere (even inside a character). */
  feedBytes(data: Uint8Array): Event[] {
    const out: Event[] = (this.out = []);
    this.unit = spec.PARSE_UNIT_TEXT;
    this.textLexer.feedBytes(data);
    return out;
  }

  /** End of stream: ends an open message (terminator `eos`), or reports an incomplete one. */
  close(): Event[] {
    const out: Event[] = (this.out = []);
    this.textLexer.finish();
    this.tokenLexer.finish();
    if (this.closed) return out;
    this.closed = true;
    const end = this.unit === spec.PARSE_UNIT_TEXT ? this.textLexer.position : this.tokenLexer.position;
    this.pos = end;
    if (this.regionValue === Region.Stopped) {
      this.flushJunk();
      return out;
    }
    if (this.lenient && !this.seenControl) {
      if (this.strippedFallback()) return out;
      if (this.regionValue === Region.Header && this.header.virtual && strip(this.header.pendingText())) {
        this.unstructuredText();
        return out;
      }
    }
    this.flushJunk();
    if (this.regionValue === Region.Header) {
      if (!this.lenient) this.fail(spec.PARSE_ERR_EOF_IN_HEADER, end);
      this.dropHeader(spec.RECOVERY_EOF_IN_HEADER, spec.PARSE_DETAIL_EOF_IN_HEADER, end);
    }
    if (this.regionValue === Region.Body) {
      this.lalr.feedEof();
      this.endMessage(EOS);
      return out;
    }
    if (this.regionValue === Region.Outside) {
      try {
        this.lalr.feedEof();
      } catch (e) {
        if (!(e instanceof GrammarError)) throw e;
        this.fail(e.message, end); // only reachable in strict mode
      }
    }
    return out;
  }

  // -- what the lexers find (the lexer's Sink) --------------------------------------------------------------

  onText(text: string, position: number): void {
    this.pos = position;
    const region = this.regionValue;
    if (region === Region.Body) {
      if (!this.bodyRun) {
        this.lalr.feedToken(TEXT);
        this.bodyRun = true;
      }
      this.body.push(text);
      this.out.push(new ContentDelta(this.index, text));
    } else if (region === Region.Header) {
      this.header.addText(text, position);
    } else {
      if (this.junk.length === 0) this.junkPos = position;
      this.junk.push(text);
      if (region === Region.Outside && !this.lenient) {
        this.fail(pyFormat(spec.PARSE_ERR_TEXT_OUTSIDE, { text: cpPrefix(text, 40), start: spellingOf(T_START) }), position);
      }
    }
  }

  onControl(terminal: string, position: number): void {
    this.pos = position;
    this.seenControl = true;
    const region = this.regionValue;
    if (region === Region.Body) {
      if (this.lalr.expected().has(terminal)) {
        // a terminator
        this.lalr.feedToken(terminal);
        this.endMessage(TERMINATOR_OF.get(terminal) as Terminator);
      } else {
        this.onText(spellingOf(terminal), position); // the grammar takes no other control token in a body: it is text
      }
      return;
    }
    if (region === Region.Header) {
      this.headerControl(terminal, position);
      return;
    }
    if (region === Region.Stopped) {
      this.junk.push(spellingOf(terminal));
      return;
    }
    this.flushJunk();
    if (terminal === T_START) {
      this.header.open();
      this.regionValue = Region.Header;
      return;
    }
    if (!this.lenient) {
      this.fail(pyFormat(spec.PARSE_ERR_UNEXPECTED_CONTROL, { token: spellingOf(terminal), start: spellingOf(T_START) }), position);
    }
    const token = spellingOf(terminal);
    if (TERMINATOR_OF.has(terminal)) {
      this.recover(spec.RECOVERY_EXTRA_STOP, pyFormat(spec.PARSE_DETAIL_STOP_OUTSIDE, { token }));
    } else if (terminal === T_CHANNEL) {
      const role = this.role ?? Roles.Assistant;
      this.recover(spec.RECOVERY_MISSING_START, pyFormat(spec.PARSE_DETAIL_CHANNEL_OUTSIDE, { token, role }));
      this.header.open(role);
      this.regionValue = Region.Header;
      this.headerControl(terminal, position);
    } else {
      this.recover(spec.RECOVERY_STRAY_CONTROL, pyFormat(spec.PARSE_DETAIL_CONTROL_OUTSIDE, { token }));
    }
  }

  onInvalidToken(token: number, position: number): void {
    if (!this.lenient) throw new HarmonyParseError(pyFormat(spec.PARSE_ERR_INVALID_TOKEN, { token }), position, this.unit);
    this.out.push(new Recovered(spec.RECOVERY_INVALID_TOKEN, pyFormat(spec.PARSE_DETAIL_INVALID_TOKEN, { token }), position));
  }

  // -- headers -----------------------------------------------------------------------------------------------

  private headerControl(terminal: string, position: number): void {
    this.header.flushWords(this.unit === spec.PARSE_UNIT_TEXT);
    this.pos = position;
    if (terminal === T_MESSAGE) {
      const header = this.header.complete(position);
      if (header === null) this.regionValue = Region.Outside;
      else this.startBody(header);
      return;
    }
    if (TERMINATOR_OF.has(terminal)) {
      const token = spellingOf(terminal);
      if (!this.lenient) this.fail(pyFormat(spec.PARSE_ERR_STOP_IN_HEADER, { token }), position);
      this.closeHeader(spec.RECOVERY_HEADER_CUT_BY_STOP, pyFormat(spec.PARSE_DETAIL_STOP_IN_HEADER, { token }), terminal, position);
      return;
    }
    this.header.control(terminal, position);
  }

  /** The stream ended inside a header (lenient): no message; the header's words are set aside. */
  private dropHeader(rule: string, detail: string, position: number): void {
    this.header.flushWords(this.unit === spec.PARSE_UNIT_TEXT);
    if (!this.header.untouched) this.recover(rule, detail, this.header.spokenWords(), position); // an empty completion is not a header cut short
    this.header.abandon();
    this.regionValue = Region.Outside;
  }

  /** A stop token inside a header (lenient): a message with that header and no content. */
  private closeHeader(rule: string, detail: string, stop: string, position: number): void {
    this.header.flushWords(this.unit === spec.PARSE_UNIT_TEXT);
    this.pos = position;
    if (this.header.empty) {
      this.recover(rule, pyFormat(spec.PARSE_DETAIL_NO_AUTHOR, { detail }));
      this.header.abandon();
      this.regionValue = Region.Outside;
      return;
    }
    this.recover(rule, detail);
    const header = this.header.complete(position);
    if (header === null) {
      this.regionValue = Region.Outside;
      return;
    }
    this.startBody(header);
    this.lalr.feedToken(stop);
    this.endMessage(TERMINATOR_OF.get(stop) as Terminator);
  }

  private startBody(header: Header): void {
    if (this.lenient) applyDeclaredTools(header, this.tools, (r, d, t, p) => this.report(r, d, t, p), this.pos);
    const role = header.isRole ? (ROLES.get(header.author ?? "") as Role) : Roles.Tool;
    const authorName = header.isRole ? null : header.author;
    this.current = header;
    this.msgRole = role;
    this.msgName = authorName;
    const last = this.last;
    if (
      this.lenient &&
      role === Roles.Tool &&
      last !== null &&
      last.role === Roles.Assistant &&
      last.recipient !== null &&
      header.recipient === Roles.Assistant
    ) {
      const detail = pyFormat(spec.PARSE_DETAIL_INVENTED_TOOL_RESULT, { author: authorName, recipient: last.recipient });
      this.recover(spec.RECOVERY_INVENTED_TOOL_RESULT, detail);
    }
    this.regionValue = Region.Body;
    this.body = [];
    this.bodyRun = false;
    this.out.push(new MessageStart(this.index, role, authorName, header.channel, header.recipient, header.contentType));
  }

  private endMessage(how: Terminator): void {
    const header = this.current;
    if (header === null) throw new Error("HarmonyStreamParser: a message ended that never started");
    const message = new ParsedMessage(this.msgRole, this.msgName, header.channel, header.recipient, header.contentType, this.body.join(""), how);
    this.out.push(new MessageEnd(this.index, message, how));
    this.index += 1;
    this.last = message;
    this.current = null;
    this.body = [];
    this.bodyRun = false;
    this.regionValue = Region.Outside;
    if (how === EOS) return;
    if (this.stopAfterCall && message.recipient !== null && message.role === Roles.Assistant) this.stop(spec.RECOVERY_AFTER_TOOL_CALL);
    else if (this.stopAtTurnEnd && TURN_ENDS.has(how)) this.stop(spec.RECOVERY_AFTER_TURN_END);
  }

  private stop(rule: string): void {
    this.regionValue = Region.Stopped;
    this.stopRule = rule;
    this.junkPos = this.pos + 1;
  }

  // -- repairs and errors ------------------------------------------------------------------------------------

  private recover(rule: string, detail: string, text = "", position: number | null = null): void {
    this.out.push(new Recovered(rule, detail, position === null ? this.pos : position, text));
  }

  private report(rule: string, detail: string, text: string, position: number): void {
    this.out.push(new Recovered(rule, detail, position, text));
  }

  private fail(message: string, position: number): never {
    throw new HarmonyParseError(message, position, this.unit);
  }

  private flushJunk(): void {
    if (this.junk.length === 0) return;
    const text = this.junk.join("");
    this.junk = [];
    if (this.regionValue === Region.Stopped) {
      const byCall = this.stopRule === spec.RECOVERY_AFTER_TOOL_CALL;
      this.recover(this.stopRule, byCall ? spec.PARSE_DETAIL_AFTER_TOOL_CALL : spec.PARSE_DETAIL_AFTER_TURN_END, text, this.junkPos);
    } else if (this.last === null) {
      this.recover(spec.RECOVERY_TEXT_BEFORE_START, spec.PARSE_DETAIL_TEXT_BEFORE_START, text, this.junkPos);
    } else {
      this.recover(spec.RECOVERY_JUNK_BETWEEN_MESSAGES, spec.PARSE_DETAIL_JUNK_BETWEEN_MESSAGES, text, this.junkPos);
    }
  }

  /** `analysis…assistantfinal…`: special tokens were stripped by the server; split on channel words. */
  private strippedFallback(): boolean {
    const text = this.junk.join("") + this.header.pendingText();
    const matches = [...text.matchAll(STRIPPED_RE)];
    if (matches.length === 0 || matches[0]?.index !== 0) return false;
    this.junk = [];
    this.header.takePendingText();
    this.recover(spec.RECOVERY_STRIPPED_SPECIAL_TOKENS, spec.PARSE_DETAIL_STRIPPED_SPECIAL_TOKENS, "", 0);
    const role = this.role ?? Roles.Assistant;
    matches.forEach((m, i) => {
      const next = matches[i + 1];
      const end = next !== undefined ? next.index : text.length;
      const body = text.slice(m.index + m[0].length, end);
      this.emitWhole(new ParsedMessage(role, null, m[1] ?? null, m[2] ?? null, m[3] ?? null, body, EOS));
    });
    this.regionValue = Region.Outside;
    return true;
  }

  /** No control token and no channel words: the whole text is the body of the expected message. */
  private unstructuredText(): void {
    const text = this.header.takePendingText();
    const role = this.role ?? Roles.Assistant;
    this.recover(spec.RECOVERY_UNSTRUCTURED_TEXT, spec.PARSE_DETAIL_UNSTRUCTURED_TEXT, "", 0);
    this.emitWhole(new ParsedMessage(role, null, null, null, null, text, EOS));
    this.regionValue = Region.Outside;
  }

  /** Start, content and end events of a message found whole (by a fallback). */
  private emitWhole(m: ParsedMessage): void {
    this.out.push(new MessageStart(this.index, m.role, m.name, m.channel, m.recipient, m.contentType));
    if (m.content) this.out.push(new ContentDelta(this.index, m.content));
    this.out.push(new MessageEnd(this.index, m, m.terminator));
    this.index += 1;
  }
}

/** Parse a whole completion given as token ids. */
export function parseTokens(
  encoding: HarmonyEncoding,
  tokens: Iterable<number>,
  role: Role | string | null = Roles.Assistant,
  mode: Mode = "strict",
  tools: Iterable<string> | null = null,
): ParsedMessage[] {
  const parser = new HarmonyStreamParser(encoding, role, mode, tools);
  const events = [...parser.feedTokens(tokens), ...parser.close()];
  return events.filter((e): e is MessageEnd => e instanceof MessageEnd).map((e) => e.message);
}

/** Parse a whole completion given as text with control tokens spelled out. */
export function parseText(
  encoding: HarmonyEncoding,
  text: string,
  role: Role | string | null = Roles.Assistant,
  mode: Mode = "strict",
  tools: Iterable<string> | null = null,
): ParsedMessage[] {
  const parser = new HarmonyStreamParser(encoding, role, mode, tools);
  const events = [...parser.feedText(text), ...parser.close()];
  return events.filter((e): e is MessageEnd => e instanceof MessageEnd).map((e) => e.message);
}

export { Terminator };
