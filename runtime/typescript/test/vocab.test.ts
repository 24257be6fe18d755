/** The npm package's o200k_base ranks are the ones the Python package reads: same file, byte for byte. */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { loadHarmonyEncoding } from "../src/index.js";
import { spec } from "../src/tables.js";
import { vocabulary } from "../src/vocab.js";
import { SHARED } from "./shared.js";

test("the package's ranks, written as a .tiktoken file, are ../shared/vocab's file (sha256 and content)", () => {
  const file = readFileSync(join(SHARED, "vocab", spec.RANKS_FILE));
  assert.equal(createHash("sha256").update(file).digest("hex"), spec.RANKS_SHA256);
  // The ordinary ranks in tiktoken's file format (`base64 rank` a line), as the Python package reads them.
  const vocab = vocabulary();
  const lines: string[] = [];
  for (let rank = 0; rank < vocab.baseCount; rank++) {
    const bytes = vocab.tokenBytes[rank];
    if (bytes !== undefined) lines.push(`${Buffer.from(bytes).toString("base64")} ${rank}`);
  }
  const ours = lines.join("\n") + "\n";
  assert.equal(createHash("sha256").update(ours).digest("hex"), spec.RANKS_SHA256);
  assert.equal(ours, file.toString("latin1"));
});

test("special tokens come from the spec: named, reserved, stop sets", () => {
  const enc = loadHarmonyEncoding(spec.ENCODING_NAME);
  for (const [spelling, id] of Object.entries(spec.NAMED_TOKENS)) {
    assert.deepEqual(enc.encode(spelling, { allowedSpecial: "all" }), [id]);
    assert.equal(enc.decode([id]), spelling);
    assert.ok(enc.isSpecialToken(id));
  }
  const [lo, hi] = spec.RESERVED_RANGES[spec.RESERVED_RANGES.length - 1] ?? [0, 0];
  assert.ok(enc.isSpecialToken(lo) && enc.isSpecialToken(hi) && !enc.isSpecialToken(hi + 1));
  assert.deepEqual(enc.stopTokens(), [...spec.STOP_TOKENS]);
  assert.throws(() => enc.decode([hi + 1]), /Invalid token for decoding/);
  assert.throws(() => enc.encode(Object.keys(spec.NAMED_TOKENS)[0] ?? ""), /disallowed special token/);
});

test("the split pattern follows Rust's \\s and (?i:) where JavaScript's own differ", () => {
  const enc = loadHarmonyEncoding(spec.ENCODING_NAME);
  // U+0085 is white space to the reference (not to JavaScript's \s); U+FEFF is not (but is to JavaScript's).
  const nel = enc.encodeOrdinary("a\u0085\u0085b");
  const bom = enc.encodeOrdinary("a\ufeff\ufeffb");
  assert.notDeepEqual(nel, bom);
  // Two U+FEFF are one o200k token; gpt-tokenizer's own lookup drops a leading U+FEFF, the vocabulary does not.
  assert.equal(enc.encodeOrdinary("\ufeff\ufeff").length, 1);
  assert.equal(enc.decode(bom), "a\ufeff\ufeffb");
  assert.equal(enc.decode(enc.encodeOrdinary("It'S done, it'ſ ok")), "It'S done, it'ſ ok");
});
