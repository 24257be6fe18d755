/**
 * Issue 17 in TypeScript: the peers' cases (tests/peers/cases.jsonl, read as tests/peers/peer_cases.py reads them) agree with
 * the peer that tests them, or are a decision against it; hidden text is never shown; a call the budget cut is no
 * call to run; Chat joins the visible parts with a new line.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";

import type { ResponseResource, StreamingEvent } from "#types";

import { chatCompletionChunks, countingIds, dumpAs, ResponseStreamer, toChatCompletion } from "../src/bridge/index.js";
import { loadHarmonyEncoding, type Role } from "../src/index.js";
import { HarmonyStreamParser, MessageEnd } from "../src/stream/index.js";
import { spec } from "../src/tables.js";
import { readJsonl, ROOT } from "./shared.js";

const encoding = loadHarmonyEncoding(spec.ENCODING_NAME);
type Json = Record<string, unknown>;
type Case = { id: string; class: string; role: string | null; tools: string[]; engine_stop: boolean | null; completion: string; expect: Json; decided?: boolean };
const CASES = readJsonl(join(ROOT, "tests", "peers", "cases.jsonl")) as unknown as Case[];

function feedings(c: Case): (string[] | number[])[] {
  const text = c.completion;
  const chunks: string[] = [];
  for (let i = 0; i < text.length; i += 3) chunks.push(text.slice(i, i + 3));
  return [[text], chunks, encoding.encode(text, { allowedSpecial: "all" })];
}

function serve(c: Case, pieces: readonly (string | number)[]): StreamingEvent[] {
  const streamer = new ResponseStreamer(encoding, null, { ids: countingIds(), createdAt: 0, tools: c.tools, role: c.role as Role | null });
  const events = [...streamer.start()];
  for (const piece of pieces) events.push(...(typeof piece === "string" ? streamer.feedText(piece) : streamer.feed(piece)));
  events.push(...streamer.finish(c.engine_stop));
  return events;
}

const responseOf = (events: StreamingEvent[]): ResponseResource => (events[events.length - 1] as unknown as { response: ResponseResource }).response;

function observe(c: Case, pieces: readonly (string | number)[]): Json {
  const parser = new HarmonyStreamParser(encoding, c.role as Role | null, "lenient", c.tools, { stopAtTurnEnd: true });
  const events = [];
  for (const piece of pieces) events.push(...(typeof piece === "string" ? parser.feedText(piece) : parser.feedTokens([piece])));
  events.push(...parser.close());
  const headers = events
    .filter((e): e is MessageEnd => e instanceof MessageEnd)
    .map((e) => ({ role: e.message.role, channel: e.message.channel, recipient: e.message.recipient, content_type: e.message.contentType }));
  const response = responseOf(serve(c, pieces));
  const dumped = dumpAs("ResponseResource", response) as Json;
  const items = dumped["output"] as Json[];
  const chat = toChatCompletion(response) as Json;
  const choice = (chat["choices"] as Json[])[0] as Json;
  const message = choice["message"] as Json;
  const texts = (kind: string): string[] =>
    items.filter((i) => i["type"] === kind).map((i) => ((i["content"] as Json[] | null) ?? []).map((p) => (p["text"] as string | undefined) ?? "").join(""));
  const calls = (message["tool_calls"] as Json[] | undefined) ?? [];
  return {
    content: message["content"],
    reasoning_content: message["reasoning_content"],
    tool_calls: calls.map((call) => ({ name: (call["function"] as Json)["name"], arguments: (call["function"] as Json)["arguments"] })),
    finish_reason: choice["finish_reason"],
    visible_texts: texts("message"),
    reasoning_texts: texts("reasoning"),
    call_arguments: items.filter((i) => i["type"] === "function_call").map((i) => i["arguments"]),
    function_call_status: items.filter((i) => i["type"] === "function_call").map((i) => i["status"]),
    status: dumped["status"],
    headers,
  };
}

function matches(key: string, expected: unknown, got: unknown): boolean {
  if (key === "headers") {
    const want = expected as Json[];
    const have = got as Json[];
    return want.length === have.length && want.every((e, i) => Object.entries(e).every(([k, v]) => (have[i] as Json)[k] === v));
  }
  return JSON.stringify(expected) === JSON.stringify(got);
}

function misses(c: Case): string[] {
  const out: string[] = [];
  for (const pieces of feedings(c)) {
    const got = observe(c, pieces);
    for (const [key, expected] of Object.entries(c.expect)) {
      if (!matches(key, expected, got[key])) out.push(`${key}: ${JSON.stringify(got[key])} (the peer: ${JSON.stringify(expected)})`);
    }
  }
  return out;
}

for (const c of CASES) {
  test(`peers: ${c.id}`, () => {
    const found = misses(c);
    if (c.decided) assert.ok(found.length > 0, `${c.id} agrees with the peer now`);
    else assert.deepEqual(found, []);
  });
}

test("a call the budget cut is no call to run, streamed or not", () => {
  const text = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Tok';
  const c: Case = { id: "cut", class: "", role: "assistant", tools: ["get_weather"], engine_stop: false, completion: text, expect: {} };
  const events = serve(c, [text]);
  const response = responseOf(events);
  const dumped = dumpAs("ResponseResource", response) as Json;
  const call = (dumped["output"] as Json[]).find((i) => i["type"] === "function_call") as Json;
  assert.deepEqual([dumped["status"], call["status"]], ["incomplete", "incomplete"]);
  assert.ok((dumped["harmony:repairs"] as Json[]).some((r) => r["rule"] === spec.RECOVERY_CALL_CUT_BY_BUDGET));
  const choice = ((toChatCompletion(response) as Json)["choices"] as Json[])[0] as Json;
  const message = choice["message"] as Json;
  assert.equal(choice["finish_reason"], "length");
  assert.ok(!("tool_calls" in message));
  assert.deepEqual(message[spec.CHAT_PARTIAL_CALLS_FIELD], [{ id: call["call_id"], type: "function", function: { name: "get_weather", arguments: '{"location":"Tok' } }]);
  const deltas = [...chatCompletionChunks(events)].flatMap((chunk) => ((chunk["choices"] as Json[] | undefined) ?? []).map((ch) => ch["delta"] as Json));
  assert.ok(!deltas.some((d) => "tool_calls" in d));
  assert.equal(deltas.filter((d) => spec.CHAT_PARTIAL_CALLS_FIELD in d).length, 1);
});

test("Chat joins a preamble and the answer with a new line, streamed or not", () => {
  const text = "<|channel|>commentary<|message|>Let me look that up.<|end|><|start|>assistant<|channel|>final<|message|>The answer is 42.<|return|>";
  const c: Case = { id: "join", class: "", role: "assistant", tools: [], engine_stop: true, completion: text, expect: {} };
  const chunks: string[] = [];
  for (let i = 0; i < text.length; i += 4) chunks.push(text.slice(i, i + 4));
  const events = serve(c, chunks);
  const expected = "Let me look that up." + spec.CHAT_VISIBLE_SEPARATOR + "The answer is 42.";
  const message = (((toChatCompletion(responseOf(events)) as Json)["choices"] as Json[])[0] as Json)["message"] as Json;
  assert.equal(message["content"], expected);
  const streamed = [...chatCompletionChunks(events)]
    .flatMap((chunk) => ((chunk["choices"] as Json[] | undefined) ?? []).map((ch) => ((ch["delta"] as Json)["content"] as string | undefined) ?? ""))
    .join("");
  assert.equal(streamed, expected);
});
