/** The Open Responses bridge in TypeScript: golden prompts, 400s, items and events in spec order, SSE, Chat. */

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import type { CreateResponseBody, ResponseResource, StreamingEvent } from "#types";

import {
  buildResponse,
  chatCompletionChunks,
  checkArguments,
  countingIds,
  dumpAs,
  parseRequest,
  parseSse,
  RequestError,
  requestToConversation,
  SSEError,
  SSEStreamer,
  streamResponse,
  streamSse,
  toChatCompletion,
  toolPolicy,
  toSse,
  tokensFromText,
  validateAs,
} from "../src/bridge/index.js";
import { loadHarmonyEncoding, Role } from "../src/index.js";
import { readJson } from "../src/json.js";
import type { Recovered } from "../src/stream/events.js";
import { spec } from "../src/tables.js";
import { ROOT } from "./shared.js";

const encoding = loadHarmonyEncoding(spec.ENCODING_NAME);
const CASES = join(ROOT, "tests", "bridge");
const NAMES = readdirSync(CASES).sort();
const tokens = (text: string): number[] => encoding.encode(text, { allowedSpecial: "all" });
type Json = Record<string, unknown>;

function request(name: string): CreateResponseBody {
  return parseRequest(readJson(readFileSync(join(CASES, name, "request.json"), "utf8")));
}

function completion(name: string): string {
  return readFileSync(join(CASES, name, "completion.txt"), "utf8");
}

// completed_at reads the clock, and a second may tick between two runs that a test compares: both read this one
const fixedClock = (): number => 1764000000;

function eventsOf(input: number[] | string[], body: CreateResponseBody | null = null, strict = false): StreamingEvent[] {
  return [...streamResponse(input, encoding, body, { ids: countingIds(), createdAt: 1764000000, clock: fixedClock, inputTokens: 100, strict })];
}


const plain = (value: unknown): Json => JSON.parse(JSON.stringify(value)) as Json;
const final = (events: StreamingEvent[]): ResponseResource => (events[events.length - 1] as unknown as { response: ResponseResource }).response;

/** The events of every item follow the spec's order (`EVENT_ORDER`), and each validates as its model. */
function checkStream(events: readonly StreamingEvent[]): void {
  assert.deepEqual(events.slice(0, 2).map((e) => e.type), [...spec.STREAM_OPENING]);
  assert.ok(Object.values(spec.STREAM_CLOSING).includes(events[events.length - 1]?.type ?? ""));
  events.forEach((e, i) => assert.equal((e as unknown as { sequence_number: number }).sequence_number, i));
  const byItem = new Map<number, string[]>();
  for (const e of events.slice(2, -1)) {
    if (e.type === spec.STREAM_ERROR) continue;
    const index = (e as unknown as { output_index: number }).output_index;
    byItem.set(index, [...(byItem.get(index) ?? []), e.type]);
  }
  for (const [index, types] of byItem) {
    const item = (final(events as StreamingEvent[]).output as unknown as { type: string }[])[index];
    const kind = Object.entries(spec.ITEM_KINDS).find(([, row]) => row.type === item?.type)?.[0] ?? "";
    const order = spec.EVENT_ORDER[kind] ?? [];
    const collapsed = types.filter((t, i) => !(order.includes(`${t}*`) && types[i - 1] === t));
    const expected = order.filter((t) => !t.endsWith("*") || collapsed.includes(t.slice(0, -1))).map((t) => t.replace(/\*$/, ""));
    assert.deepEqual(collapsed, expected, `item ${index} (${kind})`);
  }
  for (const e of events) validateAs("StreamingEvent", readJson(JSON.stringify(dumpAs("StreamingEvent", e))));
}

test("each bundled request renders its golden prompt, byte for byte", () => {
  assert.ok(NAMES.length >= 3);
  for (const name of NAMES) {
    const conversation = requestToConversation(request(name));
    const text = encoding.decodeUtf8(encoding.renderConversationForCompletion(conversation, Role.Assistant));
    assert.deepEqual(Buffer.from(text, "utf8"), readFileSync(join(CASES, name, "prompt.txt")), name);
  }
});

test("tool_choice selects what the prompt offers", () => {
  const raw = readJson(readFileSync(join(CASES, "tools", "request.json"), "utf8")) as Json;
  const prompt = (r: Json): string => encoding.decodeUtf8(encoding.renderConversationForCompletion(requestToConversation(parseRequest(r)), Role.Assistant));
  assert.ok(prompt(raw).includes("type get_time"));
  assert.deepEqual(toolPolicy(parseRequest(raw)).allowed, ["get_weather", "get_time"]);
  assert.ok(!prompt({ ...raw, tool_choice: "none" }).includes(`namespace ${spec.HEADER_FUNCTION_NAMESPACE}`));
  const named = prompt({ ...raw, tool_choice: { type: "function", name: "get_time" } });
  assert.ok(named.includes("type get_time") && !named.includes("get_weather"));
  assert.equal(toolPolicy(parseRequest({ ...raw, tool_choice: "required" })).mode, "required");
});

const BAD: [Json, string, string][] = [
  [{ input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "?" }, { type: "input_image", image_url: "u" }] }] }, "unsupported_content", "input[0].content[1]"],
  [{ tools: [{ type: 5 }] }, "invalid_request", "tools[0].type"],
  [{ input: [{ type: "item_reference", id: "msg_9" }] }, "item_reference_not_found", "input[0].id"],
  [{ input: [{ id: "msg_9" }] }, "item_reference_not_found", "input[0].id"],
  [{ previous_response_id: "resp_1", input: "hi" }, "previous_response_not_found", "previous_response_id"],
  [{ input: [{ type: "function_call_output", call_id: "call_x", output: "1" }] }, "unknown_call_id", "input[0].call_id"],
  [{ reasoning: { effort: "xhigh" }, input: "hi" }, "unsupported_reasoning_effort", "reasoning.effort"],
  [{ tool_choice: { type: "function", name: "nope" }, input: "hi" }, "invalid_tool_choice", "tool_choice.name"],
  [{ tool_choice: "required", input: "hi" }, "invalid_tool_choice", "tool_choice"],
  [{ input: [{ type: "reasoning", summary: [], encrypted_content: "gAAA" }] }, "unsupported_parameter", "input[0].encrypted_content"],
  [{ input: [{ type: "compaction", encrypted_content: "x" }] }, "unsupported_item", "input[0].type"],
  [{ input: [{ type: "acme:search", query: "q" }] }, "unsupported_item", "input[0].type"],
  [{ text: { format: { type: "json_schema", schema: {} } }, input: "hi" }, "missing_required_parameter", "text.format.name"],
];

test("what the model cannot take is a 400 naming the parameter", () => {
  for (const [raw, code, param] of BAD) {
    assert.throws(
      () => requestToConversation(parseRequest(raw)),
      (e: unknown) => e instanceof RequestError && e.code === code && e.param === param && e.status === 400,
      JSON.stringify(raw),
    );
  }
  const body = new RequestError("x", "y", "z").toBody();
  assert.deepEqual(plain(body), { error: { type: "invalid_request_error", code: "x", message: "y", param: "z" } });
});

test("bundled completions stream in the spec's order and end completed", () => {
  for (const name of NAMES) {
    const events = eventsOf(tokens(completion(name)), request(name));
    checkStream(events);
    assert.equal(events[events.length - 1]?.type, spec.STREAM_CLOSING["completed"]);
    const response = buildResponse(tokens(completion(name)), encoding, request(name), { ids: countingIds(), createdAt: 1764000000, clock: fixedClock, inputTokens: 100 });
    assert.deepEqual(plain(dumpAs("ResponseResource", response)), plain(dumpAs("ResponseResource", final(events))));
  }
});

test("a tool-call completion maps every message, with usage", () => {
  const text = completion("tools");
  const response = buildResponse(tokens(text), encoding, request("tools"), { ids: countingIds(), inputTokens: 100 });
  const out = plain(dumpAs("ResponseResource", response))["output"] as Json[];
  assert.deepEqual(out.map((o) => o["type"]), ["reasoning", "message", "function_call"]);
  assert.equal(out[1]?.["phase"], "commentary");
  assert.deepEqual([out[2]?.["name"], out[2]?.["arguments"], out[2]?.["status"]], ["get_weather", '{"city":"Paris","unit":"celsius"}', "completed"]);
  const usage = response.usage;
  assert.ok(usage !== null && usage !== undefined);
  assert.equal(usage.input_tokens, 100);
  assert.equal(usage.output_tokens, tokens(text).length);
  assert.ok(usage.output_tokens_details.reasoning_tokens > 0 && usage.output_tokens_details.reasoning_tokens < usage.output_tokens);
});

test("a budget cut mid-item ends incomplete; strict fails where lenient repairs and says so", () => {
  const cut = eventsOf(tokens(completion("function_call_round_trip")).slice(0, -6), request("function_call_round_trip"));
  checkStream(cut);
  assert.equal(final(cut).status, "incomplete");
  assert.equal((toChatCompletion(final(cut))["choices"] as Json[])[0]?.["finish_reason"], spec.CHAT_FINISH_REASONS["incomplete"]);
  const text = `${spec.SPELLING_CHANNEL}final${spec.SPELLING_MESSAGE}Hi${spec.SPELLING_END}junk before start${spec.SPELLING_START}assistant${spec.SPELLING_CHANNEL}final${spec.SPELLING_MESSAGE}!${spec.SPELLING_END_DONE_SAMPLING}`;
  const strict = eventsOf(tokens(text), null, true);
  checkStream(strict);
  assert.deepEqual(strict.slice(-2).map((e) => e.type), [spec.STREAM_ERROR, spec.STREAM_CLOSING["failed"]]);
  assert.match(final(strict).error?.message ?? "", /text outside a message.*at token 5/);
  const seen: Recovered[] = [];
  const lenient = [...streamResponse(tokens(text), encoding, null, { ids: countingIds(), onRepair: (r) => seen.push(r) })];
  checkStream(lenient);
  assert.deepEqual(
    (final(lenient).output as unknown as { content: { text: string }[] }[]).map((o) => o.content[0]?.text),
    ["Hi", "!"],
  );
  const repairs = plain(dumpAs("ResponseResource", final(lenient)))[spec.RESPONSE_REPAIRS_FIELD] as Json[];
  assert.deepEqual(repairs.map((r) => [r["rule"], r["text"]]), [["junk_between_messages", "junk before start"]]);
  assert.deepEqual(seen.map((r) => r.rule), ["junk_between_messages"]);
  const clean = buildResponse(tokens(`${spec.SPELLING_CHANNEL}final${spec.SPELLING_MESSAGE}Hi${spec.SPELLING_END_DONE_SAMPLING}`), encoding);
  assert.ok(!(spec.RESPONSE_REPAIRS_FIELD in plain(dumpAs("ResponseResource", clean))));
});

test("text chunks cut anywhere give the same response as tokens", () => {
  const text = completion("tools");
  const chunks = Array.from({ length: Math.ceil(text.length / 3) }, (_, i) => text.slice(i * 3, i * 3 + 3));
  assert.ok([...tokensFromText(chunks, encoding)].length > 0);
  const strip = (r: ResponseResource): Json => {
    const d = plain(dumpAs("ResponseResource", r));
    delete d["usage"];
    delete d["completed_at"];
    return d;
  };
  const byText = buildResponse(chunks, encoding, request("tools"), { ids: countingIds(), createdAt: 1, clock: fixedClock });
  const byTokens = buildResponse(tokens(text), encoding, request("tools"), { ids: countingIds(), createdAt: 1, clock: fixedClock });
  assert.deepEqual(strip(byText), strip(byTokens));
});

test("SSE: the server's streamer writes what toSse writes, and parseSse reads it back", () => {
  for (const names of ["spec", "openai"] as const) {
    for (const name of NAMES) {
      const ids = tokens(completion(name));
      const options = { ids: countingIds(), createdAt: 1, clock: () => 1, reasoningNames: names };
      const fast = [...streamSse(ids, encoding, request(name), options)].join("");
      const typed = [...toSse(streamResponse(ids, encoding, request(name), { ids: countingIds(), createdAt: 1, clock: () => 1 }), names)].join("");
      assert.equal(fast, typed, `${name} ${names}`);
      const streamer = new SSEStreamer(encoding, request(name), { ids: countingIds(), createdAt: 1, clock: () => 1, reasoningNames: names });
      let byToken = streamer.start();
      for (const t of ids) byToken += streamer.feed(t);
      byToken += streamer.finish();
      assert.equal(byToken, typed);
      const events = [...streamResponse(ids, encoding, request(name), { ids: countingIds(), createdAt: 1, clock: () => 1 })];
      assert.deepEqual(plain(parseSse([typed]).map((e) => dumpAs("StreamingEvent", e))), plain(events.map((e) => dumpAs("StreamingEvent", e))));
      assert.deepEqual(plain(parseSse([typed.replace(/\n/g, "\r\n")]).map((e) => dumpAs("StreamingEvent", e))), plain(events.map((e) => dumpAs("StreamingEvent", e))));
    }
  }
  assert.throws(() => parseSse(["event: error\ndata: {nope\n\n"]), (e: unknown) => e instanceof SSEError && e.message.startsWith("line 2: data: not valid JSON"));
  assert.throws(() => parseSse(["hello\n\n"]), (e: unknown) => e instanceof SSEError && e.message.startsWith("line 1: not an SSE field"));
});

test("Chat Completions: the object and its chunks", () => {
  const events = eventsOf(tokens(completion("tools")), request("tools"));
  const chat = toChatCompletion(final(events));
  const choice = (chat["choices"] as Json[])[0] as Json;
  assert.equal(choice["finish_reason"], spec.CHAT_FINISH_REASONS["tool_calls"]);
  const message = choice["message"] as Json;
  assert.equal(message["content"], "Let me check the current weather in Paris.");
  const chunks = [...chatCompletionChunks(events)];
  const args = chunks
    .map((c) => ((c["choices"] as Json[])[0]?.["delta"] as Json)["tool_calls"] as Json[] | undefined)
    .filter((t) => t !== undefined)
    .map((t) => ((t[0] as Json)["function"] as Json)["arguments"])
    .join("");
  assert.equal(args, '{"city":"Paris","unit":"celsius"}');
  const failed = [...streamResponse(tokens(`${spec.SPELLING_CHANNEL}final${spec.SPELLING_MESSAGE}Hi${spec.SPELLING_END}junk`), encoding, null, { strict: true, ids: countingIds() })];
  const last = [...chatCompletionChunks(failed)].pop() as Json;
  assert.equal((last["error"] as Json)["code"], spec.ERROR_MODEL_OUTPUT_INVALID);
});

// -- issue 8: calls served right (tests/test_bridge_calls.py's tests of the same names) ---------------------------

const A = "<|start|>assistant";
const weather = (city: string): string => `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"${city}"}<|call|>`;

function toolsRequest(...tools: Json[]): CreateResponseBody {
  return parseRequest({ model: "gpt-oss", input: "hi", tools: tools.map((t) => ({ type: "function", ...t })) });
}

/** The events of a completion given as text in chunks of five characters, and the final response as JSON. */
function serve(text: string, body: CreateResponseBody | null = null, options: { onRepair?: (r: Recovered) => void } = {}): [StreamingEvent[], Json] {
  const chunks = Array.from({ length: Math.ceil(text.length / 5) }, (_, i) => text.slice(i * 5, i * 5 + 5));
  const events = [...streamResponse(chunks, encoding, body, { ids: countingIds(), createdAt: 1, ...options })];
  checkStream(events);
  return [events, plain(dumpAs("ResponseResource", final(events)))];
}

const outputOf = (response: Json): Json[] => response["output"] as Json[];
const repairRules = (response: Json): string[] => ((response[spec.RESPONSE_REPAIRS_FIELD] as Json[] | undefined) ?? []).map((r) => r["rule"] as string);

test("several calls in one turn are items in order", () => {
  let text = "<|channel|>analysis<|message|>Two cities.<|end|>" + A + weather("Paris") + A + weather("Rome");
  text += A + "<|channel|>final<|message|>Checking both.<|return|>" + A + "<|channel|>final<|message|>late<|end|>";
  const [, response] = serve(text, toolsRequest({ name: "get_weather" }));
  const items = outputOf(response);
  assert.deepEqual(items.map((i) => i["type"]), ["reasoning", "function_call", "function_call", "message"]);
  assert.deepEqual(items.filter((i) => i["type"] === "function_call").map((i) => (JSON.parse(i["arguments"] as string) as Json)["city"]), ["Paris", "Rome"]);
  assert.ok(repairRules(response).includes("after_turn_end"));
  const chat = (toChatCompletion(final(serve(text, toolsRequest({ name: "get_weather" }))[0]))["choices"] as Json[])[0] as Json;
  const message = chat["message"] as Json;
  assert.deepEqual((message["tool_calls"] as Json[]).map((c) => (c["function"] as Json)["name"]), ["get_weather", "get_weather"]);
  assert.deepEqual([chat["finish_reason"], message["content"]], ["tool_calls", "Checking both."]);
});

test("a result the model invented is cut and flagged; text after a call is set aside; text after <|end|> is the answer", () => {
  const invented = "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny<|end|>";
  const [, response] = serve(weather("Oslo") + invented + A + "<|channel|>final<|message|>It is sunny.<|return|>", toolsRequest({ name: "get_weather" }));
  assert.deepEqual(outputOf(response).map((i) => i["type"]), ["function_call"]);
  const cut = (response[spec.RESPONSE_REPAIRS_FIELD] as Json[]).find((r) => r["rule"] === "invented_tool_result");
  assert.equal(cut?.["text"], invented + A + "<|channel|>final<|message|>It is sunny.<|return|>");
  assert.ok(repairRules(serve(weather("Lima") + "It is sunny in Lima.", toolsRequest({ name: "get_weather" }))[1]).includes("text_after_call"));
  const items = outputOf(serve("<|channel|>analysis<|message|>Easy.<|end|>\n\n2 + 2 = 4.")[1]);
  assert.deepEqual(items.map((i) => i["type"]), ["reasoning", "message"]);
  assert.deepEqual([((items[1]?.["content"] as Json[])[0] as Json)["text"], items[1]?.["phase"]], ["2 + 2 = 4.", "final_answer"]);
});

test("a control token spelled inside a JSON string does not end the call", () => {
  const args = '{"content":"ends with <|end|> or <|call|>, starts with <|start|>"}';
  const [, response] = serve(`<|channel|>commentary to=functions.write json<|message|>${args}<|call|>`, toolsRequest({ name: "write" }));
  assert.equal(outputOf(response)[0]?.["arguments"], args);
  assert.equal(repairRules(response).filter((r) => r === "json_string_control").length, 2);
});

test("empty arguments become an empty object, streamed as one more delta", () => {
  for (const body of ["", "\n"]) {
    const [events, response] = serve(`<|channel|>commentary to=functions.get_location <|constrain|>json<|message|>${body}<|call|>`, toolsRequest({ name: "get_location" }));
    const [call] = outputOf(response);
    assert.deepEqual([JSON.parse(call?.["arguments"] as string), call?.["status"]], [{}, "completed"]);
    const deltas = events.filter((e) => e.type === "response.function_call_arguments.delta").map((e) => (e as unknown as { delta: string }).delta);
    assert.equal(deltas.join(""), call?.["arguments"]);
    assert.ok(repairRules(response).includes("empty_arguments"));
  }
  assert.equal(outputOf(serve("<|channel|>commentary to=functions.get_location<|call|>", toolsRequest({ name: "get_location" }))[1])[0]?.["arguments"], "{}");
});

test("arguments cut by the budget leave the item and the response incomplete", () => {
  const text = '<|channel|>commentary to=functions.write json<|message|>{"path":"a.py","content":"def f';
  const events = [...streamResponse([text], encoding, toolsRequest({ name: "write" }), { ids: countingIds(), createdAt: 1, stopped: false })];
  checkStream(events);
  const response = plain(dumpAs("ResponseResource", final(events)));
  assert.deepEqual([response["status"], outputOf(response)[0]?.["status"], outputOf(response)[0]?.["arguments"]], ["incomplete", "incomplete", '{"path":"a.py","content":"def f']);
});

const STRICT: Json = {
  name: "get_weather",
  strict: true,
  parameters: {
    type: "object",
    properties: { city: { type: "string" }, unit: { type: "string", enum: ["c", "f"] } },
    required: ["city"],
    additionalProperties: false,
  },
};

test("a strict tool's arguments are checked: valid ones pass unannotated, others are reported on the item, never changed", () => {
  const [, ok] = serve(weather("Quito"), toolsRequest(STRICT));
  assert.ok(!(spec.RESPONSE_VALIDATION_FIELD in (outputOf(ok)[0] as Json)) && !repairRules(ok).includes("arguments_invalid"));
  const seen: Recovered[] = [];
  const text = '<|channel|>commentary to=functions.get_weather json<|message|>{"town":"Quito","unit":"k"}<|call|>';
  const [, response] = serve(text, toolsRequest(STRICT), { onRepair: (r) => seen.push(r) });
  const call = outputOf(response)[0] as Json;
  assert.deepEqual([response["status"], call["arguments"]], ["completed", '{"town":"Quito","unit":"k"}']);
  assert.deepEqual(call[spec.RESPONSE_VALIDATION_FIELD], {
    valid: false,
    errors: [
      { path: "", message: '"city" is a required property' },
      { path: "", message: '"town" is not an allowed property' },
      { path: "/unit", message: 'not one of ["c","f"]' },
    ],
  });
  assert.ok(repairRules(response).includes("arguments_invalid") && seen.some((r) => r.rule === "arguments_invalid"));
  const notJson = outputOf(serve(weather("Quito").replace('{"city":"Quito"}', "city=Quito"), toolsRequest(STRICT))[1])[0] as Json;
  assert.deepEqual(notJson[spec.RESPONSE_VALIDATION_FIELD], { valid: false, errors: [{ path: "", message: "not valid JSON" }] });
  const loose = outputOf(serve(text, toolsRequest({ ...STRICT, strict: false }))[1])[0] as Json;
  assert.ok(!(spec.RESPONSE_VALIDATION_FIELD in loose)); // only strict tools are checked
});

test("a schema ajv cannot compile is not checked, and says why", () => {
  const found = checkArguments("{}", { type: 5 } as unknown as Json as never);
  assert.equal(found.valid, null);
  assert.match(found.errors[0]?.message ?? "", /^the tool's schema is invalid: /);
});

test("built-in tools' calls are vendor-prefixed items", () => {
  const cases: [string, string][] = [
    ["browser.search", "harmony:browser_call"],
    ["browser.open", "harmony:browser_call"],
    ["python", "harmony:python_call"],
    ["container.exec", "harmony:container_call"],
    ["repo_browser.open_file", "harmony:tool_call"],
  ];
  for (const [recipient, kind] of cases) {
    const text = `<|channel|>analysis to=${recipient} code<|message|>{"query":"x"}<|call|>`;
    const [events, response] = serve(text);
    const item = outputOf(response)[0] as Json;
    assert.deepEqual(item, { type: kind, id: item["id"], status: "completed", recipient, arguments: '{"query":"x"}', channel: "analysis", content_type: "code" });
    const added = events.find((e) => e.type === spec.STREAM_ITEM_ADDED) as unknown as { item: Json };
    assert.equal(added.item["status"], "in_progress");
    const sse = [...streamSse([...text], encoding, null, { ids: countingIds(), createdAt: 1, clock: fixedClock })].join("");
    assert.equal(sse, [...toSse(streamResponse([...text], encoding, null, { ids: countingIds(), createdAt: 1, clock: fixedClock }))].join(""));
  }
});

test("a byte order mark is no tool call; a call with another header says so", () => {
  const text = "\ufeff<|channel|>analysis<|message|>Greeting.<|end|>" + A + "<|channel|>final<|message|>Hello!<|return|>";
  for (const input of [[text], tokens(text)]) {
    const response = plain(dumpAs("ResponseResource", buildResponse(input as string[], encoding, null, { ids: countingIds(), createdAt: 1 })));
    assert.deepEqual(outputOf(response).map((i) => i["type"]), ["reasoning", "message"]);
    assert.ok((response[spec.RESPONSE_REPAIRS_FIELD] as Json[]).some((r) => r["rule"] === "byte_order_mark" && r["text"] === "\ufeff"));
  }
  const usual = outputOf(serve(weather("Oslo"), toolsRequest({ name: "get_weather" }))[1])[0] as Json;
  assert.ok(!(spec.RESPONSE_CHANNEL_FIELD in usual) && !(spec.RESPONSE_CONTENT_TYPE_FIELD in usual));
  const other = outputOf(serve('<|channel|>analysis to=functions.get_weather code<|message|>{"city":"Oslo"}<|call|>', toolsRequest({ name: "get_weather" }))[1])[0] as Json;
  assert.deepEqual([other[spec.RESPONSE_CHANNEL_FIELD], other[spec.RESPONSE_CONTENT_TYPE_FIELD]], ["analysis", "code"]);
});

test("an empty answer is no content in chat form", () => {
  const [events] = serve("<|channel|>analysis<|message|>Nothing to say.<|end|>" + A + "<|channel|>final<|message|><|return|>");
  const message = ((toChatCompletion(final(events))["choices"] as Json[])[0] as Json)["message"] as Json;
  assert.deepEqual([message["content"], message["reasoning_content"]], [null, "Nothing to say."]);
});

test("text with an unknown finish is cut only where no stop token could end it", () => {
  const cases: [string, string][] = [
    ["<|channel|>analysis<|message|>Thinking it over", "incomplete"], // reasoning ends at <|end|>, no stop token
    ["analysisThinking it over", "incomplete"], // the same with the control tokens stripped
    ["<|channel|>final<|message|>The answer", "completed"], // a stop token the engine left out
    ["<|channel|>commentary<|message|>Let me check.", "completed"], // a preamble may end the turn
    ["<|channel|>final<|message|>", "incomplete"], // cut right after the header
    ["<|channel|>commentary to=functions.f json<|message|>", "incomplete"],
    ["Plain text with no control token", "completed"],
    ["", "completed"],
    ['<|channel|>commentary to=functions.f json<|message|>{"a": 1}', "completed"],
    ["<|channel|>commentary to=functions.f code<|message|>ls -la", "completed"],
    ['<|channel|>commentary to=functions.f json<|message|>{"a": "cut he', "incomplete"],
    ["<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>comm", "incomplete"],
  ];
  for (const [text, status] of cases) {
    assert.equal(buildResponse([text], encoding, null, { ids: countingIds(), createdAt: 1 }).status, status, text);
    const byIds = buildResponse(tokens(text), encoding, null, { ids: countingIds(), createdAt: 1 }).status;
    assert.equal(byIds, text && !text.endsWith("<|end|>") ? "incomplete" : "completed", text); // ids keep their stop token
  }
});
