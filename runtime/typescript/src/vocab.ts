/**
 * The o200k_base vocabulary, from the npm registry: gpt-tokenizer ships the ranks (and the byte-pair
 * merge), this module adds Harmony's special tokens from the spec and a table of every token's bytes.
 */

import { BytePairEncodingCore } from "gpt-tokenizer/BytePairEncodingCore";
import o200kBase from "gpt-tokenizer/bpeRanks/o200k_base";

import { fill } from "./texts.js";
import { spec } from "./tables.js";

const RANKS = o200kBase as readonly (string | readonly number[])[];

/**
 * gpt-tokenizer looks byte strings up by decoding them with a `TextDecoder` that drops a leading U+FEFF,
 * so a piece holding U+FEFF can merge into wrong tokens. Such pieces go through `mergeBytes` here instead.
 */
const BOM = "\ufeff";

/**
 * The split pattern's `\p{…}` mean what the reference's Unicode says (spec PATTERN_UNICODE_VERSION), node's
 * regular expressions what node's says. A text holding a character they may class differently, or any text when
 * node's Unicode is older, is split by the pattern with its classes spelled out: exact, and slower. Of the spec's
 * unsure characters (those the reference leaves unassigned, and those recategorized since) only the ones node takes
 * for a letter, digit or mark can be classed differently; that smaller class is the one every text is scanned for.
 */
const UNSURE = new RegExp(`[${spec.PATTERN_UNSURE_JS}&&[\\p{L}\\p{N}\\p{M}]]`, "v");
const NODE_IS_OLDER = Number.parseFloat(process.versions.unicode ?? "0") < Number.parseFloat(spec.PATTERN_UNICODE_VERSION);

/** Byte-pair merging as tiktoken does it: merge the lowest-ranked adjacent pair (leftmost on a tie). */
function mergeBytes(piece: Uint8Array, rankOf: (bytes: Uint8Array) => number | undefined): number[] {
  const starts = Array.from({ length: piece.length + 1 }, (_, i) => i);
  // the rank of the `span` parts from part `i` on, as one token
  const rank = (i: number, span: number): number => rankOf(piece.subarray(starts[i], starts[i + span])) ?? Infinity;
  for (;;) {
    let at = -1;
    for (let i = 0, best = Infinity; i + 2 < starts.length; i++) {
      const r = rank(i, 2);
      if (r < best) [best, at] = [r, i];
    }
    if (at < 0) break;
    starts.splice(at + 1, 1);
  }
  return starts.slice(1).map((_, i) => {
    const r = rank(i, 1);
    if (r === Infinity) throw new Error("o200k_base lacks a single byte: the ranks are damaged");
    return r;
  });
}

/** The loaded vocabulary: the merge engine, every token's bytes, and the special tokens. */
export class Vocabulary {
  readonly core = new BytePairEncodingCore({
    bytePairRankDecoder: RANKS,
    tokenSplitRegex: new RegExp(spec.PATTERN_JS, "gu"),
    specialTokensEncoder: new Map(),
  });
  /** Ids below this are ordinary tokens. */
  readonly baseCount = RANKS.length;
  /** Harmony's special tokens: the named ones, then the reserved ranges (the constructor adds those). */
  readonly specials = new Map<string, number>(Object.entries(spec.NAMED_TOKENS));
  /** Token id → its bytes; ids with no token are undefined. */
  readonly tokenBytes = RANKS.map((b): Uint8Array | undefined => (typeof b === "string" ? Buffer.from(b) : Uint8Array.from(b)));

  constructor() {
    for (const [lo, hi] of spec.RESERVED_RANGES) {
      for (let id = lo; id <= hi; id++) this.specials.set(fill(spec.RESERVED_SPELLING, { id }), id);
    }
    for (const [spelling, id] of this.specials) this.tokenBytes[id] = Buffer.from(spelling);
  }

  private byteRanks: Map<string, number> | null = null;
  private readonly splitter = new RegExp(spec.PATTERN_JS, "gu");
  private exactSplitter: RegExp | null = null;

  /** Ordinary tokens of `text` (special-token spellings are text here). */
  encodeOrdinary(text: string): number[] {
    const exact = NODE_IS_OLDER || UNSURE.test(text);
    if (!exact && !text.includes(BOM)) return this.core.encodeNative(text, new Set());
    // a piece gpt-tokenizer would split again, or decode wrongly, is merged here
    const own = (piece: string): boolean => piece.includes(BOM) || (exact && (NODE_IS_OLDER || UNSURE.test(piece)));
    const encode = (piece: string): number[] =>
      own(piece) ? mergeBytes(Buffer.from(piece), (b) => this.rankOfBytes(b)) : this.core.encodeNative(piece, new Set());
    const splitter = exact ? (this.exactSplitter ??= new RegExp(spec.PATTERN_JS_EXACT, "gu")) : this.splitter;
    return Array.from(text.matchAll(splitter), ([piece]) => encode(piece)).flat();
  }

  private rankOfBytes(bytes: Uint8Array): number | undefined {
    const latin1 = (b: Uint8Array | undefined): string => Buffer.from(b ?? []).toString("latin1");
    this.byteRanks ??= new Map(this.tokenBytes.slice(0, this.baseCount).map((b, rank): [string, number] => [latin1(b), rank]));
    return this.byteRanks.get(latin1(bytes));
  }
}

let loaded: Vocabulary | null = null;

/** The vocabulary, loaded once per process. */
export function vocabulary(): Vocabulary {
  return (loaded ??= new Vocabulary());
}
