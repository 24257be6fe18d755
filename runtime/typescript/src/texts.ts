/**
 * The spec's text rules (spec/harmony/format.json): `fill` the spec's texts under the placeholder rule of `texts`;
 * white space, and lengths and offsets in code points, as `text_rules` defines them.
 *
 * `{name}` inserts the value as plain text (a string as is, any other value as its JSON text: an integer in
 * decimal, `null`, `true`); `{name:json}` its JSON text
 * (`JSON.stringify`); `{name:pyrepr}`, allowed only in the texts the drop-in API copies from openai-harmony,
 * Python's `repr` of a string (the rule is written beside it in the spec); `{{` and `}}` are literal braces.
 */

import { spec } from "./tables.js";

const FIELD = /\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(?::(json|pyrepr))?\}/g;

/** `template` with each placeholder replaced by its value, under the spec's placeholder rule. */
export function fill(template: string, values: Readonly<Record<string, unknown>>): string {
  return template.replace(FIELD, (whole: string, name: string | undefined, form: string | undefined) => {
    if (name === undefined) return whole.charAt(0);
    if (!(name in values)) throw new Error(`the text's placeholder ${whole} has no value`);
    const value = values[name];
    if (form === undefined && typeof value === "string") return value;
    if (typeof value === "bigint") return String(value); // a token id past 2**53: its digits
    if (form === "pyrepr") return typeof value === "string" ? pyrepr(value) : String(value);
    return JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? Number(v) : v)) ?? "null";
  });
}

const NOT_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;
const SHORT: Readonly<Record<string, string>> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/** The spec's `pyrepr` form of a string: single quotes unless it has a single quote and no double quote. */
export function pyrepr(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  return quote + escapeText(text, { ...SHORT, [quote]: "\\" + quote }, pyEscape) + quote;
}

function pyEscape(code: number): string {
  const [prefix, width] = code < 0x100 ? ["\\x", 2] : code < 0x10000 ? ["\\u", 4] : ["\\U", 8];
  return prefix + code.toString(16).padStart(width, "0");
}

/** `text` with each character of `short` replaced, and each other one Unicode does not print (but the space) by `long`. */
export function escapeText(text: string, short: Readonly<Record<string, string>>, long: (code: number) => string): string {
  let out = "";
  for (const ch of text) out += short[ch] ?? (ch === " " || !NOT_PRINTABLE.test(ch) ? ch : long(ch.codePointAt(0) ?? 0));
  return out;
}

/** `'a', 'b' or 'c'`: a list of choices as the Python package's error texts give them. */
export function quoted(items: readonly string[]): string {
  return items.map((t) => `'${t}'`).join(", ").replace(/, ([^,]*)$/, " or $1");
}

/** `text_rules.whitespace` as a regular-expression class body (flag `u`). */
export const WHITESPACE: string = spec.WHITESPACE_RANGES.map(([a, b]) => `\\u{${a.toString(16)}}-\\u{${b.toString(16)}}`).join("");
const EDGES = new RegExp(`^[${WHITESPACE}]+|[${WHITESPACE}]+$`, "gu");
const ALNUM = /^[\p{L}\p{N}]+$/u;

export function strip(text: string): string {
  return text.replace(EDGES, "");
}

/** Not empty, and every character a letter or a number (Unicode L and N). */
export function isAlnum(text: string): boolean {
  return ALNUM.test(text);
}

/** The code points of `text` (a surrogate pair counts once, a lone surrogate once). */
export function cpLength(text: string): number {
  return cpCount(text, 0, text.length);
}

/** The code points between UTF-16 offsets `start` and `end`, without slicing. */
export function cpCount(text: string, start: number, end: number): number {
  let n = 0;
  for (let i = start; i < end; i += pairAt(text, i) && i + 1 < end ? 2 : 1) n++; // a pair counts once when both halves are in
  return n;
}

export function cpPrefix(text: string, count: number): string {
  let i = 0;
  for (let k = 0; k < count && i < text.length; k++) i += pairAt(text, i) ? 2 : 1;
  return text.slice(0, i);
}

/** Whether a surrogate pair starts at UTF-16 offset `i`. */
function pairAt(text: string, i: number): boolean {
  const low = text.charCodeAt(i + 1);
  return isHighSurrogate(text.charCodeAt(i)) && low >= 0xdc00 && low <= 0xdfff;
}

export function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

/** Escape `text` for a regular expression with the `u` flag. */
export function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
}

/** A regular-expression alternation matching any of `words` literally. */
export const alt = (words: readonly string[]): string => words.map(escapeRegExp).join("|");
