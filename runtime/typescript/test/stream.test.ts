/** The grammar-driven event parser in TypeScript: the grammar corpus, one case per lenient rule, chunking. */

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";

import {
  ContentDelta,
  type Event,
  HarmonyParseError,
  HarmonyStreamParser,
  loadHarmonyEncoding,
  MessageEnd,
  MessageStart,
  parseText,
  parseTokens,
  Recovered,
  RECOVERY_RULES,
  Role,
} from "../src/index.js";
import { spec } from "../src/tables.js";
import { ERROR, expectsError, loadAll, parseArgs } from "./corpus.js";
import { FIXTURES, readJsonl } from "./shared.js";

const encoding = loadHarmonyEncoding(spec.ENCODING_NAME);
const all = (text: string): number[] => encoding.encode(text, { allowedSpecial: "all" });
const CASES = loadAll();
const PARSE_CASES = readJsonl(join(FIXTURES, "corpus", "parse.jsonl"));

function checkDeltas(events: readonly Event[]): void {
  const parts = new Map<number, string[]>();
  for (const e of events) {
    if (e instanceof ContentDelta) parts.set(e.index, [...(parts.get(e.index) ?? []), e.text]);
    else if (e instanceof MessageEnd) assert.equal((parts.get(e.index) ?? []).join(""), e.message.content);
  }
}

test("the grammar corpus is all there", () => {
  assert.equal(CASES.length, 31);
  assert.deepEqual(new Set(CASES.map((c) => c.file)), new Set(["envelope.txt", "header.txt", "lenient.txt"]));
});

test("the grammar corpus: text and token input give the recorded messages or error", () => {
  for (const c of CASES) {
    const { role, mode, tools } = parseArgs(c);
    const where = `${c.file}: ${c.name}`;
    if (expectsError(c)) {
      assert.throws(() => parseText(encoding, c.input, role, mode, tools), (e: unknown) => {
        assert.ok(e instanceof HarmonyParseError, where);
        assert.ok(e.message.includes((c.expected[0] ?? "").slice(ERROR.length)), `${where}: ${e.message}`);
        return true;
      });
      continue;
    }
    const got = parseText(encoding, c.input, role, mode, tools).map((m) => m.toDict());
    assert.deepEqual(got, c.expected.map((line) => JSON.parse(line) as unknown), where);
    const fromTokens = parseTokens(encoding, all(c.input), role, mode, tools).map((m) => m.toDict());
    assert.deepEqual(fromTokens, got, `${where}: token input disagrees`);
  }
});

test("strict mode agrees with the reference corpus wherever the grammar accepts", () => {
  let agreed = 0;
  let rejected = 0;
  for (const c of PARSE_CASES) {
    const expected = c["expected_messages"];
    if (expected === undefined) continue;
    let got;
    try {
      got = parseTokens(encoding, c["tokens"] as number[], c["role"] as string | null, "strict");
    } catch (e) {
      assert.ok(e instanceof HarmonyParseError && e.message.includes(`${spec.SPELLING_START} in a message header`), String(c["id"]));
      rejected++;
      continue;
    }
    const plain = got.map((m) => {
      const d = m.toDict();
      delete d["terminator"];
      return d;
    });
    assert.deepEqual(plain, expected, String(c["id"]));
    agreed++;
  }
  assert.ok(agreed >= 460 && rejected <= 5, `${agreed} agreed, ${rejected} rejected`);
});

test("lenient mode never throws on the reference corpus, and its deltas add up", () => {
  for (const c of PARSE_CASES) {
    const parser = new HarmonyStreamParser(encoding, c["role"] as string | null, "lenient");
    checkDeltas([...parser.feedTokens(c["tokens"] as number[]), ...parser.close()]);
  }
});

function feedChunks(text: string, cuts: readonly number[], role: Role | string | null, mode: "strict" | "lenient"): Event[] {
  const parser = new HarmonyStreamParser(encoding, role, mode);
  const events: Event[] = [];
  let last = 0;
  for (const cut of [...cuts, text.length]) {
    events.push(...parser.feedText(text.slice(last, cut)));
    last = cut;
  }
  events.push(...parser.close());
  checkDeltas(events);
  return events;
}

test("chunking changes neither the messages nor the repairs, even inside a surrogate pair", () => {
  for (const c of PARSE_CASES.slice(0, 120)) {
    const text = c["text"] as string;
    const role = c["role"] as string | null;
    const whole = new HarmonyStreamParser(encoding, role, "lenient");
    const wholeEvents = [...whole.feedText(text), ...whole.close()];
    const ends = (events: Event[]): unknown[] => events.filter((e) => e instanceof MessageEnd).map((e) => (e as MessageEnd).message.toDict());
    const repairs = (events: Event[]): unknown[] => events.filter((e) => e instanceof Recovered);
    const cuts = Array.from({ length: Math.max(0, text.length - 1) }, (_, i) => i + 1);
    const byUnit = feedChunks(text, cuts, role, "lenient");
    assert.deepEqual(ends(byUnit), ends(wholeEvents), String(c["id"]));
    assert.deepEqual(repairs(byUnit), repairs(wholeEvents), String(c["id"]));
  }
});

test("a split inside a control token's spelling", () => {
  const text = `${spec.SPELLING_CHANNEL}final${spec.SPELLING_MESSAGE}Hi${spec.SPELLING_END}`;
  for (let cut = 1; cut < text.length; cut++) {
    const ends = feedChunks(text, [cut], Role.Assistant, "strict").filter((e): e is MessageEnd => e instanceof MessageEnd);
    assert.deepEqual(
      ends.map((m) => [m.message.channel, m.message.content, m.terminator]),
      [["final", "Hi", "end"]],
    );
  }
});

test("positions count code points: a character outside the BMP is one", () => {
  const text = `😀😀${spec.SPELLING_START}assistant${spec.SPELLING_CHANNEL}final${spec.SPELLING_MESSAGE}x${spec.SPELLING_END}`;
  const events = feedChunks(text, [1, 3], null, "lenient");
  const aside = events.find((e): e is Recovered => e instanceof Recovered);
  assert.equal(aside?.text, "😀😀");
  assert.equal(aside?.position, 0);
  const header = `${spec.SPELLING_CHANNEL}final 😀 extra${spec.SPELLING_MESSAGE}x${spec.SPELLING_END}`;
  assert.throws(() => parseText(encoding, header), /'extra': .* at character 19$/); // 20 UTF-16 units
});

test("a character split across tokens is whole in its delta", () => {
  const tokens = [...all(`${spec.SPELLING_CHANNEL}final${spec.SPELLING_MESSAGE}`), ...encoding.encode("héllo 🙂 wörld")];
  const parser = new HarmonyStreamParser(encoding);
  const events: Event[] = [];
  for (const token of tokens) events.push(...parser.feedTokens([token]));
  events.push(...parser.close());
  const deltas = events.filter((e): e is ContentDelta => e instanceof ContentDelta).map((e) => e.text);
  assert.equal(deltas.join(""), "héllo 🙂 wörld");
  assert.ok(deltas.every((d) => !d.includes("\ufffd")));
});

test("UTF-8 bytes split inside a character", () => {
  const data = new TextEncoder().encode(`${spec.SPELLING_CHANNEL}final${spec.SPELLING_MESSAGE}naïve 🙂${spec.SPELLING_END}`);
  for (let cut = 1; cut < data.length; cut++) {
    const parser = new HarmonyStreamParser(encoding);
    const events = [...parser.feedBytes(data.subarray(0, cut)), ...parser.feedBytes(data.subarray(cut)), ...parser.close()];
    const ends = events.filter((e): e is MessageEnd => e instanceof MessageEnd);
    assert.equal(ends.length, 1);
    assert.equal(ends[0]?.message.content, "naïve 🙂");
  }
});

test("events come in order, with the header's fields", () => {
  const parser = new HarmonyStreamParser(encoding, null);
  const events = parser.feedText(`${spec.SPELLING_START}assistant${spec.SPELLING_CHANNEL}commentary to=functions.f json${spec.SPELLING_MESSAGE}`);
  assert.deepEqual(events, [new MessageStart(0, Role.Assistant, null, "commentary", "functions.f", "json")]);
  assert.deepEqual(parser.feedText('{"a"'), [new ContentDelta(0, '{"a"')]);
  const more = parser.feedText(`: 1}${spec.SPELLING_CALL}`);
  const end = more[more.length - 1];
  assert.ok(end instanceof MessageEnd && end.terminator === "call" && end.message.content === '{"a": 1}');
  assert.deepEqual(parser.close(), []);
});

test("strict errors name what and where, in tokens or characters", () => {
  assert.throws(() => parseTokens(encoding, [spec.TOKEN_END], null), {
    message: `unexpected ${spec.SPELLING_END}, expected ${spec.SPELLING_START} at token 0`,
  });
  assert.throws(() => parseTokens(encoding, [spec.TOKEN_CHANNEL, 17196, spec.TOKEN_MESSAGE, 999999999]), /invalid token 999999999 at token 3$/);
  const text = `${spec.SPELLING_CHANNEL}final json extra${spec.SPELLING_MESSAGE}x${spec.SPELLING_END}`;
  assert.throws(() => parseText(encoding, text), (e: unknown) => e instanceof HarmonyParseError && e.unit === "character" && text.slice(e.position).startsWith("extra"));
  const tokens = all(text);
  assert.throws(
    () => parseTokens(encoding, tokens),
    (e: unknown) => e instanceof HarmonyParseError && e.unit === "token" && encoding.decode([tokens[e.position] ?? 0]) === " extra",
  );
  assert.throws(() => new HarmonyStreamParser(encoding, Role.Assistant, "loose" as "strict"), /mode/);
});

// -- lenient repairs: one case per rule (tests/test_stream.py's LENIENT_CASES) ------------------------------------

const A = `${spec.SPELLING_START}assistant`;
const CH = spec.SPELLING_CHANNEL;
const MSG = spec.SPELLING_MESSAGE;
const END = spec.SPELLING_END;
const CALL = spec.SPELLING_CALL;
const VALID_IN_STRICT_MODE = new Set(["glued_content_type", "invented_tool_result", "missing_functions_prefix"]);
type Expected = [string | null, string | null, string][];
const LENIENT_CASES: [string, string | null, string[], string, Expected][] = [
  ["text_before_start", null, [], `hello${A}${CH}final${MSG}x${END}`, [["final", null, "x"]]],
  ["junk_between_messages", null, [], `${A}${CH}analysis${MSG}x${END}junk${A}${CH}final${MSG}y${END}`, [["analysis", null, "x"], ["final", null, "y"]]],
  ["missing_functions_prefix", "assistant", ["lookup"], `${CH}commentary to=lookup json${MSG}{}${CALL}`, [["commentary", "functions.lookup", "{}"]]],
  ["extra_stop", null, [], `${A}${CH}final${MSG}x${END}${END}`, [["final", null, "x"]]],
  ["stray_control", null, [], `${MSG}${A}${CH}final${MSG}x${END}`, [["final", null, "x"]]],
  ["missing_start", null, [], `${CH}final${MSG}x${END}`, [["final", null, "x"]]],
  ["repeated_start", null, [], `${spec.SPELLING_START}${A}${CH}final${MSG}x${END}`, [["final", null, "x"]]],
  ["repeated_start", "assistant", [], `${A}${CH}final${MSG}x${END}`, [["final", null, "x"]]],
  ["doubled_role", "assistant", [], `assistant${CH}final${MSG}x${END}`, [["final", null, "x"]]],
  ["missing_role", null, [], `${spec.SPELLING_START}${CH}final${MSG}x${END}`, [["final", null, "x"]]],
  ["empty_channel", "assistant", [], `${CH}${MSG}x${END}`, [[null, null, "x"]]],
  ["doubled_channel", "assistant", [], `${CH}final${CH}final${MSG}x${END}`, [["final", null, "x"]]],
  ["doubled_recipient", "assistant", [], ` to=functions.f${CH}commentary to=functions.f${MSG}{}${CALL}`, [["commentary", "functions.f", "{}"]]],
  ["stray_header_word", "assistant", [], `${CH}final json extra${MSG}x${END}`, [["final", null, "x"]]],
  ["glued_content_type", "assistant", ["shell"], `${CH}commentary to=functions.shelljson${MSG}{}${CALL}`, [["commentary", "functions.shell", "{}"]]],
  ["header_cut_by_stop", "assistant", [], `${CH}commentary to=functions.f${CALL}`, [["commentary", "functions.f", ""]]],
  ["eof_in_header", "assistant", [], `${CH}commentary to=functions.f`, []],
  ["stripped_special_tokens", "assistant", [], "analysisThinking.assistantfinalAnswer.", [["analysis", null, "Thinking."], ["final", null, "Answer."]]],
  ["unstructured_text", "assistant", [], "Just a plain answer, no markup.", [[null, null, "Just a plain answer, no markup."]]],
  [
    "invented_tool_result",
    "assistant",
    [],
    `${CH}commentary to=functions.f${MSG}{}${CALL}${spec.SPELLING_START}functions.f to=assistant${CH}commentary${MSG}42${END}`,
    [["commentary", "functions.f", "{}"], ["commentary", "assistant", "42"]],
  ],
];

test("every recovery rule has a case", () => {
  const tested = new Set([...LENIENT_CASES.map((c) => c[0]), "after_tool_call", "after_turn_end", "invalid_token"]);
  assert.deepEqual(tested, new Set(Object.keys(RECOVERY_RULES)));
});

for (const [rule, role, tools, text, expected] of LENIENT_CASES) {
  test(`lenient: ${rule} (${role ?? "none"})`, () => {
    for (const feed of ["text", "tokens"]) {
      const parser = new HarmonyStreamParser(encoding, role, "lenient", tools);
      const events = [...(feed === "text" ? parser.feedText(text) : parser.feedTokens(all(text))), ...parser.close()];
      const rules = events.filter((e): e is Recovered => e instanceof Recovered).map((e) => e.rule);
      assert.ok(rules.includes(rule), `${feed}: ${rules.join(", ")}`);
      const got = events.filter((e): e is MessageEnd => e instanceof MessageEnd).map((e) => [e.message.channel, e.message.recipient, e.message.content]);
      assert.deepEqual(got, expected, feed);
    }
    if (VALID_IN_STRICT_MODE.has(rule)) assert.ok(parseText(encoding, text, role, "strict", tools).length > 0);
    else assert.throws(() => parseText(encoding, text, role, "strict", tools), HarmonyParseError);
  });
}

test("stop after a tool call, and at the turn's end", () => {
  const text = `${CH}commentary to=functions.f${MSG}{}${CALL}${spec.SPELLING_START}functions.f to=assistant${MSG}1`;
  const parser = new HarmonyStreamParser(encoding, "assistant", "lenient", null, { stopAfterToolCall: true });
  const events = [...parser.feedText(text), ...parser.close()];
  assert.deepEqual(events.filter((e): e is MessageEnd => e instanceof MessageEnd).map((e) => e.message.recipient), ["functions.f"]);
  const aside = events.filter((e): e is Recovered => e instanceof Recovered);
  assert.deepEqual(aside.map((e) => [e.rule, e.text]), [["after_tool_call", `${spec.SPELLING_START}functions.f to=assistant${MSG}1`]]);
  const turn = new HarmonyStreamParser(encoding, "assistant", "lenient", null, { stopAtTurnEnd: true });
  const after = [...turn.feedText(`${CH}final${MSG}x${spec.SPELLING_END_DONE_SAMPLING}more`), ...turn.close()];
  assert.deepEqual(after.filter((e): e is Recovered => e instanceof Recovered).map((e) => [e.rule, e.text]), [["after_turn_end", "more"]]);
});

test("lenient mode survives garbage and reports invalid token ids", () => {
  let seed = 3;
  const rand = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const specials = [200002, 200003, 200005, 200006, 200007, 200008, 200012, 199999, 200018];
  for (let n = 0; n < 200; n++) {
    const tokens = Array.from({ length: 30 }, () => (rand() < 0.4 ? (specials[Math.floor(rand() * specials.length)] ?? 0) : Math.floor(rand() * 200000)));
    const parser = new HarmonyStreamParser(encoding, rand() < 0.5 ? null : "assistant", "lenient");
    checkDeltas([...parser.feedTokens(tokens), ...parser.close()]);
  }
  const parser = new HarmonyStreamParser(encoding, null, "lenient");
  const events = [...parser.feedTokens([5, 10 ** 9, spec.TOKEN_START]), ...parser.close()];
  assert.ok(events.some((e) => e instanceof Recovered && e.rule === "invalid_token"));
});
