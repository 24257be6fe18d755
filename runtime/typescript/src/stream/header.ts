/**
 * One message header: its text split into words, the words fed to the grammar, and the repairs of lenient mode.
 *
 * `HeaderReader` collects a header's text until a control token closes a stretch of it, splits it into words at
 * whitespace (Python's) and feeds each word to the shared LALR parser as a terminal: the lexer terminal for a
 * role (when a role can come there), for a recipient (`to=…`), or any other word. Control tokens inside the
 * header and the closing `<|message|>` are fed too. In strict mode whatever leaves the grammar throws; in lenient
 * mode each repair is reported (`report(rule, detail, text, position)`) and parsing goes on. `complete()` gives
 * the finished `Header`. Mirrors the Python package's `stream/header.py`.
 */

import { GrammarError, type IncrementalParser } from "../lalr.js";
import { pyFormat } from "../pyformat.js";
import { cpLength, isAlnum, PY_WHITESPACE } from "../pytext.js";
import { grammar, type Role, Role as Roles, ROLE_VALUES, spec } from "../tables.js";
import { CONTROL_TERMINALS, spellingOf } from "./lexer.js";

export type Report = (rule: string, detail: string, text: string, position: number) => void;
export type Fail = (message: string, position: number) => never;

export const T_ROLE = grammar.LEXER_TERMINAL_ROLE;
export const T_TO = grammar.LEXER_TERMINAL_RECIPIENT;
export const T_WORD = grammar.LEXER_TERMINAL_WORD;
export const T_START = CONTROL_TERMINALS.get(spec.TOKEN_START) ?? "";
export const T_MESSAGE = CONTROL_TERMINALS.get(spec.TOKEN_MESSAGE) ?? "";
export const T_CHANNEL = CONTROL_TERMINALS.get(spec.TOKEN_CHANNEL) ?? "";
export const T_CONSTRAIN = CONTROL_TERMINALS.get(spec.TOKEN_CONSTRAIN) ?? "";
const TO = spec.HEADER_RECIPIENT_KEYWORD;
const CONSTRAIN = spec.SPELLING_CONSTRAIN;
export const FUNCTIONS_PREFIX = spec.HEADER_FUNCTION_NAMESPACE + spec.HEADER_NAMESPACE_SEPARATOR;
/** Role value → the role. */
export const ROLES: ReadonlyMap<string, Role> = new Map(ROLE_VALUES.map((r) => [String(r), r]));
const WORD_RE = new RegExp(`[^${PY_WHITESPACE}]+`, "gu");
const PARTS: ReadonlySet<string> = new Set([grammar.RULE_AUTHOR, grammar.RULE_RECIPIENT, grammar.RULE_CHANNEL, grammar.RULE_CONTENT_TYPE]);

/** What a complete header says: its author (a role's value, or a tool's name), recipient, channel, type. */
export class Header {
  author: string | null = null;
  isRole = false;
  recipient: string | null = null;
  channel: string | null = null;
  contentType: string | null = null;
}

/** (terminal, text): the value a lexer terminal carries on the parser's stack. */
type Word = readonly [string, string];
/** (part, value, is a role): what a header part contributes. */
type Part = readonly [string, string | null, boolean];

function isWord(value: unknown): value is Word {
  return Array.isArray(value) && value.length === 2;
}

function isPart(value: unknown): value is Part {
  return Array.isArray(value) && value.length === 3 && PARTS.has(value[0] as string);
}

/** The LALR parser's reduce callback: what each header rule contributes (other rules carry nothing). */
export function reduceHeader(origin: string, children: unknown[]): unknown {
  if (origin === grammar.RULE_HEADER) {
    const header = new Header();
    for (const child of children) {
      if (!isPart(child)) continue;
      const [part, value, isRole] = child;
      if (part === grammar.RULE_AUTHOR) {
        header.author = value;
        header.isRole = isRole;
      } else if (part === grammar.RULE_RECIPIENT) header.recipient = value;
      else if (part === grammar.RULE_CHANNEL) header.channel = value;
      else header.contentType = value;
    }
    return header;
  }
  const words = children.filter(isWord);
  const first = words[0] ?? ["", ""];
  if (origin === grammar.RULE_AUTHOR) return [origin, first[1], first[0] === T_ROLE] as Part;
  if (origin === grammar.RULE_RECIPIENT) return [origin, first[1].slice(TO.length), false] as Part;
  if (origin === grammar.RULE_CHANNEL) return [origin, first[1] || null, false] as Part;
  if (origin === grammar.RULE_CONTENT_TYPE) {
    const constrained = children.length === 2; // `<|constrain|>` and a word
    return [origin, (constrained ? CONSTRAIN : "") + first[1], false] as Part;
  }
  return null;
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

/** Reads headers into the shared LALR parser, one at a time (`open` starts the next one). */
export class HeaderReader {
  private snapshot: IncrementalParser;
  private text: string[] = []; // header text not yet split into words
  private starts: number[] = []; // where each piece of that text began
  private words: string[] = []; // words fed to the parser
  private terms: string[] = []; // and their terminals (control terminals too)
  private virtualStart = false; // the header's <|start|>ROLE came from the prompt, not the input
  private skippingChannel = false;

  constructor(
    private readonly lalr: IncrementalParser,
    private readonly lenient: boolean,
    private readonly role: Role | null, // the completion's first role, and the role a header without an author gets
    private readonly report: Report,
    private readonly fail: Fail,
  ) {
    this.snapshot = lalr.copy();
  }

  // -- state -------------------------------------------------------------------------------------------------

  /** Whether this header's `<|start|>ROLE` was the prompt's (no control token read for it). */
  get virtual(): boolean {
    return this.virtualStart;
  }

  /** No word and no control token fed since `<|start|>`. */
  get empty(): boolean {
    return this.terms.length === 0 && this.words.length === 0;
  }

  /** Nothing was read for this header: it is the prompt's `<|start|>ROLE` alone. */
  get untouched(): boolean {
    return this.virtualStart && this.terms.length === 1 && this.terms[0] === T_ROLE && this.words.length === 1 && this.text.length === 0;
  }

  /** The header's words as the input gave them (not the role a completion starts in). */
  spokenWords(): string {
    return (this.virtualStart ? this.words.slice(1) : this.words).join(" ");
  }

  pendingText(): string {
    return this.text.join("");
  }

  /** The header text not yet split into words, taken out of the header. */
  takePendingText(): string {
    const text = this.text.join("");
    this.text = [];
    this.starts = [];
    return text;
  }

  // -- input -------------------------------------------------------------------------------------------------

  /** A header begins: after `<|start|>` (fed here), or, given `role`, as if `<|start|>ROLE` had come. */
  open(role: Role | null = null): void {
    this.snapshot = this.lalr.copy();
    this.lalr.feedToken(T_START);
    this.text = [];
    this.starts = [];
    this.skippingChannel = false;
    if (role === null) {
      this.words = [];
      this.terms = [];
      this.virtualStart = false;
      return;
    }
    this.lalr.feedToken(T_ROLE, [T_ROLE, role] as Word);
    this.words = [role];
    this.terms = [T_ROLE];
    this.virtualStart = true;
  }

  /** Forget the header: the parser goes back to where it was before the header's `<|start|>`. */
  abandon(): void {
    this.lalr.restore(this.snapshot);
    this.text = [];
    this.starts = [];
    this.words = [];
    this.terms = [];
  }

  addText(text: string, position: number): void {
    this.text.push(text);
    this.starts.push(position);
  }

  /** Split the collected text into words and feed them; a word's position is where it starts (its character,
   * or the token it starts in). */
  flushWords(byCharacter: boolean): void {
    if (this.text.length === 0) return;
    const pieces = this.text;
    const starts = this.starts;
    this.text = [];
    this.starts = [];
    const ends: number[] = [];
    let total = 0;
    for (const piece of pieces) ends.push((total += piece.length));
    const joined = pieces.join("");
    WORD_RE.lastIndex = 0;
    for (let m = WORD_RE.exec(joined); m !== null; m = WORD_RE.exec(joined)) {
      const index = bisectRight(ends, m.index);
      const pieceStart = index > 0 ? (ends[index - 1] as number) : 0;
      const offset = byCharacter ? cpLength(joined.slice(pieceStart, m.index)) : 0;
      this.word(m[0], (starts[index] as number) + offset);
    }
  }

  /** `<|channel|>`, `<|constrain|>` or `<|start|>` inside the header. */
  control(terminal: string, position: number): void {
    try {
      this.lalr.feedToken(terminal);
    } catch (e) {
      if (!(e instanceof GrammarError)) throw e;
      if (!this.lenient) this.fail(pyFormat(spec.PARSE_ERR_CONTROL_IN_HEADER, { token: spellingOf(terminal), reason: e.message }), position);
      this.repairControl(terminal, position);
      return;
    }
    this.terms.push(terminal);
  }

  /** Feed `<|message|>` (repairing the header first in lenient mode): the header, or null if abandoned. */
  complete(position: number): Header | null {
    const lalr = this.lalr;
    this.skippingChannel = false;
    try {
      lalr.feedToken(T_MESSAGE);
    } catch (e) {
      if (!(e instanceof GrammarError)) throw e;
      if (!this.lenient) this.fail(pyFormat(spec.PARSE_ERR_INCOMPLETE_HEADER, { reason: e.message }), position);
      const expected = lalr.expected();
      if (expected.has(T_ROLE)) {
        this.addMissingRole(position);
        return this.complete(position);
      }
      if (expected.size === 1 && expected.has(T_WORD)) {
        if (this.terms[this.terms.length - 1] === T_CHANNEL) {
          this.report(spec.RECOVERY_EMPTY_CHANNEL, spec.PARSE_DETAIL_EMPTY_CHANNEL, "", position);
        } else {
          const detail = pyFormat(spec.PARSE_DETAIL_CONSTRAIN_WITHOUT_TYPE, { token: spellingOf(T_CONSTRAIN) });
          this.report(spec.RECOVERY_STRAY_HEADER_WORD, detail, "", position);
        }
        lalr.feedToken(T_WORD, [T_WORD, ""] as Word);
        lalr.feedToken(T_MESSAGE);
      } else {
        // cannot happen with this grammar; keeps the promise never to throw
        const detail = pyFormat(spec.PARSE_DETAIL_HEADER_ABANDONED, { reason: e.message });
        this.report(spec.RECOVERY_STRAY_HEADER_WORD, detail, this.words.join(" "), position);
        this.abandon();
        return null;
      }
    }
    const header = lalr.valueAt(-2);
    if (!(header instanceof Header)) throw new Error("HeaderReader: the grammar gave no header");
    this.terms = [];
    return header;
  }

  // -- words -------------------------------------------------------------------------------------------------

  private classify(word: string): string {
    if (ROLES.has(word) && this.lalr.expected().has(T_ROLE)) return T_ROLE;
    if (word.startsWith(TO)) return T_TO;
    return T_WORD;
  }

  private word(word: string, position: number): void {
    const terminal = this.classify(word);
    if (this.lenient) {
      if (this.words.length === 1 && word === this.words[0] && this.terms.length === 1) {
        this.report(spec.RECOVERY_DOUBLED_ROLE, pyFormat(spec.PARSE_DETAIL_DOUBLED_ROLE, { word }), word, position);
        return;
      }
      if (this.skippingChannel) {
        this.skippingChannel = false;
        this.report(spec.RECOVERY_DOUBLED_CHANNEL, pyFormat(spec.PARSE_DETAIL_DOUBLED_CHANNEL, { word }), word, position);
        return;
      }
    }
    try {
      this.lalr.feedToken(terminal, [terminal, word] as Word);
    } catch (e) {
      if (!(e instanceof GrammarError)) throw e;
      if (!this.lenient) this.fail(pyFormat(spec.PARSE_ERR_HEADER_WORD, { word, reason: e.message }), position);
      if (this.terms[this.terms.length - 1] === T_CHANNEL) {
        this.fillEmptyChannel(position);
        this.word(word, position);
      } else if (terminal === T_TO && this.terms.includes(T_TO)) {
        this.report(spec.RECOVERY_DOUBLED_RECIPIENT, pyFormat(spec.PARSE_DETAIL_DOUBLED_RECIPIENT, { word }), word, position);
      } else {
        this.report(spec.RECOVERY_STRAY_HEADER_WORD, pyFormat(spec.PARSE_DETAIL_STRAY_WORD, { word }), word, position);
      }
      return;
    }
    this.words.push(word);
    this.terms.push(terminal);
  }

  // -- repairs -----------------------------------------------------------------------------------------------

  private fillEmptyChannel(position: number): void {
    this.report(spec.RECOVERY_EMPTY_CHANNEL, spec.PARSE_DETAIL_EMPTY_CHANNEL, "", position);
    this.lalr.feedToken(T_WORD, [T_WORD, ""] as Word);
    this.terms.push(T_WORD);
  }

  private addMissingRole(position: number): void {
    const role = this.role ?? Roles.Assistant;
    this.report(spec.RECOVERY_MISSING_ROLE, pyFormat(spec.PARSE_DETAIL_MISSING_ROLE, { role }), "", position);
    this.lalr.feedToken(T_ROLE, [T_ROLE, role] as Word);
    this.words.push(role);
    this.terms.push(T_ROLE);
  }

  private repairControl(terminal: string, position: number): void {
    const expected = this.lalr.expected();
    if (terminal === T_START) {
      const abandoned = (this.virtualStart ? this.words.slice(1) : this.words).join(" ");
      this.report(spec.RECOVERY_REPEATED_START, spec.PARSE_DETAIL_REPEATED_START, abandoned, position);
      this.lalr.restore(this.snapshot);
      this.lalr.feedToken(terminal);
      this.words = [];
      this.terms = [];
      this.virtualStart = false;
      return;
    }
    if (expected.size === 1 && expected.has(T_WORD) && this.terms[this.terms.length - 1] === T_CHANNEL) {
      this.fillEmptyChannel(position);
      this.control(terminal, position);
      return;
    }
    if (expected.has(T_ROLE)) {
      this.addMissingRole(position);
      this.control(terminal, position);
      return;
    }
    if (terminal === T_CHANNEL && this.terms.includes(T_CHANNEL)) {
      this.skippingChannel = true;
      return;
    }
    const detail = pyFormat(spec.PARSE_DETAIL_STRAY_CONTROL, { token: spellingOf(terminal) });
    this.report(spec.RECOVERY_STRAY_HEADER_WORD, detail, "", position);
  }
}

/** Lenient repairs that need the declared function names: a missing `functions.` prefix, and a content type
 * glued to a declared name (`functions.shelljson`). */
export function applyDeclaredTools(header: Header, tools: Iterable<string>, report: Report, position: number): void {
  const declared = new Set(tools);
  if (header.recipient !== null && declared.has(header.recipient)) {
    const detail = pyFormat(spec.PARSE_DETAIL_MISSING_FUNCTIONS_PREFIX, { recipient: header.recipient });
    report(spec.RECOVERY_MISSING_FUNCTIONS_PREFIX, detail, "", position);
    header.recipient = FUNCTIONS_PREFIX + header.recipient;
  }
  const recipient = header.recipient;
  if (declared.size > 0 && recipient && recipient.startsWith(FUNCTIONS_PREFIX)) {
    const name = recipient.slice(FUNCTIONS_PREFIX.length);
    if (declared.has(name)) return;
    for (const tool of [...declared].sort((a, b) => cpLength(b) - cpLength(a))) {
      const rest = name.slice(tool.length);
      if (name.startsWith(tool) && isAlnum(rest)) {
        report(spec.RECOVERY_GLUED_CONTENT_TYPE, pyFormat(spec.PARSE_DETAIL_GLUED_CONTENT_TYPE, { recipient }), rest, position);
        header.recipient = FUNCTIONS_PREFIX + tool;
        if (header.contentType === null) header.contentType = rest;
        break;
      }
    }
  }
}
