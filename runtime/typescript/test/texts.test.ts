/** The spec's placeholder rule (format.json `texts`), filled as the Python package fills it. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { fill, pyrepr } from "../src/texts.js";

test("{name} is plain text, {name:json} JSON text, {{ and }} literal braces", () => {
  assert.equal(fill("{a} and {n}: {{x}}", { a: "é\"'", n: 42 }), "é\"' and 42: {x}");
  assert.equal(fill("{v:json}", { v: ["é", { k: 1 }, '\u0001"'] }), '["é",{"k":1},"\\u0001\\""]');
  assert.throws(() => fill("{missing}", {}), /placeholder \{missing\} has no value/);
});

test("{name:pyrepr} writes a string as Python's repr does", () => {
  // expected texts are CPython 3.11's repr() of the same strings
  const cases: [string, string][] = [
    ["a", "'a'"],
    ["it's", `"it's"`],
    ['say "hi"', `'say "hi"'`],
    [`both ' and "`, `'both \\' and "'`],
    ["tab\there\n", "'tab\\there\\n'"],
    ["\u0000\u007f\u0085", "'\\x00\\x7f\\x85'"],
    ["\u200b\u2028\ue000", "'\\u200b\\u2028\\ue000'"],
    ["\u{1f600} ok", "'\u{1f600} ok'"],
    ["back\\slash", "'back\\\\slash'"],
    ["x\u0378", "'x\\u0378'"],
  ];
  for (const [text, expected] of cases) assert.equal(pyrepr(text), expected, text);
  assert.equal(fill("Unknown role: {value:pyrepr}", { value: "robot" }), "Unknown role: 'robot'");
});
