/**
 * Python's string semantics where the Python package's results depend on them: whitespace as `str.isspace`
 * and `re`'s `\s` see it, `str.isalnum`, `str.strip`, and lengths and offsets in code points (Python's `len`)
 * rather than UTF-16 units. With these, positions and splits agree with the Python package for any text.
 */

/** `str.isspace()` / `re`'s `\s` for str patterns, as a regular-expression class body (flag `u`). */
export const PY_WHITESPACE = "\\t-\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";

const SPACE = new RegExp(`^[${PY_WHITESPACE}]$`, "u");
const ALNUM = /^[\p{L}\p{N}]+$/u;
const LEADING = new RegExp(`^[${PY_WHITESPACE}]+`, "u");
const TRAILING = new RegExp(`[${PY_WHITESPACE}]+$`, "u");

/** `ch.isspace()` for one character. */
export function isSpace(ch: string): boolean {
  return SPACE.test(ch);
}

/** `ch.isspace()` for one UTF-16 unit (every character Python calls white space is in the BMP). */
export function isSpaceUnit(unit: number): boolean {
  return (
    (unit >= 0x09 && unit <= 0x0d) ||
    (unit >= 0x1c && unit <= 0x20) ||
    unit === 0x85 ||
    unit === 0xa0 ||
    unit === 0x1680 ||
    (unit >= 0x2000 && unit <= 0x200a) ||
    unit === 0x2028 ||
    unit === 0x2029 ||
    unit === 0x202f ||
    unit === 0x205f ||
    unit === 0x3000
  );
}

/** `text.isalnum()`: not empty, and every character a letter or a number. */
export function isAlnum(text: string): boolean {
  return ALNUM.test(text);
}

/** `text.strip()`. */
export function strip(text: string): string {
  return text.replace(LEADING, "").replace(TRAILING, "");
}

/** `len(text)`: code points (a surrogate pair counts once, a lone surrogate once). */
export function cpLength(text: string): number {
  return cpCount(text, 0, text.length);
}

/** `len(text[start:end])` for UTF-16 offsets `start` and `end`: the code points between them, without slicing. */
export function cpCount(text: string, start: number, end: number): number {
  let n = end - start;
  for (let i = start; i < end - 1; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/** `text[:count]`, `count` in code points. */
export function cpPrefix(text: string, count: number): string {
  let i = 0;
  for (let k = 0; k < count && i < text.length; k++) {
    const c = text.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && isLowSurrogate(text.charCodeAt(i + 1)) ? 2 : 1;
  }
  return text.slice(0, i);
}

export function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

export function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** Escape `text` for a regular expression with the `u` flag. */
export function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
}
