/**
 * UTF-8 by Unicode's rules: where the first ill-formed sequence starts and how long its maximal subpart is (what
 * Rust's `Utf8Error` reports and openai-harmony's error texts print), and decoding in pieces with U+FFFD for each
 * maximal subpart (as `TextDecoder` and the Python package replace).
 */

import { isUtf8 } from "node:buffer";

// Over the bytes read as Latin-1 (one character a byte): Unicode's table of well-formed sequences, and the
// longest start of one (a maximal subpart).
const WELL_FORMED = new RegExp(
  String.raw`(?:[\x00-\x7f]+|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|` +
    String.raw`\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2})*`,
  "y",
);
const SUBPART = new RegExp(
  String.raw`[\xc2-\xdf]|\xe0[\xa0-\xbf]?|[\xe1-\xec\xee\xef][\x80-\xbf]?|\xed[\x80-\x9f]?|` +
    String.raw`\xf0(?:[\x90-\xbf][\x80-\xbf]?)?|[\xf1-\xf3](?:[\x80-\xbf][\x80-\xbf]?)?|\xf4(?:[\x80-\x8f][\x80-\xbf]?)?`,
  "y",
);
const replacing = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true });

/** The first invalid or unfinished sequence in `bytes`, or null if it is all valid UTF-8: `length` bytes from `start`
 * are invalid, or (`incomplete`) the data ends inside a character that starts at `start`. */
export function firstUtf8Problem(bytes: Uint8Array): { start: number; length: number; incomplete: boolean } | null {
  if (isUtf8(bytes)) return null;
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("latin1");
  WELL_FORMED.lastIndex = 0;
  const start = WELL_FORMED.exec(text)?.[0].length ?? 0;
  SUBPART.lastIndex = start;
  const part = SUBPART.exec(text)?.[0].length ?? 0;
  return { start, length: Math.max(1, part), incomplete: part > 0 && start + part === text.length };
}

export function decodeReplacing(bytes: Uint8Array): string {
  return replacing.decode(bytes);
}

// A maximal subpart that reaches the end: a character more bytes could finish (at most 3 of its bytes are there).
const UNFINISHED = new RegExp(`(?:${SUBPART.source})$`);

/** Where the data ends inside a character that more bytes could finish (its first byte), else `bytes.length`. */
function unfinishedTail(bytes: Uint8Array): number {
  const tail = Buffer.from(bytes.subarray(-3)).toString("latin1");
  const found = UNFINISHED.exec(tail);
  return found === null ? bytes.length : bytes.length - tail.length + found.index;
}

/** UTF-8 bytes in pieces → text: the bytes of an unfinished character are held (`pending`) until the next piece
 * says what they are. */
export class Utf8Stream {
  private held: Uint8Array = new Uint8Array(0);

  get pending(): boolean {
    return this.held.length > 0;
  }

  decode(bytes: Uint8Array, final = false): string {
    const data = this.held.length > 0 ? Buffer.concat([this.held, bytes]) : bytes;
    const cut = final ? data.length : unfinishedTail(data);
    this.held = data.slice(cut);
    return cut > 0 ? decodeReplacing(data.subarray(0, cut)) : "";
  }
}
