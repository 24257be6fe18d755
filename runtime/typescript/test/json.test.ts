/** JSON and UTF-8 by the canonical rules of spec/harmony/format.json's `text_rules`. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { entriesOf, JsonFloat, NonFinite, NOT_JSON, readJson, writeJson } from "../src/json.js";
import { JSONInputError, loadJson, MAX_JSON_DEPTH } from "../src/jsonInput.js";
import { spec } from "../src/tables.js";
import { firstUtf8Problem, Utf8Stream } from "../src/utf8.js";

test("reading keeps an integral float, an integer past 2^53 and the document's key order", () => {
  const text = '{"b": 1.0, "2": 12345678901234567890, "a": [1e3, -0, 0.5], "1": "x"}';
  const value = readJson(text);
  assert.deepEqual(entriesOf(value as object).map(([k]) => k), ["b", "2", "a", "1"]);
  assert.ok((value as Record<string, unknown>)["b"] instanceof JsonFloat);
  assert.equal((value as Record<string, unknown>)["2"], 12345678901234567890n);
  assert.equal(writeJson(value), '{"b": 1.0, "2": 12345678901234567890, "a": [1000.0, 0, 0.5], "1": "x"}');
  assert.equal(writeJson(readJson('{"__proto__": 1}'), { separators: [",", ":"] }), '{"__proto__":1}');
});

test("writing: JSON's escapes, ASCII on request, floats in the canonical spelling", () => {
  assert.equal(writeJson('é"\\\n\u0001\u007f'), '"\\u00e9\\"\\\\\\n\\u0001\\u007f"');
  assert.equal(writeJson('é\u007f', { ensureAscii: false }), '"é\u007f"');
  assert.equal(writeJson([1e-5, new JsonFloat(1e16), 123.25, new JsonFloat(1e22), -2.5e-7]), "[1e-05, 1e+16, 123.25, 1e+22, -2.5e-07]");
  assert.equal(writeJson({ a: [1, { b: [] }] }, { indent: 2 }), '{\n  "a": [\n    1,\n    {\n      "b": []\n    }\n  ]\n}');
});

test("every syntax error is the one text, with no position; NaN is marked only on request", () => {
  for (const bad of ["", "{", "[1,]", '{"a" 1}', '"\\q"', '"\\u12x4"', '"a\u0001"', "01", "1 2", "\ufeff[]", "nul", "1" + "0".repeat(spec.JSON_MAX_INTEGER_DIGITS)]) {
    assert.throws(() => readJson(bad), (e: unknown) => e instanceof Error && e.message === NOT_JSON, JSON.stringify(bad));
  }
  assert.ok(Number.isNaN(readJson("NaN") as number));
  assert.ok(readJson("[-Infinity]", { markNonFinite: true }) instanceof Array);
  assert.ok((readJson("[-Infinity]", { markNonFinite: true }) as unknown[])[0] instanceof NonFinite);
});

test("nesting is checked on the brackets first, whatever follows", () => {
  const deep = "[".repeat(MAX_JSON_DEPTH + 1) + "x";
  assert.throws(() => loadJson(deep), (e: unknown) => e instanceof JSONInputError && e.path === "$" + "[0]".repeat(MAX_JSON_DEPTH));
  assert.throws(() => loadJson("[1,"), (e: unknown) => e instanceof JSONInputError && e.reason === NOT_JSON && e.path === "$");
});

/** Unicode's maximal-subpart rule, one byte at a time, to check the regular expressions against. */
function reference(bytes: Uint8Array): [number, number, boolean] | null {
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i] ?? 0;
    if (b < 0x80) {
      i++;
      continue;
    }
    const need = b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : 0;
    if (need === 0) return [i, 1, false];
    const lo = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80;
    const hi = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf;
    for (let j = 1; j <= need; j++) {
      if (i + j >= bytes.length) return [i, j, true];
      const c = bytes[i + j] ?? 0;
      if (j === 1 ? c < lo || c > hi : c < 0x80 || c > 0xbf) return [i, j, false];
    }
    i += need + 1;
  }
  return null;
}

test("the first UTF-8 problem is where Unicode's table says, for every short byte string", () => {
  const alphabet = [0x41, 0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff];
  for (const a of alphabet) for (const b of alphabet) for (const c of alphabet) for (const d of [0x41, 0x80, 0xbf]) {
    for (const bytes of [Uint8Array.of(a, b, c, d), Uint8Array.of(a, b, c), Uint8Array.of(0x41, a, b)]) {
      const found = firstUtf8Problem(bytes);
      assert.deepEqual(found === null ? null : [found.start, found.length, found.incomplete], reference(bytes), String([...bytes]));
    }
  }
  const stream = new Utf8Stream();
  assert.equal(stream.decode(Uint8Array.of(0x41, 0xe2, 0x82)), "A");
  assert.ok(stream.pending);
  assert.equal(stream.decode(Uint8Array.of(0xac, 0xff)), "€\ufffd");
  assert.equal(stream.decode(Uint8Array.of(0xf0), true), "\ufffd");
});
