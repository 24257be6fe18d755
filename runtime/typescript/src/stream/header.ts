/**
 * One message header: its text split into words, the words fed to the grammar, and the repairs of lenient mode.
 *
 * `HeaderReader` collects a header's text until a control token closes a stretch of it, splits it into words at
 * whitespace (Python's) and feeds each word to the shared LALR parser as a terminal: the lexer terminal for a
 * role (when a role can come there), for a recipient (`to=…`), or any other word. Control tokens inside the
 * header (`<|channel|>`, `<|constrain|>`, another `<|start|>`) and the closing `<|message|>` are fed too. In
 * strict mode whatever leaves the grammar throws.
 *
 * In lenient mode a word is read by what it can be where it stands, knowing which control token ends its stretch
 * of text, and whatever has no place in the header is set aside, never made a header part:
 *
 * - the author: a role; a role repeated or glued to a channel word (`assistantassistant`, `assistantfinal`); a
 *   tool's name (namespaced, or a built-in namespace); any other word is reported and the message is the
 *   expected role's;
 * - the channel: the word after `<|channel|>`, with punctuation or dashes glued to it dropped (`––commentary`,
 *   `final.`); a second `<|channel|>` replaces the first (the later one wins), unless a content type word follows it
 *   (`<|channel|>code`: the content type); a `<|channel|>` after the content type still names the channel; a channel
 *   the format does not know is kept and reported (its text is hidden, as reasoning is);
 * - the recipient: a `to=` word anywhere after the author; a second one replaces the first (the later one wins);
 *   a declared function name with spaces in it is read whole; an assistant message addressed to the assistant
 *   has none and is reasoning unless it is the answer; the function's name written as the content type
 *   (`<|constrain|>functions.x`) is the recipient;
 * - the content type: a known content type, or the word after `<|constrain|>` (a channel word spliced in there is
 *   dropped: `<|constrain|>analysis code` is `code`);
 * - anything else (free text before `<|channel|>`, prose after the channel word) is set aside.
 *
 * Each repair is reported (`report(rule, detail, text, position)`). `complete()` gives the finished `Header`;
 * `cut()` says what a header cut short by a stop token is (`Cut`). Mirrors the Python package's
 * `stream/header.py`, repair for repair and position for position.
 */

import { GrammarError, IncrementalParser } from "../lalr.js";
import { alt, cpCount, cpLength, escapeRegExp, fill, isAlnum, strip, WHITESPACE } from "../texts.js";
import { grammar, type Role, Role as Roles, ROLE_VALUES, spec } from "../tables.js";
import { described, type RepairValues } from "./events.js";
import { spellingOf } from "./lexer.js";

export type Report = (rule: string, detail: string, text: string, position: number) => void;
export type Fail = (message: string, position: number) => never;

export const T_ROLE = grammar.LEXER_TERMINAL_ROLE;
export const T_TO = grammar.LEXER_TERMINAL_RECIPIENT;
export const T_WORD = grammar.LEXER_TERMINAL_WORD;
export const T_START = grammar.CONTROL_TERMINALS[spec.TOKEN_START] ?? "";
export const T_MESSAGE = grammar.CONTROL_TERMINALS[spec.TOKEN_MESSAGE] ?? "";
export const T_CHANNEL = grammar.CONTROL_TERMINALS[spec.TOKEN_CHANNEL] ?? "";
export const T_CONSTRAIN = grammar.CONTROL_TERMINALS[spec.TOKEN_CONSTRAIN] ?? "";
const TO = spec.HEADER_RECIPIENT_KEYWORD;
const CONSTRAIN = spec.SPELLING_CONSTRAIN;
const SEPARATOR = spec.HEADER_NAMESPACE_SEPARATOR;
export const FUNCTIONS_PREFIX = spec.HEADER_FUNCTION_NAMESPACE + SEPARATOR;
export const ROLES: ReadonlyMap<string, Role> = new Map(ROLE_VALUES.map((r) => [String(r), r]));
export const CHANNELS: ReadonlySet<string> = new Set(spec.CHANNELS);
/** A content type, lower-cased → as the spec writes it. */
export const CONTENT_TYPES: ReadonlyMap<string, string> = new Map(spec.CONTENT_TYPES.map((ct) => [ct.toLowerCase(), ct]));
const BUILTIN_NAMESPACES: ReadonlySet<string> = new Set(spec.TOOL_NAMESPACES);
export const WORD_RE = new RegExp(`[^${WHITESPACE}]+`, "gu");
const byLengthDown = (a: string, b: string): number => cpLength(b) - cpLength(a);
const GLUED_ROLE_RE = new RegExp(`^(?:${spec.HEADER_GLUED_ROLE_PATTERN})$`, "u");
// Where the body of a header without `<|message|>` begins: a word no header word begins with (JSON).
const BODY_START_RE = new RegExp(`(?:^|(?<=[${WHITESPACE}]))[{\\["]`, "u");
const NEAR_MISSES = Object.keys(grammar.NEAR_MISS_SPELLINGS).sort(byLengthDown); // read as their token in a header
const NEAR_MISS_IN_HEADER_RE = new RegExp(alt(NEAR_MISSES), "u");
const NEAR_MISS_LONGEST = Math.max(...NEAR_MISSES.map((s) => s.length));

/** What a complete header says: its author (a role's value, or a tool's name), recipient, channel, type. */
export class Header {
  constructor(
    public author: string | null = null,
    public isRole = false,
    public recipient: string | null = null,
    public channel: string | null = null,
    public contentType: string | null = null,
  ) {}
}

/** What a header cut short by a stop token is, in lenient mode. */
export enum Cut {
  Message, // a whole header with a recipient: a call with no arguments
  Headerless, // prose where the header should be, and no header part: a message's body
  Junk, // no message: its text is set aside
  Nothing, // nothing was read for it
}

/** (terminal, text): the value a lexer terminal carries on the parser's stack. */
type Word = readonly [string, string];

/** Header part rule → the `Header` fields it sets, from its first word and its number of children. */
const PARTS: Readonly<Record<string, (word: Word, size: number) => Partial<Header>>> = {
  [grammar.RULE_AUTHOR]: ([terminal, word]) => ({ author: word, isRole: terminal === T_ROLE }),
  [grammar.RULE_RECIPIENT]: ([, word]) => ({ recipient: word.slice(TO.length) }),
  [grammar.RULE_CHANNEL]: ([, word]) => ({ channel: word || null }),
  [grammar.RULE_CONTENT_TYPE]: ([, word], size) => ({ contentType: (size === 2 ? CONSTRAIN : "") + word }), // 2: <|constrain|> WORD
};

/** The LALR parser's reduce callback: what each header rule contributes (other rules carry nothing). */
export function reduceHeader(origin: string, children: unknown[]): unknown {
  if (origin === grammar.RULE_HEADER) return Object.assign(new Header(), ...children); // a header's children are its parts
  const part = PARTS[origin];
  const word = children.find((child): child is Word => Array.isArray(child) && child.length === 2) ?? ["", ""];
  return part === undefined ? null : part(word, children.length);
}

// the punctuation at a word's two edges: anything `isAlnum` does not take (not a letter or a digit, `_` included)
const EDGE_PUNCTUATION = /^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu;

/**
 * A channel word as a model wrote it → the known channel it names and whether anything was dropped.
 *
 * `––commentary`, `final.`, `Analysis`, `commentary?commentary?` name a channel; a word naming none is kept as is.
 */
export function channelOf(word: string): [string, boolean] {
  if (CHANNELS.has(word)) return [word, false];
  const core = word.replace(EDGE_PUNCTUATION, "").toLowerCase();
  if (CHANNELS.has(core)) return [core, true];
  const channel = [...CHANNELS].find((c) => core.startsWith(c) && !isAlnum(String.fromCodePoint(core.codePointAt(c.length) ?? 0)));
  return channel !== undefined ? [channel, true] : [word, false];
}

/** `assistantassistant` → (assistant, null, null); `assistantfinal` → (assistant, final, null);
 * `assistantto=functions.f` → (assistant, null, `to=functions.f`); null if the word names no role. */
export function roleOf(word: string): [Role, string | null, string | null] | null {
  const role = ROLES.get(word);
  if (role !== undefined) return [role, null, null]; // the usual case, without the regular expression
  const match = GLUED_ROLE_RE.exec(word);
  if (match === null) return null;
  return [ROLES.get(match[1] ?? "") as Role, match[2] ?? null, match[3] ?? null];
}

/** A header's words, where a recipient naming a declared function with spaces in it (`spaced`: such names, their
 * words joined by one space) is one: `to=functions.Web Search`. Not when its first word is a declared name itself. */
function spacedNamesRe(tools: ReadonlySet<string>, spaced: string[]): RegExp {
  const names = spaced.sort(byLengthDown).map((name) => name.split(" ").map(escapeRegExp).join(`[${WHITESPACE}]+`));
  const words = [...tools].filter((tool) => (tool.match(WORD_RE) ?? [])[0] === tool);
  const whole = `(?![^${WHITESPACE}])`; // the word ends there
  const own = words.length > 0 ? `(?!(?:${alt(words)})${whole})` : "";
  const recipient = `${escapeRegExp(TO)}(?:${escapeRegExp(FUNCTIONS_PREFIX)})?${own}(${names.join("|")})${whole}`;
  return new RegExp(`${recipient}|[^${WHITESPACE}]+`, "gu");
}

function bisectRight(sorted: readonly number[], value: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (value < (sorted[mid] as number)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Header text not yet split into words, and where each piece of it began in the input (its character, or the
 * token it came in). */
export class Stretch {
  text = "";
  readonly offsets: number[] = []; // where each piece begins in `text`
  private readonly starts: number[] = []; // and in the input

  add(text: string, position: number): void {
    this.offsets.push(this.text.length);
    this.starts.push(position);
    this.text += text;
  }

  /** Where offset `at` of the text is in the input: its character, or the token it came in. */
  positionOf(at: number, byCharacter: boolean): number {
    const index = bisectRight(this.offsets, at) - 1;
    const start = this.starts[index] as number;
    return byCharacter ? start + cpCount(this.text, this.offsets[index] as number, at) : start;
  }

  /** Take the text from offset `at` on out: that text, and where it began in the input. */
  cut(at: number, byCharacter: boolean): [string, number] {
    const rest = this.text.slice(at);
    const position = this.positionOf(at, byCharacter);
    this.text = this.text.slice(0, at);
    this.offsets.length = this.starts.length = bisectRight(this.offsets, at - 1); // the pieces that begin before `at`
    return [rest, position];
  }
}

/** The GrammarError `feed` throws when the grammar refuses a terminal, or null (any other error propagates). */
export function refusal(feed: () => void): GrammarError | null {
  try {
    feed();
    return null;
  } catch (e) {
    if (!(e instanceof GrammarError)) throw e;
    return e;
  }
}

/** `table[name]`, an entry of a runtime table that the spec's `what` names; one the runtime lacks fails at load. */
export function named<T>(table: Readonly<Record<string, T>>, name: string, what: string): T {
  const found = table[name];
  if (found === undefined) throw new Error(`the spec's ${what} name ${JSON.stringify(name)}, which this runtime lacks`);
  return found;
}

type Condition = (reader: HeaderReader, item: string) => boolean;
type Action = (reader: HeaderReader, item: string, position: number, repair: string | null) => boolean | void;
type Row = readonly [readonly Condition[], Action, string | null];

/** Reads headers into the shared LALR parser, one at a time (`open` starts the next one). */
export class HeaderReader {
  private readonly spacedTools = new Map<string, string>(); // a declared name with spaces, its words joined by one
  private readonly wordRe: RegExp = WORD_RE; // the words of a header's text (`spacedNamesRe` in lenient mode)
  private snapshot = new IncrementalParser(); // the parser before the header's <|start|> (`open` takes it)
  stretch = new Stretch(); // header text not yet split into words
  raw = ""; // the header as the input gave it: its text and its control tokens' spellings
  private words: string[] = []; // words fed to the parser
  said: string[] = []; // every word the input gave for this header, placed or set aside (not the prompt's role)
  private terms: string[] = []; // and their terminals (control terminals too)
  virtual = false; // the header's <|start|>ROLE came from the prompt, not the input (no control token read for it)
  private pending: Parameters<Report>[] = []; // repairs reported when the header is settled
  private fed: Partial<Header> = {}; // the recipient and the channel the grammar took
  private late: Partial<Header> = {}; // lenient: a recipient the grammar could not take there, a channel replacing its own
  private replacingChannel = false; // a second <|channel|> came: its word replaces the channel
  private lateChannel = false; // a <|channel|> after the content type came: its word is the channel
  private setAside = false; // lenient: some of the header's text had no place in it
  private before: string | null = null; // the control token that ends the stretch of text being placed

  constructor(
    private readonly lalr: IncrementalParser,
    private readonly lenient: boolean,
    private readonly role: Role, // the role a header without an author gets (the completion's first role)
    private readonly report: Report,
    private readonly fail: Fail,
    private readonly tools: ReadonlySet<string>, // the declared function names
  ) {
    for (const tool of this.tools) {
      const words = tool.match(WORD_RE) ?? [];
      if (words.length > 1) this.spacedTools.set(words.join(" "), tool);
    }
    if (lenient && this.spacedTools.size > 0) this.wordRe = spacedNamesRe(this.tools, [...this.spacedTools.keys()]);
  }

  // -- input -------------------------------------------------------------------------------------------------

  /** A header begins: after `<|start|>` (fed here), or, given `role`, as if `<|start|>ROLE` had come. */
  open(role: Role | null = null): void {
    this.snapshot = this.lalr.copy();
    this.lalr.feedToken(T_START);
    this.clear();
    this.fed = {};
    this.late = {};
    this.replacingChannel = this.lateChannel = this.setAside = false;
    this.virtual = role !== null;
    if (role === null) this.raw = spellingOf(T_START);
    else this.feed(T_ROLE, role);
  }

  /** Forget the header and the repairs found in it: the parser goes back to where it was before its `<|start|>`. */
  abandon(): void {
    this.lalr.restore(this.snapshot);
    this.clear();
  }

  private clear(): void {
    this.stretch = new Stretch();
    this.words = [];
    this.terms = [];
    this.pending = [];
    this.raw = "";
    this.said = [];
  }

  /** Lenient: where, in the text not yet split into words, a word begins that no header word begins with (JSON),
   * when the header before it has a channel or a recipient (`<|channel|>final {"a": 1}`); an offset into it. */
  bodyStart(): number | null {
    const text = this.stretch.text;
    const match = BODY_START_RE.exec(text);
    if (match === null) return null;
    const before = text.slice(0, match.index);
    return this.terms.includes(T_CHANNEL) || this.fed.recipient || this.late.recipient || before.includes(TO) ? match.index : null;
  }

  /** Take the text not yet split into words from `at` (an offset into it) out of the header: that text, and the
   * position it began at (its character, or the token it began in). */
  splitPending(at: number, byCharacter: boolean): [string, number] {
    const [rest, position] = this.stretch.cut(at, byCharacter);
    this.raw = this.raw.slice(0, Math.max(0, this.raw.length - rest.length)); // the raw header ends with the same text
    return [rest, position];
  }

  /** The first near-miss spelling of a control token that ends in the last piece of the text not yet split into
   * words (one ending earlier was found when its own piece came): where it begins in that text, and the spelling.
   * Only the last piece and the few characters before it are searched. */
  findNearMiss(): [number, string] | null {
    const from = Math.max(0, (this.stretch.offsets.at(-1) ?? 0) - NEAR_MISS_LONGEST + 1);
    const match = NEAR_MISS_IN_HEADER_RE.exec(this.stretch.text.slice(from));
    return match === null ? null : [from + match.index, match[0]];
  }

  addText(text: string, position: number): void {
    this.stretch.add(text, position);
    this.raw += text;
  }

  /** Split the collected text into words and feed them; a word's position is where it starts (its character, or
   * the token it starts in). `before` is the control token that ends the text (null: the end of the stream);
   * lenient mode reads the words knowing it. */
  flushWords(byCharacter: boolean, before: string | null = null): void {
    const stretch = this.stretch;
    const joined = stretch.text;
    if (!joined) return;
    this.stretch = new Stretch();
    const position = (at: number): number => stretch.positionOf(at, byCharacter);
    const spans = [...joined.matchAll(this.wordRe)].map((m): [number, number] => {
      const tool = m[1] === undefined ? undefined : this.spacedTools.get((m[1].match(WORD_RE) ?? []).join(" "));
      // the position is where the recipient starts in the header's text, in characters (as Python reports it)
      if (tool !== undefined) this.fix(spec.RECOVERY_NAME_WITH_SPACE, cpLength(joined.slice(0, m.index)), { name: tool });
      return [m.index, m.index + m[0].length];
    });
    this.before = before;
    let aside: [number, number] | null = null; // lenient: a run of words set aside, reported as the text it spans
    const setAside = ([from, to]: [number, number]): void => {
      this.setAside = true;
      this.fix(spec.RECOVERY_STRAY_HEADER_WORD, position(from), { word: joined.slice(from, to) });
    };
    for (const [start, end] of spans) {
      const word = joined.slice(start, end);
      this.said.push(word);
      if (!this.lenient) {
        this.strictWord(word, position(start));
      } else if (this.apply("word", word, position(start))) {
        aside = [aside !== null ? aside[0] : start, end];
      } else if (aside !== null) {
        setAside(aside);
        aside = null;
      }
    }
    if (aside !== null) setAside(aside);
  }

  /** `<|channel|>`, `<|constrain|>` or `<|start|>` inside the header. */
  control(terminal: string, position: number): void {
    this.raw += spellingOf(terminal);
    const error = refusal(() => this.lalr.feedToken(terminal));
    if (error === null) this.terms.push(terminal);
    else if (this.lenient) this.apply("control_token", terminal, position); // placed by the spec's `control_token` rows
    else this.fail(fill(spec.PARSE_ERR_CONTROL_IN_HEADER, { token: spellingOf(terminal), reason: error.message }), position);
  }

  /** Feed `<|message|>` (repairing the header first in lenient mode): the header, or null if abandoned. */
  complete(position: number): Header | null {
    this.replacingChannel = false;
    const error = refusal(() => this.lalr.feedToken(T_MESSAGE));
    if (error !== null) {
      if (!this.lenient) this.fail(fill(spec.PARSE_ERR_INCOMPLETE_HEADER, { reason: error.message }), position);
      const expected = this.lalr.expected();
      if (expected.has(T_ROLE)) {
        this.addMissingRole(position);
        return this.complete(position);
      }
      if (expected.size !== 1 || !expected.has(T_WORD)) {
        // this grammar refuses <|message|> only without an author (above) or after <|channel|> or <|constrain|> without
        // its word (below); a grammar that refuses more must still not make lenient mode throw
        const detail = fill(spec.PARSE_DETAIL_HEADER_ABANDONED, { reason: error.message });
        this.report(spec.RECOVERY_STRAY_HEADER_WORD, detail, this.words.join(" "), position);
        this.abandon();
        return null;
      }
      const detail = fill(spec.PARSE_DETAIL_CONSTRAIN_WITHOUT_TYPE, { token: spellingOf(T_CONSTRAIN) });
      if (this.terms.at(-1) === T_CHANNEL) this.fixNow(spec.RECOVERY_EMPTY_CHANNEL, position);
      else this.report(spec.RECOVERY_STRAY_HEADER_WORD, detail, "", position);
      this.lalr.feedToken(T_WORD, [T_WORD, ""] as Word);
      this.lalr.feedToken(T_MESSAGE);
    }
    const header = this.lalr.valueAt(-2) as Header; // the header rule, reduced by <|message|>
    this.terms = [];
    if (this.lenient) this.settle(header, position);
    return header;
  }

  /** What the header is, now that a stop token ends it before `<|message|>` (lenient mode; call `flushWords`
   * first). Repairs waiting for the header to be settled are reported only for `Cut.Message`. */
  cut(): Cut {
    if (this.terms.length === 0 && this.words.length === 0 && !this.raw) return Cut.Nothing;
    const recipient = (this.late.recipient || this.fed.recipient) ?? Roles.Assistant; // none, or the assistant: no call
    if (recipient !== Roles.Assistant && !this.setAside) return Cut.Message;
    if (this.virtual && !this.terms.includes(T_CHANNEL) && recipient === Roles.Assistant && strip(this.raw)) return Cut.Headerless;
    return Cut.Junk;
  }

  // -- words -------------------------------------------------------------------------------------------------

  private strictWord(word: string, position: number): void {
    const terminal = ROLES.has(word) && this.lalr.expected().has(T_ROLE) ? T_ROLE : word.startsWith(TO) ? T_TO : T_WORD;
    const error = refusal(() => this.lalr.feedToken(terminal, [terminal, word] as Word));
    if (error !== null) this.fail(fill(spec.PARSE_ERR_HEADER_WORD, { word, reason: error.message }), position);
    this.words.push(word);
    this.terms.push(terminal);
  }

  /** Lenient: feed `word` as `terminal` if the grammar takes it there; whether it did. */
  private feed(terminal: string, word: string): boolean {
    if (!this.lalr.accepts(terminal)) return false;
    this.lalr.feedToken(terminal, [terminal, word] as Word);
    this.words.push(word);
    this.terms.push(terminal);
    return true;
  }

  private feedChannel(channel: string): void {
    this.lalr.feedToken(T_CHANNEL);
    this.terms.push(T_CHANNEL);
    this.feed(T_WORD, channel);
    this.fed.channel = channel;
  }

  /** The first row of a `header_rules` list whose conditions all hold for `item` (a word, or a terminal) acts; true
   * when the word has no place in the header. */
  private apply(list: string, item: string, position: number): boolean {
    for (const [conditions, action, repair] of HeaderReader.RULES.get(list) ?? []) {
      if (conditions.every((condition) => condition(this, item))) return action(this, item, position, repair) === true;
    }
    return true; // not reached: the generator makes each list end with a row without conditions
  }

  /** The conditions of the spec's `header_conditions`, on a word (or a control terminal) and the header so far. */
  private static readonly IF: Readonly<Record<string, Condition>> = {
    author_expected: (r) => r.lalr.expected().has(T_ROLE),
    recipient: (_, word) => word.startsWith(TO),
    after_second_channel: (r) => r.replacingChannel,
    after_late_channel: (r) => r.lateChannel,
    after_channel_marker: (r) => r.terms.at(-1) === T_CHANNEL,
    after_constrain: (r) => r.terms.at(-1) === T_CONSTRAIN,
    repeats_role: (r, word) => r.words.length === 1 && word === r.words[0] && r.terms.length === 1 && r.terms[0] === T_ROLE,
    not_before_channel: (r) => r.before !== T_CHANNEL,
    no_channel_yet: (r) => !r.terms.includes(T_CHANNEL) && r.late.channel === undefined,
    channel_word: (_, word) => CHANNELS.has(channelOf(word)[0]),
    channel_allowed: (r) => r.lalr.accepts(T_CHANNEL),
    content_type: (_, word) => CONTENT_TYPES.has(word.toLowerCase()),
    role_word: (_, word) => roleOf(word) !== null,
    tool_name: (_, word) => word.includes(SEPARATOR) || BUILTIN_NAMESPACES.has(word),
    start_token: (_, terminal) => terminal === T_START,
    channel_token: (_, terminal) => terminal === T_CHANNEL,
    word_expected_only: (r) => r.lalr.expected().size === 1 && r.lalr.expected().has(T_WORD),
    channel_seen: (r) => r.terms.includes(T_CHANNEL),
    no_later_channel: (r) => r.late.channel === undefined,
  };

  /** The actions of the spec's `header_actions`: true when the word has no place in the header (it is set aside). */
  private static readonly DO: Readonly<Record<string, Action>> = {
    author: (r, word, at) => r.apply("author_word", word, at),
    recipient: (r, word, at) => {
      if (r.terms.at(-1) === T_CHANNEL) {
        r.fix(spec.RECOVERY_EMPTY_CHANNEL, at); // `<|channel|> to=…`: no channel word
        r.feed(T_WORD, "");
      }
      r.setRecipient(word, at);
    },
    second_channel_word: (r, word, at) => {
      r.replacingChannel = false;
      if (CONTENT_TYPES.has(word.toLowerCase()) && !CHANNELS.has(word) && r.lalr.accepts(T_WORD)) {
        const channel = r.late.channel ?? r.fed.channel ?? "";
        r.fix(spec.RECOVERY_CONTENT_TYPE_AFTER_CHANNEL, at, { word, token: spellingOf(T_CHANNEL), channel });
        r.feed(T_WORD, word);
        return;
      }
      const [channel, trimmed] = channelOf(word);
      r.fix(spec.RECOVERY_DOUBLED_CHANNEL, at, { word: (r.late.channel ?? r.fed.channel) || "", channel });
      if (trimmed) r.fix(spec.RECOVERY_CHANNEL_PUNCTUATION, at, { word, channel });
      r.late.channel = channel;
    },
    late_channel_word: (r, word, at, repair) => {
      r.lateChannel = false;
      r.fix(repair, at, { token: spellingOf(T_CHANNEL), word });
      r.late.channel = channelOf(word)[0];
    },
    channel_word: (r, word, at) => {
      const [channel, trimmed] = channelOf(word);
      if (trimmed) r.fix(spec.RECOVERY_CHANNEL_PUNCTUATION, at, { word, channel });
      r.feed(T_WORD, channel);
      r.fed.channel = channel;
    },
    constrain_word: (r, word, at) => {
      if (CONTENT_TYPES.has(word.toLowerCase()) || !CHANNELS.has(channelOf(word)[0])) return !r.feed(T_WORD, word);
      r.fix(spec.RECOVERY_SPLICED_CONTENT_TYPE, at, { word }); // `<|constrain|>analysis code`
      return false;
    },
    drop: (r, word, at, repair) => r.fix(repair, at, { word }),
    add_channel_marker: (r, word, at, repair) => {
      r.fix(repair, at, { word, token: spellingOf(T_CHANNEL) });
      r.feedChannel(channelOf(word)[0]);
    },
    content_type: (r, word) => !r.feed(T_WORD, word),
    set_aside: () => true,
    role: (r, word, at) => {
      const [role, channel, recipient] = roleOf(word) as [Role, string | null, string | null];
      r.feed(T_ROLE, role);
      if (word !== role) r.fix(spec.RECOVERY_GLUED_ROLE, at, { word, role });
      if (channel !== null && r.lalr.accepts(T_CHANNEL)) r.feedChannel(channel);
      if (recipient !== null) r.setRecipient(recipient, at);
    },
    recipient_without_role: (r, word, at) => {
      r.addMissingRole(at);
      r.setRecipient(word, at);
    },
    tool_author: (r, word) => !r.feed(T_WORD, word), // the grammar's author is a role or a word: it always takes it
    expected_role: (r, word, at, repair) => {
      r.fix(repair, at, { word, role: r.role });
      r.feed(T_ROLE, r.role);
    },
    restart_header: (r, _, at, repair) => {
      r.fixNow(repair, at, {}, r.said.join(" "));
      r.lalr.restore(r.snapshot);
      r.open(); // the header begins again at this <|start|>
    },
    empty_word_then_token: (r, terminal, at, repair) => {
      r.fixNow(repair, at);
      r.feed(T_WORD, "");
      r.retry(terminal, at);
    },
    role_then_token: (r, terminal, at) => {
      r.addMissingRole(at);
      r.retry(terminal, at);
    },
    second_channel: (r) => {
      r.replacingChannel = true;
    },
    late_channel: (r) => {
      r.lateChannel = true;
    },
    stray_control: (r, terminal, at) => {
      const detail = fill(spec.PARSE_DETAIL_STRAY_CONTROL, { token: spellingOf(terminal) });
      r.pending.push([spec.RECOVERY_STRAY_HEADER_WORD, detail, "", at]);
    },
  };

  /** The spec's `header_rules`, each condition and action resolved once (a name the runtime lacks fails here). */
  private static readonly RULES: ReadonlyMap<string, readonly Row[]> = new Map(
    Object.entries(spec.HEADER_RULES).map(([list, rows]) => [
      list,
      rows.map(([when, then, repair]): Row => [
        when.map((c) => named(HeaderReader.IF, c, "header_rules")),
        named(HeaderReader.DO, then, "header_rules"),
        repair,
      ]),
    ]),
  );

  /** A control token the grammar refused, fed again now that the header was repaired before it. */
  private retry(terminal: string, position: number): void {
    this.raw = this.raw.slice(0, this.raw.length - spellingOf(terminal).length);
    this.control(terminal, position);
  }

  /** Place a recipient word: the grammar takes the first where it can; a later one, or one it cannot take there,
   * replaces it. */
  private setRecipient(word: string, position: number): void {
    const earlier = this.late.recipient ?? this.fed.recipient;
    if (earlier === undefined && this.feed(T_TO, word)) {
      this.fed.recipient = word.slice(TO.length);
      return;
    }
    if (earlier !== undefined) this.fix(spec.RECOVERY_DOUBLED_RECIPIENT, position, { word: TO + earlier });
    else this.fix(spec.RECOVERY_RECIPIENT_OUT_OF_PLACE, position, { word });
    this.late.recipient = word.slice(TO.length);
  }

  // -- repairs -----------------------------------------------------------------------------------------------

  /** A repair reported once the header is settled (a header set aside whole reports only that), with the detail
   * and the text set aside that the spec's table gives `rule` (`described`); none when `rule` is null. */
  private fix(rule: string | null, position: number, values: RepairValues = {}): void {
    if (rule !== null) this.pending.push([rule, ...described(rule, values), position]);
  }

  /** A repair reported at once, as the spec's table describes it. */
  private fixNow(rule: string | null, position: number, values: RepairValues = {}, text?: string): void {
    if (rule !== null) this.report(rule, ...described(rule, values, text), position);
  }

  /** Lenient: apply what the grammar could not hold, then report the header's repairs. */
  private settle(header: Header, position: number): void {
    Object.assign(header, this.late);
    const assistant = header.isRole && header.author === Roles.Assistant;
    if (header.recipient === Roles.Assistant && assistant) {
      this.fix(spec.RECOVERY_RECIPIENT_TO_SELF, position, { recipient: header.recipient });
      header.recipient = null;
      if (header.channel !== spec.CHANNEL_ANSWER) header.channel = spec.CHANNEL_REASONING; // a note to itself, never shown
    }
    if (header.channel !== null && !CHANNELS.has(header.channel) && header.recipient === null && assistant) {
      this.fix(spec.RECOVERY_UNKNOWN_CHANNEL, position, { word: header.channel }); // the bridge makes it reasoning
    }
    const contentType = header.contentType ?? "";
    const name = contentType.slice(CONSTRAIN.length);
    if (header.recipient === null && contentType.startsWith(CONSTRAIN) && (name.startsWith(FUNCTIONS_PREFIX) || this.tools.has(name))) {
      this.fix(spec.RECOVERY_RECIPIENT_AS_CONTENT_TYPE, position, { word: contentType });
      header.recipient = name.startsWith(FUNCTIONS_PREFIX) ? name : FUNCTIONS_PREFIX + name;
      header.contentType = null;
    }
    for (const repair of this.pending) this.report(...repair);
    this.pending = [];
  }

  private addMissingRole(position: number): void {
    this.fixNow(spec.RECOVERY_MISSING_ROLE, position, { role: this.role });
    this.feed(T_ROLE, this.role);
  }
}

/** Lenient repairs that need the declared function names: a missing `functions.` prefix, and a content type glued
 * to a declared name (`functions.shelljson`, `shelljson`). */
export function applyDeclaredTools(header: Header, tools: ReadonlySet<string>, report: Report, position: number): void {
  const recipient = header.recipient;
  if (tools.size === 0 || !recipient) return;
  const fix = (rule: string, values: RepairValues, name: string, text?: string): void => {
    report(rule, ...described(rule, { recipient, ...values }, text), position);
    header.recipient = FUNCTIONS_PREFIX + name;
  };
  if (tools.has(recipient)) return fix(spec.RECOVERY_MISSING_FUNCTIONS_PREFIX, {}, recipient);
  const name = recipient.startsWith(FUNCTIONS_PREFIX) ? recipient.slice(FUNCTIONS_PREFIX.length) : recipient;
  if (tools.has(name)) return;
  const core = name.replace(EDGE_PUNCTUATION, "");
  if (tools.has(core)) {
    // `to=functions.get_weather,`
    const at = name.indexOf(core);
    return fix(spec.RECOVERY_RECIPIENT_PUNCTUATION, { name: core }, core, name.slice(0, at) + name.slice(at + core.length));
  }
  const parts = name.split(SEPARATOR);
  for (let i = 1; i < parts.length && !BUILTIN_NAMESPACES.has(parts[0] as string); i++) {
    // `to=function.get_weather`, `to=functions.functions.get_weather`
    const rest = parts.slice(i).join(SEPARATOR);
    if (tools.has(rest)) return fix(spec.RECOVERY_WRONG_NAMESPACE, { name: rest }, rest, parts.slice(0, i).join(SEPARATOR));
  }
  if (name === recipient && name.includes(SEPARATOR)) return;
  const tool = [...tools].sort(byLengthDown).find((t) => name.startsWith(t) && CONTENT_TYPES.has(name.slice(t.length).toLowerCase()));
  if (tool === undefined) return;
  const rest = name.slice(tool.length);
  fix(spec.RECOVERY_GLUED_CONTENT_TYPE, {}, tool, rest);
  header.contentType ??= CONTENT_TYPES.get(rest.toLowerCase()) ?? null;
}
