/**
 * Completions whose control tokens a detokenizer stripped: `analysis…assistantcommentary to=functions.x json{…}`.
 *
 * With special tokens skipped, a server sees each header as plain words glued to the text around it: the first
 * message's channel word, then for each later message the role word and the channel word (`assistantfinal`), a
 * recipient (`to=NAME`) and a content type. `StrippedSplitter` reads such text in any chunks and splits it into
 * messages as it streams: it holds back only a tail that may be the start of the next header (`assista…`) or a
 * header that may still grow (`commentary to=functions.get_wea…`). A recipient is read whole (letters of any
 * script, digits, `_`, `-` and the namespace separator), never cut short; a content type glued to a declared name
 * is split off by the caller's declared-tool repair. Mirrors the Python package's `stream/stripped.py`; offsets
 * count code points, as Python's do.
 */

import { alt, cpLength, escapeRegExp } from "../texts.js";
import { Role, spec } from "../tables.js";
import { Header } from "./header.js";

const ROLE = Role.Assistant;
const CHANNELS = [...spec.CHANNELS].sort((a, b) => cpLength(b) - cpLength(a));
const SPACE = spec.HEADER_PART_SEPARATOR;
const NAME = `[\\p{L}\\p{N}_\\-${escapeRegExp(spec.HEADER_NAMESPACE_SEPARATOR)}]+`; // Python's [\w\-.]
const HEADER_RE = new RegExp(
  `^(${escapeRegExp(ROLE)})?(${alt(CHANNELS)})(?:${escapeRegExp(SPACE + spec.HEADER_RECIPIENT_KEYWORD)}(${NAME}))?` +
    `(?:${escapeRegExp(SPACE)}(${alt(spec.CONTENT_TYPES)}))?`,
  "u",
);
const MARKERS = CHANNELS.map((c) => ROLE + c);
const MARKER_RE = new RegExp(alt(MARKERS), "u");
const STARTS = [...MARKERS, ...CHANNELS]; // what the first header may begin with
const GROWTH = [SPACE + spec.HEADER_RECIPIENT_KEYWORD, ...spec.CONTENT_TYPES.map((t) => SPACE + t)]; // what may still follow a header
/** A tail of the buffer that may begin the next header (a marker's proper prefix): the longest starts leftmost. */
const HELD_RE = new RegExp(`(?:${alt(MARKERS.flatMap((m) => [...m].slice(1).map((_, i) => m.slice(0, i + 1))))})$`, "u");

/** Body text of the message the last header opened, or a header: what it says (no author for the first message,
 * which follows the prompt's role), the header as written (`assistantcommentary to=f json`), and where it begins, in
 * code points from the start of the stripped text. */
export type Piece = string | { readonly header: Header; readonly text: string; readonly offset: number };

/** Whether a completion that so far holds `text` and no control token is stripped text: true, false, or null
 * while `text` is too short to say (`final`: no more text comes). */
export function strippedStart(text: string, final: boolean): boolean | null {
  const match = HEADER_RE.exec(text);
  if (match !== null) return final || text.length > match[0].length ? true : null;
  return !final && STARTS.some((start) => start.startsWith(text)) ? null : false;
}

/** Stripped text in → headers and body text out, in order. */
export class StrippedSplitter {
  private buf = "";
  private inHeader = true; // the text starts with a header
  private offset = 0; // code points taken out of the buffer so far

  /** `final`: no more text comes, so nothing is held back. */
  feed(text: string, final = false): Piece[] {
    const out: Piece[] = [];
    let buf = this.buf + text;
    /** The first `size` units of the buffer go out: as `piece`, or as body text. */
    const take = (size: number, piece: Piece = buf.slice(0, size)): void => {
      out.push(piece);
      this.offset += cpLength(buf.slice(0, size));
      buf = buf.slice(size);
    };
    while (buf) {
      if (this.inHeader) {
        const match = HEADER_RE.exec(buf); // null: not a header after all, but body text of the message before
        if (match !== null) {
          const rest = buf.slice(match[0].length);
          if (!final && (!rest || GROWTH.some((g) => g.startsWith(rest)))) break; // the header may still grow
          const header = new Header(match[1] ?? null, true, match[3] ?? null, match[2] ?? "", match[4] ?? null); // match[1]: ROLE
          take(match[0].length, { header, text: match[0], offset: this.offset });
        }
        this.inHeader = false;
        continue;
      }
      const found = MARKER_RE.exec(buf);
      if (found !== null) {
        if (found.index > 0) take(found.index);
        this.inHeader = true;
        continue;
      }
      const hold = final ? 0 : (HELD_RE.exec(buf)?.[0].length ?? 0); // ASCII: UTF-16 units are code points there
      if (buf.length > hold) take(buf.length - hold);
      break;
    }
    this.buf = buf;
    return out;
  }
}
