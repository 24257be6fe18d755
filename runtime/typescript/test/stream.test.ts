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
  messagesOf,
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
  assert.throws(() => parseText(encoding, header), /"extra": .* at character 19$/); // 20 UTF-16 units
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
const CALL = spec.SPELLING_CALL;
const VALID_IN_STRICT_MODE = new Set(["channel_punctuation", "glued_content_type", "glued_role", "invented_tool_result", "missing_channel_marker", "missing_functions_prefix", "recipient_as_content_type", "recipient_punctuation", "recipient_to_self", "unknown_author", "unknown_channel", "wrong_namespace"]);
const TESTED_ELSEWHERE = ["after_tool_call", "after_turn_end", "arguments_invalid", "call_cut_by_budget", "empty_arguments", "invalid_token", "json_string_control", "other_author"];
type Expected = [string | null, string | null, string][];
// rule, role, tools, input, expected (channel, recipient, content) per message: tests/test_stream.py's LENIENT_CASES
const LENIENT_CASES: [string, string | null, string[], string, Expected][] = [
  ["text_before_start", null, [], "hello<|start|>assistant<|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["junk_between_messages", null, [], "<|start|>assistant<|channel|>analysis<|message|>x<|end|>junk<|start|>assistant<|channel|>final<|message|>y<|end|>", [["analysis", null, "x"], ["final", null, "y"]]],
  ["missing_functions_prefix", "assistant", ["lookup"], "<|channel|>commentary to=lookup json<|message|>{}<|call|>", [["commentary", "functions.lookup", "{}"]]],
  ["extra_stop", null, [], "<|start|>assistant<|channel|>final<|message|>x<|end|><|end|>", [["final", null, "x"]]],
  ["stray_control", null, [], "<|message|><|start|>assistant<|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["missing_start", null, [], "<|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["repeated_start", null, [], "<|start|><|start|>assistant<|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["repeated_start", "assistant", [], "<|start|>assistant<|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["doubled_role", "assistant", [], "assistant<|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["missing_role", null, [], "<|start|><|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["empty_channel", "assistant", [], "<|channel|><|message|>x<|end|>", [[null, null, "x"]]],
  ["doubled_channel", "assistant", [], "<|channel|>final<|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["doubled_recipient", "assistant", [], " to=functions.f<|channel|>commentary to=functions.f<|message|>{}<|call|>", [["commentary", "functions.f", "{}"]]],
  ["stray_header_word", "assistant", [], "<|channel|>final json extra<|message|>x<|end|>", [["final", null, "x"]]],
  ["glued_content_type", "assistant", ["shell"], "<|channel|>commentary to=functions.shelljson<|message|>{}<|call|>", [["commentary", "functions.shell", "{}"]]],
  ["header_cut_by_stop", "assistant", [], "<|channel|>commentary to=functions.f<|call|>", [["commentary", "functions.f", ""]]],
  ["eof_in_header", "assistant", [], "<|channel|>commentary to=functions.f", []],
  ["stripped_special_tokens", "assistant", [], "analysisThinking.assistantfinalAnswer.", [["analysis", null, "Thinking."], ["final", null, "Answer."]]],
  ["unstructured_text", "assistant", [], "Just a plain answer, no markup.", [[null, null, "Just a plain answer, no markup."]]],
  ["invented_tool_result", "assistant", [], "<|channel|>commentary to=functions.f<|message|>{}<|call|><|start|>functions.f to=assistant<|channel|>commentary<|message|>42<|end|>", [["commentary", "functions.f", "{}"]]],
  ["byte_order_mark", "assistant", [], "﻿<|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["channel_punctuation", "assistant", [], "<|channel|>––final.<|message|>x<|end|>", [["final", null, "x"]]],
  ["missing_channel_marker", null, [], "<|start|>assistant final<|message|>x<|end|>", [["final", null, "x"]]],
  ["glued_role", null, [], "<|start|>assistantassistant<|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["glued_role", null, [], "<|start|>assistantfinal<|message|>x<|end|>", [["final", null, "x"]]],
  ["unknown_author", null, [], "<|start|>bash<|channel|>final<|message|>x<|end|>", [["final", null, "x"]]],
  ["recipient_out_of_place", "assistant", [], "<|channel|>commentary json to=functions.f<|message|>{}<|call|>", [["commentary", "functions.f", "{}"]]],
  ["name_with_space", "assistant", ["Web Search"], "<|channel|>commentary to=functions.Web Search json<|message|>{}<|call|>", [["commentary", "functions.Web Search", "{}"]]],
  ["recipient_to_self", "assistant", [], "<|channel|>commentary to=assistant<|message|>hi<|end|>", [["analysis", null, "hi"]]],
  ["recipient_as_content_type", "assistant", [], "<|channel|>final <|constrain|>functions.f<|message|>{}<|return|>", [["final", "functions.f", "{}"]]],
  ["recipient_punctuation", "assistant", ["get_weather"], "<|channel|>commentary to=functions.get_weather, json<|message|>{}<|call|>", [["commentary", "functions.get_weather", "{}"]]],
  ["wrong_namespace", "assistant", ["get_weather"], "<|channel|>commentary to=function.get_weather json<|message|>{}<|call|>", [["commentary", "functions.get_weather", "{}"]]],
  ["junk_header", "assistant", [], "<|channel|>commentary?<|end|><|start|>assistant<|channel|>final<|message|>x<|return|>", [["final", null, "x"]]],
  ["junk_header", "assistant", ["edit"], "<|channel|>commentary to=functions.edit <|constrain|>I will edit it<|end|><|start|>assistant<|channel|>final<|message|>x<|return|>", [["final", null, "x"]]],
  ["headerless_message", "assistant", [], "Thinking here.<|end|><|start|>assistant<|channel|>final<|message|>x<|return|>", [["analysis", null, "Thinking here."], ["final", null, "x"]]],
  ["headerless_message", "assistant", [], "The answer is 4.<|return|>", [[null, null, "The answer is 4."]]],
  ["text_after_end", "assistant", [], "<|channel|>analysis<|message|>a<|end|>\nThe answer.", [["analysis", null, "a"], [null, null, "The answer."]]],
  ["text_after_call", "assistant", [], "<|channel|>commentary to=functions.f<|message|>{}<|call|>made up", [["commentary", "functions.f", "{}"]]],
  ["missing_start", "assistant", [], "<|channel|>analysis<|message|>a<|end|>final<|message|>b<|return|>", [["analysis", null, "a"], ["final", null, "b"]]],
  ["missing_start", "assistant", ["f"], "<|channel|>commentary to=functions.f<|message|>{}<|call|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>", [["commentary", "functions.f", "{}"], ["commentary", "functions.f", "{}"]]],
  // issue 17: the glitches the peers' suites test for
  ["header_without_message", "assistant", [], '<|channel|>final {"answer": "hi"}<|return|>', [["final", null, '{"answer": "hi"}']]],
  ["header_without_message", "assistant", ["f"], '<|channel|>commentary to=functions.f {"a": 1}<|call|>', [["commentary", "functions.f", '{"a": 1}']]],
  ["header_without_message", "assistant", [], '<|channel|>final ["x"]', [["final", null, '["x"]']]],
  ["control_spelling", "assistant", [], "<|channel|>analysis<message|>first reasoning<|end|>", [["analysis", null, "first reasoning"]]],
  ["control_spelling", null, [], "<|channel|>analysis<message|>first<|end|><|channel|>analysis<message|>second<|end|>", [["analysis", null, "first"], ["analysis", null, "second"]]],
  ["control_spelling", "assistant", [], "<channel|>final<|message>x<|return|>", [["final", null, "x"]]],
  ["content_type_after_channel", "assistant", [], "<|channel|>commentary to=python <|constrain|><|channel|><|constrain|>code<|message|>1+1<|call|>", [["commentary", "python", "1+1"]]],
  ["spliced_content_type", "assistant", [], "<|channel|>analysis to=python <|constrain|>analysis code<|message|>1+1<|call|>", [["analysis", "python", "1+1"]]],
  ["spliced_content_type", "assistant", ["x"], "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary to=functions.x <|constrain|>commentary json<|message|>{}<|call|>", [["analysis", null, "a"], ["commentary", "functions.x", "{}"]]],
  ["unknown_channel", "assistant", [], "<|channel|>thinking<|message|>secret<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>", [["thinking", null, "secret"], ["final", null, "ok"]]],
  ["channel_after_content_type", "assistant", ["get_weather"], ' to=functions.get_weather <|constrain|>json<|channel|>commentary<|message|>{"city": "Tokyo"}<|call|>', [["commentary", "functions.get_weather", '{"city": "Tokyo"}']]],
];

test("any number of misspelled control tokens in a header is read one after another", () => {
  const text = `${CH}final` + "<channel|>final".repeat(3000) + "<message|>ok<|return|>";
  for (const feed of ["text", "tokens"]) {
    const parser = new HarmonyStreamParser(encoding, "assistant", "lenient");
    const events = [...(feed === "text" ? parser.feedText(text) : parser.feedTokens(all(text))), ...parser.close()];
    const got = events.filter((e): e is MessageEnd => e instanceof MessageEnd).map((e) => [e.message.channel, e.message.content]);
    assert.deepEqual(got, [["final", "ok"]], feed);
    assert.equal(events.filter((e) => e instanceof Recovered && e.rule === spec.RECOVERY_CONTROL_SPELLING).length, 3001);
  }
});

test("every recovery rule has a case", () => {
  const tested = new Set([...LENIENT_CASES.map((c) => c[0]), ...TESTED_ELSEWHERE]);
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

// -- issue 8: real gpt-oss output (tests/test_stream.py's tests of the same names) --------------------------------

function feedAllText(parser: HarmonyStreamParser, text: string): Event[] {
  return [...parser.feedText(text), ...parser.close()];
}

test("reading one turn reads every call and cuts a result the model invented", () => {
  const call = "<|channel|>commentary to=functions.f json<|message|>{}<|call|>";
  const invented = "<|start|>functions.f to=assistant<|channel|>commentary<|message|>42<|end|>";
  const text = call + A + call + invented + A + "<|channel|>final<|message|>It is 42.<|return|>";
  let oneTurn: Event[] = [];
  for (const feed of ["text", "tokens"]) {
    const parser = new HarmonyStreamParser(encoding, "assistant", "lenient", ["f"], { stopAtTurnEnd: true });
    const events = feed === "text" ? feedAllText(parser, text) : [...parser.feedTokens(all(text)), ...parser.close()];
    assert.deepEqual(
      messagesOf(events).map((m) => [m.recipient, m.terminator]),
      [
        ["functions.f", "call"],
        ["functions.f", "call"],
      ],
    );
    const cut = events.filter((e): e is Recovered => e instanceof Recovered);
    assert.deepEqual(
      cut.map((e) => [e.rule, e.text]),
      [["invented_tool_result", invented + A + "<|channel|>final<|message|>It is 42.<|return|>"]],
    );
    oneTurn = events;
  }
  const transcript = new HarmonyStreamParser(encoding, "assistant", "lenient", ["f"], { stopAtTurnEnd: false });
  assert.deepEqual(
    messagesOf(feedAllText(transcript, text)).map((m) => m.role),
    [Role.Assistant, Role.Assistant, Role.Tool, Role.Assistant],
  );
  assert.deepEqual(parseText(encoding, text, "assistant", "lenient"), messagesOf(oneTurn)); // one turn is the default
});

test("a stop token spelled inside a JSON string is text", () => {
  const args = '{"note": "say <|end|> then \\"<|call|>\\" and stop"}';
  const text = `<|channel|>commentary to=functions.note json<|message|>${args}<|call|>`;
  const parser = new HarmonyStreamParser(encoding, "assistant", "lenient");
  const events: Event[] = [];
  for (const ch of text) events.push(...parser.feedText(ch)); // a character at a time
  events.push(...parser.close());
  const [message] = messagesOf(events);
  assert.deepEqual([message?.content, message?.terminator], [args, "call"]);
  assert.deepEqual(events.filter((e): e is Recovered => e instanceof Recovered).map((e) => e.rule), ["json_string_control", "json_string_control"]);
  const closed = parseText(encoding, '<|channel|>commentary to=functions.f json<|message|>{"a": "b"}<|call|>', Role.Assistant, "lenient");
  assert.equal(closed[0]?.content, '{"a": "b"}');
  const prose = parseText(encoding, '<|channel|>final<|message|>a "quote <|end|>', Role.Assistant, "lenient");
  assert.deepEqual(prose.map((m) => m.content), ['a "quote ']);
  const cut = parseTokens(encoding, all('<|channel|>commentary to=functions.f json<|message|>{"a": "<|call|>'), Role.Assistant, "lenient");
  assert.equal(cut[0]?.content, '{"a": "'); // token input: a stop token ends the call even inside a string
});

test("stripped text is split while streaming", () => {
  const text = 'analysisThink.assistantcommentaryOn it.assistantcommentary to=functions.get_weatherjson{"city":"A"}';
  const parser = new HarmonyStreamParser(encoding, "assistant", "lenient", ["get_weather"]);
  const events: Event[] = [];
  for (const ch of text) events.push(...parser.feedText(ch));
  assert.equal(messagesOf(events).length, 2); // the first two messages ended as the text came, not at close()
  events.push(...parser.close());
  assert.deepEqual(
    messagesOf(events).map((m) => [m.channel, m.recipient, m.contentType, m.content]),
    [
      ["analysis", null, null, "Think."],
      ["commentary", null, null, "On it."],
      ["commentary", "functions.get_weather", "json", '{"city":"A"}'], // never cut to one letter
    ],
  );
  const headers = events.filter((e): e is Recovered => e instanceof Recovered && e.rule === "stripped_special_tokens").map((e) => e.detail);
  assert.equal(headers.length, 3);
  assert.ok(headers[2]?.includes("assistantcommentary to=functions.get_weatherjson"));
});

test("stripped text says the role and loses no word", () => {
  const parser = new HarmonyStreamParser(encoding, Role.User, "lenient");
  const events = feedAllText(parser, "assistantfinalHello");
  const [message] = messagesOf(events);
  assert.deepEqual([message?.role, message?.channel, message?.content], [Role.Assistant, "final", "Hello"]);
  const repairs = events.filter((e): e is Recovered => e instanceof Recovered);
  assert.equal(repairs.length, 1);
  assert.ok(repairs[0]?.detail.includes("assistantfinal"));
  assert.equal(parseText(encoding, "finalHello", Role.User, "lenient")[0]?.role, Role.User);
});

test("the later channel and the later recipient win", () => {
  const text = "<|start|>assistant to=functions.a<|channel|>commentary<|channel|>analysis to=functions.b json<|message|>{}<|call|>";
  const events = feedAllText(new HarmonyStreamParser(encoding, null, "lenient"), text);
  const [message] = messagesOf(events);
  assert.deepEqual([message?.channel, message?.recipient], ["analysis", "functions.b"]);
  const aside = Object.fromEntries(events.filter((e): e is Recovered => e instanceof Recovered).map((e) => [e.rule, e.text]));
  assert.deepEqual(aside, { doubled_channel: "commentary", doubled_recipient: "to=functions.a" });
});

test("header junk never becomes a header part", () => {
  const cases: [string, [string, string | null, string | null]][] = [
    ["Sure thing!<|channel|>final<|message|>x<|end|>", ["final", null, null]],
    ["<|channel|>final json extra words<|message|>x<|end|>", ["final", null, "json"]],
    ["<|channel|>commentary? to=functions.f<|message|>{}<|call|>", ["commentary", "functions.f", null]],
    ["<|channel|>final <|constrain|>json and more<|message|>x<|end|>", ["final", null, "<|constrain|>json"]],
  ];
  for (const [text, header] of cases) {
    const [message] = messagesOf(feedAllText(new HarmonyStreamParser(encoding, "assistant", "lenient"), text));
    assert.deepEqual([message?.channel, message?.recipient, message?.contentType], header, text);
    assert.ok(["x", "{}"].includes(message?.content ?? ""));
  }
  const events = feedAllText(new HarmonyStreamParser(encoding, "assistant", "lenient"), "Sure thing!<|channel|>final<|message|>x<|end|>");
  assert.deepEqual(events.filter((e): e is Recovered => e instanceof Recovered).map((e) => e.text), ["Sure thing!"]);
});

test("names with dots, hyphens and other scripts survive", () => {
  for (const name of ["my-tool.v2", "6b15a608-9929__printEnv", "получить_погоду", "查询天气", "café_lookup"]) {
    const text = `<|channel|>commentary to=functions.${name} <|constrain|>json<|message|>{}<|call|>`;
    for (const mode of ["strict", "lenient"] as const) assert.equal(parseText(encoding, text, "assistant", mode, [name])[0]?.recipient, `functions.${name}`);
    assert.equal(parseText(encoding, `analysisx.assistantcommentary to=functions.${name} json{}`, "assistant", "lenient")[1]?.recipient, `functions.${name}`);
  }
});

test("nothing from nothing", () => {
  for (const text of ["", "\n", "<|return|>", "<|end|>", "<|channel|>final<|end|>", "<|channel|>commentary to=functions.f"]) {
    const events = feedAllText(new HarmonyStreamParser(encoding, "assistant", "lenient"), text);
    assert.ok(!events.some((e) => e instanceof MessageStart || e instanceof MessageEnd), text);
  }
});

test("reading one turn sets aside a turn the model wrote for someone else", () => {
  const text = "<|channel|>final<|message|>Done.<|end|><|start|>user<|message|>Thanks! And now?<|end|>";
  const events = feedAllText(new HarmonyStreamParser(encoding, "assistant", "lenient", null, { stopAtTurnEnd: true }), text);
  assert.deepEqual(messagesOf(events).map((m) => m.content), ["Done."]);
  assert.deepEqual(
    events.filter((e): e is Recovered => e instanceof Recovered).map((e) => [e.rule, e.text]),
    [["other_author", "<|start|>user<|message|>Thanks! And now?<|end|>"]],
  );
  assert.deepEqual(parseText(encoding, "<|start|>assistant" + text, null, "lenient").map((m) => m.role), [Role.Assistant, Role.User]);
});

test("a header cut by the end of the stream keeps even its stray words", () => {
  const events = feedAllText(new HarmonyStreamParser(encoding, "assistant", "lenient"), "<|channel|>commentary to=functions.f I think");
  assert.deepEqual(
    events.filter((e): e is Recovered => e instanceof Recovered).map((e) => [e.rule, e.text]),
    [["eof_in_header", "commentary to=functions.f I think"]],
  );
});

test("maxToolCalls sets aside what follows the N-th call; below 1 is refused", () => {
  const call = "<|channel|>commentary to=functions.f json<|message|>{}<|call|>";
  const text = call + A + call + A + call;
  for (const [limit, calls] of [
    [1, 1],
    [2, 2],
    [5, 3],
  ] as const) {
    const events = feedAllText(new HarmonyStreamParser(encoding, "assistant", "lenient", ["f"], { maxToolCalls: limit }), text);
    assert.equal(messagesOf(events).length, calls);
    assert.equal(events.some((e) => e instanceof Recovered && e.rule === "after_tool_call"), calls < 3);
  }
  assert.throws(() => new HarmonyStreamParser(encoding, "assistant", "lenient", null, { maxToolCalls: 0 }), RangeError);
});
