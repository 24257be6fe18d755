/**
 * The event parser's input side: token ids, text or bytes → control terminals and pieces of text.
 *
 * A lexer knows nothing of messages: it hands each control token it finds to its sink as the grammar's terminal
 * (`grammar.CONTROL_TERMINALS`), and everything else as text, with the position where it began. `TokenLexer`
 * decodes token ids (a character split across tokens is held until it is whole); `TextLexer` reads text with
 * control tokens spelled out, in any chunks (a chunk's tail that may be half a spelling is held until the next
 * chunk says).
 *
 * Positions: `TokenLexer` counts tokens; `TextLexer` counts code points, as Python's `len` does, so positions
 * equal the Python package's for any text. A chunk that ends in the first half of a surrogate pair has that
 * half held until the next chunk, so positions and pieces do not depend on where JavaScript strings are cut.
 */

import { isUtf8 } from "node:buffer";
import { cpLength, escapeRegExp, isHighSurrogate } from "../texts.js";
import type { HarmonyEncoding } from "../encoding.js";
import { HarmonyError } from "../errors.js";
import { grammar, spec } from "../tables.js";
import { decodeReplacing, Utf8Stream } from "../utf8.js";

const TERMINAL_OF_SPELLING: ReadonlyMap<string, string> = new Map(
  Object.entries(grammar.CONTROL_SPELLINGS).map(([terminal, spelling]) => [spelling, terminal]),
);
const LONGEST_FIRST = [...TERMINAL_OF_SPELLING.keys()].sort((a, b) => b.length - a.length);
const SPELLING_RE = new RegExp(LONGEST_FIRST.map(escapeRegExp).join("|"), "gu");
const OPEN = spec.SPELLING_OPEN[0] ?? ""; // every spelling starts with it: text without it holds no control token
/** Every proper prefix of a spelling: a chunk that ends in one may go on with the rest of the spelling. */
const PREFIXES: ReadonlySet<string> = new Set(LONGEST_FIRST.flatMap((s) => [...s].slice(1).map((_, i) => s.slice(0, i + 1))));
const MAX_PREFIX = (LONGEST_FIRST[0] ?? "").length - 1;

export function spellingOf(terminal: string): string {
  return grammar.CONTROL_SPELLINGS[terminal] ?? "";
}

/** Where a lexer sends what it reads. */
export interface Sink {
  onControl(terminal: string, position: number): void;
  onText(text: string, position: number): void;
  onInvalidToken(token: number, position: number): void;
}

/** Token ids → pieces. `position` counts the tokens read so far. */
export class TokenLexer {
  private readonly decoder = new Utf8Stream();
  private readonly texts = new Map<number, string | null>(); // token → its text; null: not whole UTF-8 on its own
  position = 0;

  constructor(
    private readonly encoding: HarmonyEncoding,
    private readonly sink: Sink,
  ) {}

  feed(tokens: Iterable<number>): void {
    for (const token of tokens) {
      const terminal = grammar.CONTROL_TERMINALS[token];
      if (terminal !== undefined) {
        this.finish(); // a control token ends an unfinished character too
        this.sink.onControl(terminal, this.position);
      } else {
        const text = this.decode(token);
        if (text) this.sink.onText(text, this.position);
      }
      this.position += 1;
    }
  }

  /** For a caller's fast path: the text of `token` if it is an ordinary token seen before, whole UTF-8 on its own,
   * and no bytes of an unfinished character are held (the text would depend on them); the token is then read, and
   * the caller passes its text on itself. Otherwise null, and nothing is read. */
  take(token: number): string | null {
    const text = this.decoder.pending ? null : (this.texts.get(token) ?? null);
    if (text) this.position += 1;
    return text;
  }

  /** End of input: a character left unfinished becomes U+FFFD. */
  finish(): void {
    const text = this.decoder.decode(new Uint8Array(0), true); // holds nothing after a final decode
    if (text) this.sink.onText(text, this.position);
  }

  private decode(token: number): string | null {
    let text = this.texts.get(token);
    if (text === undefined) {
      try {
        const bytes = this.encoding.decodeBytes([token]);
        text = isUtf8(bytes) ? decodeReplacing(bytes) : null; // null: not whole UTF-8 on its own
      } catch (e) {
        if (!(e instanceof HarmonyError)) throw e;
        this.sink.onInvalidToken(token, this.position);
        return null;
      }
      this.texts.set(token, text);
    }
    return text !== null && !this.decoder.pending ? text : this.decoder.decode(this.encoding.decodeBytes([token]));
  }
}

/** Text with control tokens spelled out (or its UTF-8 bytes) → pieces. `position` counts code points. */
export class TextLexer {
  private held = ""; // a tail that may be the start of a spelling, and a first half of a surrogate pair
  private base = 0; // code points before `held`
  private readonly bytes = new Utf8Stream();
  position = 0; // code points received, held ones included (not a dangling first half of a pair)

  constructor(private readonly sink: Sink) {}

  /** `final`: no more text comes, so nothing is held (a held tail is text after all). */
  feed(text: string, final = false): void {
    let buf = this.held ? this.held + text : text;
    this.held = "";
    const dangling = !final && isHighSurrogate(buf.charCodeAt(buf.length - 1)) ? buf.slice(-1) : ""; // empty: NaN, no half
    if (dangling) buf = buf.slice(0, -1);
    let at = this.base; // the position of buf[index]
    this.position = at + cpLength(buf);
    let index = 0;
    for (const m of buf.matchAll(SPELLING_RE)) {
      if (m.index > index) {
        const piece = buf.slice(index, m.index);
        this.sink.onText(piece, at);
        at += cpLength(piece);
      }
      this.sink.onControl(TERMINAL_OF_SPELLING.get(m[0]) ?? "", at);
      at += m[0].length; // spellings are ASCII
      index = m.index + m[0].length;
    }
    const tail = buf.slice(index);
    // hold a tail that may be the start of a spelling (OPEN is only ever a spelling's first character)
    let cut = final ? tail.length : Math.max(0, tail.length - MAX_PREFIX);
    while (cut < tail.length && (tail[cut] !== OPEN || !PREFIXES.has(tail.slice(cut)))) cut++;
    const heldPrefix = tail.slice(cut);
    if (cut > 0) this.sink.onText(tail.slice(0, cut), at);
    this.held = heldPrefix + dangling;
    this.base = this.position - heldPrefix.length; // a held prefix is ASCII
  }

  /** For a caller's fast path: whether `text` would reach the sink as exactly one piece of text (no control token
   * can start in it and nothing is held); if so it is read, and the caller passes it on itself. */
  take(text: string): boolean {
    if (this.held || text.includes(OPEN) || isHighSurrogate(text.charCodeAt(text.length - 1))) return false;
    const n = cpLength(text);
    this.position += n;
    this.base += n;
    return true;
  }

  /** UTF-8 bytes, split anywhere (even inside a character); invalid bytes become U+FFFD. */
  feedBytes(data: Uint8Array): void {
    this.feed(this.bytes.decode(data));
  }

  /** End of input: bytes of an unfinished character become U+FFFD; a held tail is text after all. */
  finish(): void {
    this.feed(this.bytes.decode(new Uint8Array(0), true), true);
  }
}
