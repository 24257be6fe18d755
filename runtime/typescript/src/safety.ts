/**
 * Keep untrusted text from becoming Harmony structure, and spot structure leaking into visible text.
 *
 * `escapeControlTokens` makes text that contains no `<|` at all (so no control-token spelling), and
 * `unescapeControlTokens` gives the original back exactly: `<` followed by k word joiners (U+2060) and `|`
 * becomes `<`, k+1 word joiners, `|`. `escapeControlTokensJson` writes a JSON string whose `<` before `|` is
 * `\u003c`, so any JSON parser reads the original text back.
 *
 * `detectLeak` flags control-token spellings, header fragments (`to=functions.` next to a second header
 * signal on its line) and glued role/channel words (`assistantfinal`) in text meant for users, but not in
 * Markdown code (inline code spans and fenced blocks). It runs in time linear in the text: every pattern is
 * scanned once, and each line's header signals are found once, however many fragments the line holds.
 */

import { writeJson } from "./json.js";
import { Role, spec } from "./tables.js";
import { alt, escapeRegExp as esc, WHITESPACE as SPACE } from "./texts.js";

const JOINER = "\u2060";
const OPEN = spec.SPELLING_OPEN;
const OPEN_FIRST = OPEN.slice(0, 1);
const OPEN_REST = OPEN.slice(1);

const ESCAPE_RE = new RegExp(`${esc(OPEN_FIRST)}(${JOINER}*)${esc(OPEN_REST)}`, "g");
const UNESCAPE_RE = new RegExp(`${esc(OPEN_FIRST)}(${JOINER}+)${esc(OPEN_REST)}`, "g");
const [RESERVED_HEAD = "", RESERVED_TAIL = ""] = spec.RESERVED_SPELLING.split("{id}");
const LONGEST_FIRST = Object.keys(spec.NAMED_TOKENS).sort((a, b) => b.length - a.length);
const SPECIAL_RE = new RegExp(`${alt(LONGEST_FIRST)}|${esc(RESERVED_HEAD)}[0-9]+${esc(RESERVED_TAIL)}`, "g");
const FUNCTION_RECIPIENT = spec.HEADER_RECIPIENT_KEYWORD + spec.HEADER_FUNCTION_NAMESPACE + spec.HEADER_NAMESPACE_SEPARATOR;
// SPACE: the spec's white space (Python's isspace; JavaScript's `\s` adds U+FEFF, lacks U+001C–U+001F, U+0085), flag `u`.
const RECIPIENT_RE = new RegExp(`${esc(FUNCTION_RECIPIENT)}[^${SPACE}]*`, "gu");
const GLUED_RE = new RegExp(`${esc(Role.Assistant)}(?:${alt(spec.CHANNELS)})(?![a-z])`, "g");
const SIGNAL_SOURCE =
  `(?:^|[${SPACE}]|${esc(Role.Assistant)})(?:${alt(spec.CHANNELS)})(?![a-z])` +
  `|(?:^|[${SPACE}])(?:${alt(spec.CONTENT_TYPES)})(?=\\{|[${SPACE}]|$)|${esc(OPEN)}`;
const SIGNAL_RE = new RegExp(SIGNAL_SOURCE, "gu");
const SIGNAL_TEST = new RegExp(SIGNAL_SOURCE, "u");
const CODE_RE = /```[\s\S]*?(?:```|$)|`[^`\n]*`/g;
// Every signal is shorter than this; a window this wide around the join of a line's two parts sees all
// matches that the join creates.
const WINDOW = 64;

/** Text with no `<|` left; `unescapeControlTokens` inverts it exactly. */
export function escapeControlTokens(text: string): string {
  return text.replace(ESCAPE_RE, (_m: string, joiners: string) => OPEN_FIRST + joiners + JOINER + OPEN_REST);
}

/** The inverse of `escapeControlTokens`. */
export function unescapeControlTokens(text: string): string {
  return text.replace(UNESCAPE_RE, (_m: string, joiners: string) => OPEN_FIRST + joiners.slice(1) + OPEN_REST);
}

/** A JSON string literal for `text` in which no control-token spelling appears literally. */
export function escapeControlTokensJson(text: string): string {
  return writeJson(text, { ensureAscii: false }).split(OPEN).join("\\u003c" + OPEN_REST);
}

export type LeakKind = "control_token" | "header_fragment" | "glued_header";

/** A place in visible text that looks like Harmony structure (offsets in UTF-16 code units). */
export interface Leak {
  readonly kind: LeakKind;
  readonly start: number;
  readonly end: number;
  readonly text: string;
}

/** Which UTF-16 offsets of `text` are inside Markdown code (inline spans and fenced blocks): 1 inside. */
function codeMask(text: string): Uint8Array {
  const mask = new Uint8Array(text.length);
  for (const m of text.matchAll(CODE_RE)) mask.fill(1, m.index, m.index + m[0].length);
  return mask;
}

/** Whether `left + " " + right` holds a header signal: signals inside either part, or across the join. */
function signalAround(line: string, signals: readonly [number, number][], leftEnd: number, rightStart: number): boolean {
  if (signals.some(([s, e]) => e <= leftEnd || s >= rightStart)) return true;
  const winStart = Math.max(0, leftEnd - WINDOW);
  // A window cut inside the line must not let `^` match where the line goes on: a letter stands before it.
  // Likewise a window cut short on the right must not let `$` match: a letter stands after it.
  const head = winStart > 0 ? "x" : "";
  const tail = rightStart + WINDOW < line.length ? "x" : "";
  const window = head + line.slice(winStart, leftEnd) + " " + line.slice(rightStart, rightStart + WINDOW) + tail;
  return SIGNAL_TEST.test(window);
}

/** Control-token spellings and header fragments outside Markdown code, in text order. */
export function detectLeak(text: string): Leak[] {
  const code = codeMask(text);
  const leaks: Leak[] = [];
  for (const [kind, pattern] of [["control_token", SPECIAL_RE], ["glued_header", GLUED_RE]] as const) {
    for (const m of text.matchAll(pattern)) {
      if (code[m.index] !== 1) leaks.push({ kind, start: m.index, end: m.index + m[0].length, text: m[0] });
    }
  }
  let line = { start: -1, end: -1, text: "", signals: [] as [number, number][] };
  for (const m of text.matchAll(RECIPIENT_RE)) {
    const start = m.index;
    const end = start + m[0].length;
    if (code[start] === 1) continue;
    if (start >= line.end) {
      // Matches come in text order: the search back stops at the previous line's end, so text is read once.
      const lineStart = start === 0 ? 0 : text.lastIndexOf("\n", start - 1) + 1;
      const nl = text.indexOf("\n", end);
      const lineText = text.slice(lineStart, nl < 0 ? text.length : nl);
      // the line's header signals, found once: `[start, end)` in line coordinates, in order
      const signals = Array.from(lineText.matchAll(SIGNAL_RE), (s): [number, number] => [s.index, s.index + s[0].length]);
      line = { start: lineStart, end: lineStart + lineText.length, text: lineText, signals };
    }
    if (signalAround(line.text, line.signals, start - line.start, end - line.start)) {
      leaks.push({ kind: "header_fragment", start, end, text: m[0] });
    }
  }
  leaks.sort((a, b) => a.start - b.start || a.end - b.end);
  return leaks;
}
