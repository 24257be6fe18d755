/**
 * UTF-8 as Python's codec reports it: where the first bad sequence starts, how long it is, and whether the
 * data merely ends inside a character ("unexpected end of data"). Replacement follows the same "maximal
 * subpart" rule as Python and `TextDecoder`, so both languages produce the same text from the same bytes.
 */

/** The first problem in a byte string: `length` bytes from `start` are invalid, or (`incomplete`) the data
 * ends inside a character that starts at `start`. */
export interface Utf8Problem {
  readonly start: number;
  readonly length: number;
  readonly incomplete: boolean;
}

const replacing = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });
const encoder = new TextEncoder();

/** The first invalid or unfinished sequence in `bytes`, or null if it is all valid UTF-8. */
export function firstUtf8Problem(bytes: Uint8Array): Utf8Problem | null {
  const n = bytes.length;
  let i = 0;
  while (i < n) {
    const b = bytes[i] ?? 0;
    if (b < 0x80) {
      i += 1;
      continue;
    }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      if (b === 0xe0) lo = 0xa0;
      else if (b === 0xed) hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      if (b === 0xf0) lo = 0x90;
      else if (b === 0xf4) hi = 0x8f;
    } else return { start: i, length: 1, incomplete: false };
    let j = 1;
    for (; j <= need; j++) {
      if (i + j >= n) return { start: i, length: j, incomplete: true };
      const c = bytes[i + j] ?? 0;
      const ok = j === 1 ? c >= lo && c <= hi : c >= 0x80 && c <= 0xbf;
      if (!ok) return { start: i, length: j, incomplete: false };
    }
    i += need + 1;
  }
  return null;
}

/** Decode, replacing each invalid sequence with U+FFFD (Python's `errors="replace"`). */
export function decodeReplacing(bytes: Uint8Array): string {
  return replacing.decode(bytes);
}

/** The UTF-8 bytes of `text`; lone surrogates become U+FFFD, as Python's `surrogatepass`/`replace` round trip. */
export function encodeUtf8(text: string): Uint8Array {
  return encoder.encode(text);
}

/** Concatenate byte strings. */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Where the data ends inside a character that more bytes could finish (its first byte), else `bytes.length`. */
function unfinishedTail(bytes: Uint8Array): number {
  const n = bytes.length;
  for (let k = 1; k <= Math.min(3, n); k++) {
    const b = bytes[n - k] ?? 0;
    if (b < 0x80) return n;
    if (b >= 0xc0) {
      const problem = firstUtf8Problem(bytes.subarray(n - k));
      return problem !== null && problem.start === 0 && problem.incomplete ? n - k : n;
    }
  }
  return n;
}

/**
 * UTF-8 bytes in pieces → text, as Python's incremental decoder with `errors="replace"`: the bytes of an
 * unfinished character are held (`pending`) until the next piece says what they are.
 */
export class Utf8Stream {
  private held: Uint8Array = new Uint8Array(0);

  /** Bytes of an unfinished character are held. */
  get pending(): boolean {
    return this.held.length > 0;
  }

  decode(bytes: Uint8Array, final = false): string {
    const data = this.held.length > 0 ? concatBytes([this.held, bytes]) : bytes;
    const cut = final ? data.length : unfinishedTail(data);
    this.held = cut < data.length ? data.slice(cut) : new Uint8Array(0);
    return cut > 0 ? decodeReplacing(cut < data.length ? data.subarray(0, cut) : data) : "";
  }

  reset(): void {
    this.held = new Uint8Array(0);
  }
}
