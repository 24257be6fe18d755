/**
 * `HarmonyStreamParser`: Harmony completions → events, from token ids or text, strictly or leniently.
 *
 * The lexer (`lexer.ts`) turns the input into control terminals and text; this module decides, by the region the
 * parser is in (`Region`), what each piece is: outside a message, text is set aside (lenient) or an error
 * (strict); in a header it goes to the `HeaderReader` (`header.ts`); in a body it is content, and so is any
 * control token the grammar does not accept there. The generated LALR tables (`lalr.IncrementalParser`) follow
 * the whole stream, so every structural decision is the grammar's. Text whose control tokens a detokenizer
 * stripped is split by `stripped.StrippedSplitter` as it streams.
 *
 * Lenient mode, besides the header repairs of `header.ts`: a leading byte order mark is not structure; a header
 * cut short by a stop token is a call without arguments only when it is a whole header with a recipient, prose
 * where the header should be is a message's body (reasoning when `<|end|>` ends it, the answer when `<|return|>`
 * does), and anything else is set aside; header words outside a message followed by `<|constrain|>` or
 * `<|message|>` open a message; text after the last message that `<|end|>` ended is the answer; in text input, a
 * stop token spelled inside an open JSON string of a call's arguments is text; a misspelled control token in a
 * header (`<message|>`) is that token; a header that a stop token or the end of the stream ends before
 * `<|message|>`, and whose text goes on with JSON, is a message with that body.
 *
 * Events: `MessageStart` once a header is complete, `ContentDelta` for each piece of body text as it arrives,
 * `MessageEnd` with the whole message and its terminator, and, in lenient mode, `Recovered` for every repair
 * (`RECOVERY_RULES`). Strict mode throws `HarmonyParseError` where the input leaves the grammar. Lenient mode
 * never throws on model output and never drops text: whatever cannot be placed in a message is carried by a
 * `Recovered` event. Mirrors the Python package's `stream/parser.py`, event for event and position for position.
 */

import type { HarmonyEncoding } from "../encoding.js";
import { IncrementalParser } from "../lalr.js";
import { parseRole } from "../models.js";
import { cpCount, cpLength, cpPrefix, fill, strip, WHITESPACE } from "../texts.js";
import { grammar, type Role, Role as Roles, spec, Terminator } from "../tables.js";
import {
  ContentDelta, described, type Event, HarmonyParseError, MessageEnd, MessageStart, messagesOf, type Mode, ParsedMessage, Recovered,
  type RepairValues,
} from "./events.js";
import {
  applyDeclaredTools, channelOf, CHANNELS, Cut, Header, HeaderReader, named, reduceHeader, refusal,
  ROLES, T_CHANNEL, T_MESSAGE, T_START, WORD_RE,
} from "./header.js";
import { spellingOf, TextLexer, TokenLexer } from "./lexer.js";
import { type Piece, StrippedSplitter, strippedStart } from "./stripped.js";

/** A stop token's terminal → the terminator of the message it ends. */
const TERMINATOR_OF = grammar.STOP_TERMINATORS as Readonly<Record<string, Terminator>>;
const { Eos: EOS, End: END, Call: CALL, EndDoneSampling: TURN_END } = Terminator; // TURN_END: ends the model's turn
const BOM = "\ufeff"; // a byte order mark: Unicode's, not the format's
const GT = spec.SPELLING_CLOSE.slice(-1); // every spelling, near-misses too, ends with it
const LEADING_SPACE = new RegExp(`^[${WHITESPACE}]+`, "u");
const JSON_START = /^[{[]/; // what JSON arguments begin with
const JSON_STRINGS = /"(?:[^"\\]|\\[^])*"/g; // a string's escaped quote never ends it, nor starts another

/** Where in the stream the parser is. */
export enum Region {
  Outside, // between messages
  Header, // after `<|start|>`, before `<|message|>`
  Body, // after `<|message|>`, before a stop token
  Stripped, // text whose control tokens were stripped, split on its header words
  Stopped, // after the turn's end or a tool call, when asked to stop there
}

/** Options of `HarmonyStreamParser` beyond role, mode and tools (the Python keyword arguments, camelCased). */
export interface StreamParserOptions {
  readonly stopAfterToolCall?: boolean;
  /** null or left out: true in lenient mode for a completion that follows the prompt's role, false otherwise. */
  readonly stopAtTurnEnd?: boolean | null;
  readonly maxToolCalls?: number | null;
}

type ControlAction = (parser: HarmonyStreamParser, terminal: string, position: number) => void;
type Triggers = ReadonlyMap<Region, ReadonlyMap<string, ControlAction>>;

/**
 * Feed token ids or text in any chunks; get events back. Call `close()` at the end of the stream.
 *
 * `role` is the role of the message the completion starts in (the prompt ended with `<|start|>ROLE`), or null when
 * the completion starts with `<|start|>`. `tools` are the declared function names (without the function
 * namespace), used by the lenient repairs of recipients. `stopAfterToolCall` sets aside what follows the first
 * completed tool call by the assistant, and `maxToolCalls: N` what follows the N-th (a request's
 * `parallel_tool_calls: false`, `max_tool_calls`). `stopAtTurnEnd` (by default: in lenient mode, for a completion
 * that follows the prompt's role; a strict parser, or one reading from `<|start|>`, reads a whole transcript)
 * reads the input as one turn of the model, as a server does: what follows the message that `<|return|>` ended is
 * set aside (a sampler stops there), and so is a tool result the model wrote itself after its call and everything
 * after it; several calls in a row are all read (an engine that does not stop at `<|call|>` lets the model make
 * them).
 */
export class HarmonyStreamParser {
  private readonly lenient: boolean;
  private readonly expectedRole: Role; // the role of a message whose header names none
  private readonly tools: ReadonlySet<string>;
  private callsLeft: number; // tool calls still allowed (Infinity: no limit)
  private readonly stopAtTurnEnd: boolean;
  private stopRepair: readonly [string, RepairValues] = [spec.RECOVERY_AFTER_TOOL_CALL, {}]; // sets aside what follows a stop
  private readonly lalr = new IncrementalParser(reduceHeader);
  private readonly header: HeaderReader;
  private readonly tokenLexer: TokenLexer;
  private readonly textLexer = new TextLexer(this);
  private out: Event[] = [];
  private byCharacter = false; // positions count characters (text input), or tokens
  private pos = 0; // where the piece being handled began
  private index = 0; // the next message's index
  private regionValue = Region.Outside;
  private current: MessageStart | null = null; // the message whose body is open
  private body: string[] = [];
  private bodyRun = false; // the body's text has been announced to the grammar
  private junk: string[] = [];
  private junkPos = 0;
  private headerPos = 0; // where the open header began
  private controlSeen = false;
  private fresh = true; // nothing read yet
  private strippedPossible: boolean; // no control token and no text ruled out stripped text yet
  private readonly splitter = new StrippedSplitter(); // reads the completion if it is stripped text
  private strippedAt = 0; // where the stripped text began (its headers' positions count from there)
  private last: ParsedMessage | null = null;
  private lastStop: Terminator | null = null; // the stop token read last, message or not
  private closed = false;
  private readonly actions: Triggers; // the spec's control_triggers for the mode

  constructor(
    encoding: HarmonyEncoding,
    role: Role | string | null = Roles.Assistant,
    mode: Mode = "strict",
    tools: Iterable<string> | null = null,
    options: StreamParserOptions = {},
  ) {
    if (mode !== "strict" && mode !== "lenient") {
      throw new RangeError(`mode must be 'strict' or 'lenient', not ${JSON.stringify(String(mode))}`);
    }
    this.lenient = mode === "lenient";
    const first = role !== null ? parseRole(role) : null; // the role the completion starts in
    this.expectedRole = first ?? Roles.Assistant;
    this.tools = new Set(tools ?? []);
    const maxToolCalls = options.maxToolCalls ?? Infinity;
    if (maxToolCalls < 1) throw new RangeError(`max_tool_calls must be at least 1, not ${maxToolCalls}`);
    this.callsLeft = Math.min(options.stopAfterToolCall ? 1 : Infinity, maxToolCalls);
    this.stopAtTurnEnd = options.stopAtTurnEnd ?? (this.lenient && first !== null);
    this.header = new HeaderReader(this.lalr, this.lenient, this.expectedRole, this.recover, (m, at) => this.fail(m, at), this.tools);
    this.tokenLexer = new TokenLexer(encoding, this);
    this.strippedPossible = this.lenient;
    this.actions = HarmonyStreamParser.TRIGGERS.get(mode) as Triggers;
    if (first !== null) this.openHeader(first, 0);
  }

  // -- input -------------------------------------------------------------------------------------------------

  get region(): Region {
    return this.regionValue;
  }

  /** Whether a control token has been read (text without any is read as stripped or plain text). */
  get seenControl(): boolean {
    return this.controlSeen;
  }

  /** How many token ids were fed (`feedTokens` and `feedBodyToken`). */
  get tokensRead(): number {
    return this.tokenLexer.position;
  }

  /** The text of the body being read so far ("" outside a body: a message's end empties it). */
  get currentContent(): string {
    return this.body.join("");
  }

  /** Feed completion token ids; the events they cause. */
  feedTokens(tokens: Iterable<number>): Event[] {
    return this.collect(false, () => this.tokenLexer.feed(tokens));
  }

  /** A fast path for servers: if `token` is plain text continuing the open body, take it and return its text (the
   * one `ContentDelta` it would cause is not built); otherwise take nothing and return null, and the caller feeds
   * the token with `feedTokens`. The parser's state is the same either way. */
  feedBodyToken(token: number): string | null {
    if (!this.bodyRun) return null; // bodyRun: inside a body whose text the grammar knows of
    const text = this.tokenLexer.take(token);
    if (text) this.body.push(text);
    return text;
  }

  /** Feed detokenized text with control tokens spelled out, in any chunks. */
  feedText(text: string): Event[] {
    // body text and nothing else: the fast path (what the lexer would do, without its scan)
    if (this.bodyRun && text && this.textLexer.take(text)) return this.collect(true, () => this.bodyText(text));
    return this.collect(true, () => this.textLexer.feed(text));
  }

  /** Feed UTF-8 bytes of such text, split anywhere (even inside a character). */
  feedBytes(data: Uint8Array): Event[] {
    return this.collect(true, () => this.textLexer.feedBytes(data));
  }

  private collect(byCharacter: boolean, read: () => void): Event[] {
    const out: Event[] = (this.out = []);
    this.byCharacter = byCharacter;
    read();
    return out;
  }

  /** End of stream: ends an open message (terminator `eos`), or reports an incomplete one. */
  close(): Event[] {
    const out: Event[] = (this.out = []);
    this.textLexer.finish();
    this.tokenLexer.finish();
    if (this.closed) return out;
    this.closed = true;
    const end = (this.pos = this.byCharacter ? this.textLexer.position : this.tokenLexer.position);
    if (this.regionValue === Region.Stripped || (this.strippedPossible && this.tryStripped(true))) {
      this.endStripped(EOS);
      return out;
    }
    const text = this.header.stretch.text; // text and no control token after the prompt's role: a message's body
    if (this.lenient && !this.controlSeen && this.regionValue === Region.Header && this.header.virtual && strip(text)) {
      this.repair(spec.RECOVERY_UNSTRUCTURED_TEXT, {}, undefined, 0);
      this.header.abandon();
      this.emitWhole(null, text, EOS);
      return out;
    }
    this.flushJunk(this.lenient && this.regionValue === Region.Outside && this.lastStop !== null);
    if (this.regionValue === Region.Header && !(this.lenient && this.headerWithoutMessage(null, end))) {
      if (!this.lenient) this.fail(spec.PARSE_ERR_EOF_IN_HEADER, end);
      this.header.flushWords(this.byCharacter);
      // the header's words (or its text) are set aside; an empty completion (no text after the prompt's role) is not cut short
      const given = this.header.said.join(" ") || this.header.raw;
      if (given) this.repair(spec.RECOVERY_EOF_IN_HEADER, {}, given, end);
      this.header.abandon();
      this.regionValue = Region.Outside;
    }
    if (this.regionValue === Region.Body || this.regionValue === Region.Outside) {
      const error = refusal(() => this.lalr.feedEof());
      if (error !== null) this.fail(error.message, end); // only reachable in strict mode, outside a message
      if (this.regionValue === Region.Body) this.endMessage(EOS);
    }
    return out;
  }

  // -- what the lexers find (the lexer's Sink) --------------------------------------------------------------

  onText(text: string, position: number): void {
    if (this.fresh) {
      this.fresh = false;
      if (this.lenient && text.startsWith(BOM)) {
        // a byte order mark starts the input: it is set aside, the rest of the text is read
        this.repair(spec.RECOVERY_BYTE_ORDER_MARK, {}, BOM, position);
        const rest = text.slice(BOM.length);
        if (rest) this.onText(rest, position + (this.byCharacter ? 1 : 0));
        return;
      }
    }
    this.pos = position;
    const region = this.regionValue;
    if (region === Region.Body) {
      if (!this.bodyRun) {
        this.lalr.feedToken(grammar.LEXER_TERMINAL_TEXT);
        this.bodyRun = true;
      }
      this.bodyText(text);
    } else if (region === Region.Header) {
      this.header.addText(text, position);
      if (this.lenient && text.includes(GT)) this.nearMiss();
    } else if (region === Region.Stripped) {
      this.strippedPieces(this.splitter.feed(text));
    } else {
      if (this.junk.length === 0) this.junkPos = position;
      this.junk.push(text);
      if (region === Region.Outside && !this.lenient) {
        this.fail(fill(spec.PARSE_ERR_TEXT_OUTSIDE, { text: cpPrefix(text, 40), start: spellingOf(T_START) }), position);
      }
    }
    if (this.strippedPossible) this.tryStripped(false); // no control token yet: a header or text outside, maybe stripped
  }

  onControl(terminal: string, position: number): void {
    this.pos = position;
    this.controlSeen = true;
    this.fresh = this.strippedPossible = false;
    this.act(this.regionValue, terminal, position);
  }

  onInvalidToken(token: number, position: number): void {
    if (!this.lenient) this.fail(fill(spec.PARSE_ERR_INVALID_TOKEN, { token }), position);
    this.repair(spec.RECOVERY_INVALID_TOKEN, { token }, undefined, position);
  }

  /** Do what the spec's `control_triggers` say `terminal` does in `region` (`onControl` has set `pos` to `position`). */
  private act(region: Region, terminal: string, position: number): void {
    // the generator has every region of control_triggers give every control token an action
    (this.actions.get(region)?.get(terminal) as ControlAction)(this, terminal, position);
  }

  /** The actions of the spec's `control_actions`, by name. */
  private static readonly ACTIONS: Readonly<Record<string, ControlAction>> = {
    open_header: (p, _, at) => {
      p.flushJunk();
      p.openHeader(null, at);
    },
    unexpected_control: (p, t, at) => {
      p.fail(fill(spec.PARSE_ERR_UNEXPECTED_CONTROL, { token: spellingOf(t), start: spellingOf(T_START) }), at);
    },
    header_without_start: (p, t, at) => {
      if (!p.headerWithoutStart(t, at)) HarmonyStreamParser.ACTIONS.stray_control?.(p, t, at);
    },
    stray_control: (p, t) => {
      p.flushJunk();
      p.repair(spec.RECOVERY_STRAY_CONTROL, { token: spellingOf(t) });
    },
    extra_stop: (p, t) => {
      p.flushJunk();
      p.lastStop = TERMINATOR_OF[t] ?? null;
      p.repair(spec.RECOVERY_EXTRA_STOP, { token: spellingOf(t) });
    },
    channel_opens_message: (p, t, at) => {
      p.flushJunk();
      p.recover(spec.RECOVERY_MISSING_START, fill(spec.PARSE_DETAIL_CHANNEL_OUTSIDE, { token: spellingOf(t), role: p.expectedRole }));
      p.openHeader(p.expectedRole, at);
      p.act(Region.Header, t, at);
    },
    header_control: (p, t, at) => {
      p.header.flushWords(p.byCharacter, t); // the header's text so far, knowing that `t` ends it
      p.header.control(t, at);
    },
    complete_header: (p, t, at) => {
      p.header.flushWords(p.byCharacter, t);
      const header = p.header.complete(at);
      if (header === null) p.regionValue = Region.Outside;
      else if (!p.cutInventedResult(header)) p.startBody(header);
    },
    close_header: (p, t, at) => p.closeHeader(t, at),
    as_text: (p, t, at) => p.onText(spellingOf(t), at),
    end_message: (p, t, at) => {
      if (p.byCharacter && p.lenient && p.insideJsonString()) {
        p.repair(spec.RECOVERY_JSON_STRING_CONTROL, { token: spellingOf(t) });
        p.onText(spellingOf(t), at);
        return;
      }
      p.lalr.feedToken(t);
      p.endMessage(TERMINATOR_OF[t] as Terminator);
    },
    end_stripped: (p, t, at) => {
      p.endStripped(END); // a control token after all: the stripped text ends, the token is read as outside
      p.act(Region.Outside, t, at);
    },
    end_stripped_at_stop: (p, t) => {
      const stop = TERMINATOR_OF[t] as Terminator;
      p.endStripped(stop);
      p.lastStop = stop;
      if (p.stopAtTurnEnd && stop === TURN_END) p.stop(spec.RECOVERY_AFTER_TURN_END);
    },
    set_aside: (p, t) => p.junk.push(spellingOf(t)),
  };

  /** The spec's `control_triggers`: mode → region → terminal → action (a name the runtime lacks fails here). */
  private static readonly TRIGGERS: ReadonlyMap<string, Triggers> = new Map(
    Object.entries(grammar.CONTROL_TRIGGERS).map(([mode, regions]): [string, Triggers] => [
      mode,
      new Map(
        Object.entries(regions).map(([name, row]) => [
          Region[(name.charAt(0).toUpperCase() + name.slice(1)) as keyof typeof Region],
          new Map(Object.entries(row).map(([t, action]) => [t, named(HarmonyStreamParser.ACTIONS, action, "control_triggers")])),
        ]),
      ),
    ]),
  );

  // -- headers -----------------------------------------------------------------------------------------------

  /** A header begins at `position`: after `<|start|>`, or, given `role`, as if `<|start|>ROLE` had come. */
  private openHeader(role: Role | null, position: number): void {
    this.headerPos = position;
    this.header.open(role);
    this.regionValue = Region.Header;
  }

  /** Lenient: a control token misspelled in the header's text (`<message|>`) is that token; the text after it is
   * read on from there (a loop, not a recursion: a header may hold any number of them). */
  private nearMiss(): void {
    for (let found = this.header.findNearMiss(); found !== null; found = this.header.findNearMiss()) {
      const [offset, spelling] = found;
      const [rest, at] = this.header.splitPending(offset, this.byCharacter);
      const after = rest.slice(spelling.length);
      const afterAt = at + (this.byCharacter ? cpCount(spelling, 0, spelling.length) : 0);
      const terminal = grammar.NEAR_MISS_SPELLINGS[spelling] as string;
      this.repair(spec.RECOVERY_CONTROL_SPELLING, { word: spelling, token: spellingOf(terminal) }, spelling, at);
      this.onControl(terminal, at);
      if (!after) return;
      if (this.regionValue !== Region.Header) return this.onText(after, afterAt); // a body (or what follows a header cut short)
      this.header.addText(after, afterAt);
    }
  }

  /** Lenient: a header that a stop token (or, `stop` null, the end of the stream) ends before `<|message|>` and
   * whose text goes on with JSON is a message whose body that text is. Whether it was one. */
  private headerWithoutMessage(stop: string | null, position: number): boolean {
    const at = this.header.bodyStart();
    if (at === null) return false;
    const [body, bodyAt] = this.header.splitPending(at, this.byCharacter);
    const word = body.match(WORD_RE)?.[0] ?? "";
    this.repair(spec.RECOVERY_HEADER_WITHOUT_MESSAGE, { token: spellingOf(T_MESSAGE), word }, undefined, bodyAt);
    this.onControl(T_MESSAGE, bodyAt);
    this.onText(body, bodyAt);
    if (stop !== null) this.onControl(stop, position);
    return true;
  }

  /** A stop token inside a header (lenient): a call without arguments, a message whose header is missing, or
   * nothing (the header's text is set aside), as `HeaderReader.cut` decides. Strict: an error. */
  private closeHeader(stop: string, position: number): void {
    if (this.lenient && this.headerWithoutMessage(stop, position)) return;
    const token = spellingOf(stop);
    this.header.flushWords(this.byCharacter, stop);
    if (!this.lenient) this.fail(fill(spec.PARSE_ERR_STOP_IN_HEADER, { token }), position);
    const terminator = TERMINATOR_OF[stop] as Terminator;
    const detail = fill(spec.PARSE_DETAIL_STOP_IN_HEADER, { token });
    const cut = this.header.cut();
    this.regionValue = Region.Outside; // until a body opens
    if (cut === Cut.Message) {
      this.recover(spec.RECOVERY_HEADER_CUT_BY_STOP, detail);
      const complete = this.header.complete(position);
      if (complete !== null) {
        this.startBody(complete);
        this.lalr.feedToken(stop);
        this.endMessage(terminator);
      }
      return;
    }
    const text = this.header.raw;
    this.header.abandon(); // the repairs found in it are not reported one by one
    this.lastStop = terminator;
    if (cut === Cut.Nothing) {
      this.recover(spec.RECOVERY_HEADER_CUT_BY_STOP, fill(spec.PARSE_DETAIL_NO_AUTHOR, { detail }));
    } else if (cut === Cut.Headerless && terminator !== CALL) {
      const channel = terminator === END ? spec.CHANNEL_REASONING : null;
      this.repair(spec.RECOVERY_HEADERLESS_MESSAGE, { token, channel }, undefined, this.headerPos);
      this.emitWhole(channel, text, terminator);
    } else {
      this.recover(spec.RECOVERY_JUNK_HEADER, detail, text, this.headerPos);
    }
    if (this.stopAtTurnEnd && terminator === TURN_END) this.stop(spec.RECOVERY_AFTER_TURN_END);
  }

  /** Header words outside a message (the text set aside since the last message begins with a channel word, or
   * has a recipient), then `<|constrain|>` or `<|message|>`: a header whose `<|start|>ROLE` (and `<|channel|>`, when
   * the words begin with a channel word) were lost. Whether the text was such words. */
  private headerWithoutStart(terminal: string, position: number): boolean {
    const text = this.junk.join("");
    const words = text.match(WORD_RE) ?? [];
    const channelFirst = words.length > 0 && CHANNELS.has(channelOf(words[0] as string)[0]);
    if (!channelFirst && !words.some((w) => w.startsWith(spec.HEADER_RECIPIENT_KEYWORD))) return false;
    const at = this.junkPos;
    this.junk = [];
    const role = this.expectedRole;
    this.recover(spec.RECOVERY_MISSING_START, fill(spec.PARSE_DETAIL_HEADER_WITHOUT_START, { token: spellingOf(T_START), role }), "", at);
    this.openHeader(role, at);
    if (channelFirst) this.header.control(T_CHANNEL, at);
    this.header.addText(text, at);
    this.act(Region.Header, terminal, position);
    return true;
  }

  /** A message the model wrote in another's name: a tool's result (right after its own call, or not), or a user's,
   * system's or developer's message. Reading one turn (`stopAtTurnEnd`), it and all that follows are set aside;
   * otherwise a tool's result right after a call is only reported. */
  private cutInventedResult(header: Header): boolean {
    if (!this.lenient) return false;
    const own = this.expectedRole;
    const author = header.author;
    const call = this.last !== null && this.last.role === own ? this.last.recipient : null; // the call just made
    if (header.isRole ? !this.stopAtTurnEnd || ROLES.get(author ?? "") === own : !this.stopAtTurnEnd && call === null) return false;
    const [rule, values]: [string, RepairValues] = header.isRole
      ? [spec.RECOVERY_OTHER_AUTHOR, { author, role: own }]
      : [spec.RECOVERY_INVENTED_TOOL_RESULT, { author, recipient: call }];
    if (!this.stopAtTurnEnd) {
      this.repair(rule, values);
      return false;
    }
    this.junk = [this.header.raw, spellingOf(T_MESSAGE)];
    this.header.abandon();
    this.stop(rule, values);
    this.junkPos = this.headerPos;
    return true;
  }

  // -- messages ----------------------------------------------------------------------------------------------

  private startBody(header: Header): void {
    if (this.lenient) applyDeclaredTools(header, this.tools, this.recover, this.pos);
    this.regionValue = Region.Body;
    this.openMessage(header);
  }

  /** A message begins, a role's or a tool's (whose name is the header's author); its body is empty. */
  private openMessage({ author, isRole, channel, recipient, contentType }: Header): void {
    const role = isRole ? (ROLES.get(author ?? "") as Role) : Roles.Tool;
    this.current = new MessageStart(this.index, role, isRole ? null : author, channel, recipient, contentType);
    this.out.push(this.current);
  }

  private bodyText(text: string): void {
    this.body.push(text);
    this.out.push(new ContentDelta(this.index, text));
  }

  private endMessage(how: Terminator): void {
    const { role, name, channel, recipient, contentType } = this.current as MessageStart; // every caller has a message open
    const message = new ParsedMessage(role, name, channel, recipient, contentType, this.body.join(""), how);
    this.out.push(new MessageEnd(this.index, message, how));
    this.index += 1;
    this.last = message;
    this.current = null;
    this.body = [];
    this.bodyRun = false;
    this.regionValue = Region.Outside;
    if (how === EOS) return;
    this.lastStop = how;
    if (this.callsLeft > 0 && message.recipient !== null && message.role === Roles.Assistant) this.callsLeft -= 1;
    if (this.callsLeft === 0) this.stop(spec.RECOVERY_AFTER_TOOL_CALL);
    else if (this.stopAtTurnEnd && how === TURN_END) this.stop(spec.RECOVERY_AFTER_TURN_END);
  }

  /** Start, content and end events of a message of the expected role found whole (by a fallback). */
  private emitWhole(channel: string | null, content: string, how: Terminator): void {
    this.openMessage(new Header(this.expectedRole, true, null, channel));
    if (content) this.bodyText(content);
    this.endMessage(how);
  }

  private stop(rule: string, values: RepairValues = {}): void {
    this.regionValue = Region.Stopped;
    this.stopRepair = [rule, values];
    this.junkPos = this.pos + 1;
  }

  /** Whether the open body is a call's JSON arguments that end inside a string (text input only: there a control
   * token's spelling inside a string is indistinguishable from the token): a quote is left once the whole strings
   * are taken out. */
  private insideJsonString(): boolean {
    const json = this.body.join("").replace(LEADING_SPACE, "");
    return (this.current?.recipient ?? null) !== null && JSON_START.test(json) && json.replace(JSON_STRINGS, "").includes('"');
  }

  // -- text without control tokens ---------------------------------------------------------------------------

  /** Decide, as early as the text allows, whether a completion without control tokens is stripped text; if it is,
   * read it as such from here on. */
  private tryStripped(final: boolean): boolean {
    const text = this.junk.join("") + this.header.stretch.text;
    const body = text.replace(LEADING_SPACE, "");
    const decision = body || final ? strippedStart(body, final) : null;
    if (decision === null) return false;
    this.strippedPossible = false;
    if (!decision) return false;
    const at = (this.pos = this.junk.length > 0 ? this.junkPos : 0);
    this.junk = [];
    if (this.regionValue === Region.Header) this.header.abandon(); // its text is read as stripped text
    this.regionValue = Region.Stripped;
    const lead = text.slice(0, text.length - body.length);
    if (lead) this.repair(spec.RECOVERY_TEXT_BEFORE_START, {}, lead, at); // white space before the first header word
    this.strippedAt = at + (this.byCharacter ? cpLength(lead) : 0);
    this.strippedPieces(this.splitter.feed(body));
    return true;
  }

  private strippedPieces(pieces: readonly Piece[]): void {
    for (const piece of pieces) {
      if (typeof piece === "string") {
        this.bodyText(piece);
        continue;
      }
      if (this.current !== null) {
        this.endMessage(END);
        if (this.regionValue === Region.Outside) this.regionValue = Region.Stripped;
      }
      const at = this.strippedAt + (this.byCharacter ? piece.offset : 0);
      this.repair(spec.RECOVERY_STRIPPED_SPECIAL_TOKENS, { header: piece.text }, undefined, at);
      piece.header.author ??= this.expectedRole; // the first message follows the prompt's role
      applyDeclaredTools(piece.header, this.tools, this.recover, at);
      this.openMessage(piece.header);
    }
  }

  /** The stripped text ends (the stream ends, or a control token comes): the open message ends too. */
  private endStripped(how: Terminator): void {
    this.strippedPieces(this.splitter.feed("", true));
    if (this.current !== null) this.endMessage(how);
    if (this.regionValue === Region.Stripped) this.regionValue = Region.Outside;
  }

  // -- repairs and errors ------------------------------------------------------------------------------------

  /** A repair, reported with the detail and the text set aside that the spec's table gives `rule`. */
  private repair(rule: string, values: RepairValues = {}, text?: string, position: number | null = null): void {
    this.recover(rule, ...described(rule, values, text), position);
  }

  private readonly recover = (rule: string, detail: string, text = "", position: number | null = null): void => {
    this.out.push(new Recovered(rule, detail, position === null ? this.pos : position, text));
  };

  private fail(message: string, position: number): never {
    throw new HarmonyParseError(message, position, this.byCharacter ? spec.PARSE_UNIT_TEXT : spec.PARSE_UNIT_TOKENS);
  }

  /** The text set aside since the last message is reported. `atEnd`: the stream ends after it, outside a message,
   * with no header before; then after `<|end|>` it is the answer (a message with no channel; leading white space
   * set aside). */
  private flushJunk(atEnd = false): void {
    if (this.junk.length === 0) return;
    const text = this.junk.join("");
    this.junk = [];
    const body = text.replace(LEADING_SPACE, "");
    if (this.regionValue === Region.Stopped) {
      this.repair(...this.stopRepair, text, this.junkPos);
    } else if (atEnd && this.lastStop === END && body) {
      this.repair(spec.RECOVERY_TEXT_AFTER_END, {}, text.slice(0, text.length - body.length), this.junkPos);
      this.emitWhole(null, body, EOS);
    } else {
      const between = this.last === null && this.lastStop === null ? spec.RECOVERY_TEXT_BEFORE_START : spec.RECOVERY_JUNK_BETWEEN_MESSAGES;
      this.repair(atEnd && this.lastStop === CALL ? spec.RECOVERY_TEXT_AFTER_CALL : between, {}, text, this.junkPos);
    }
  }
}

/** The arguments of `parseTokens` and `parseText` after the input: as `HarmonyStreamParser` takes them. */
type ParseArgs = [role?: Role | string | null, mode?: Mode, tools?: Iterable<string> | null];

function parseWhole(feed: (parser: HarmonyStreamParser) => Event[], encoding: HarmonyEncoding, ...args: ParseArgs): ParsedMessage[] {
  const parser = new HarmonyStreamParser(encoding, ...args);
  return messagesOf([...feed(parser), ...parser.close()]);
}

/** Parse a whole completion given as token ids. */
export function parseTokens(encoding: HarmonyEncoding, tokens: Iterable<number>, ...args: ParseArgs): ParsedMessage[] {
  return parseWhole((parser) => parser.feedTokens(tokens), encoding, ...args);
}

/** Parse a whole completion given as text with control tokens spelled out. */
export function parseText(encoding: HarmonyEncoding, text: string, ...args: ParseArgs): ParsedMessage[] {
  return parseWhole((parser) => parser.feedText(text), encoding, ...args);
}
