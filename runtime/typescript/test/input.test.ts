/** Output as input in TypeScript: the bridge's own items come back as the messages the model wrote. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { buildResponse, countingIds, dumpAs, itemsToMessages, KnownCalls, parseRequest, RequestError, requestToConversation, validateAs } from "../src/bridge/index.js";
import { loadHarmonyEncoding, Role } from "../src/index.js";
import { spec } from "../src/tables.js";

const encoding = loadHarmonyEncoding(spec.ENCODING_NAME);
type Json = Record<string, unknown>;
const TOOLS = [{ type: "function", name: "get_weather", parameters: { type: "object" } }];

function promptOf(input: unknown[]): string {
  const body = parseRequest({ tools: TOOLS, input });
  return encoding.decodeUtf8(encoding.renderConversationForCompletion(requestToConversation(body), Role.Assistant));
}

function refusal(input: unknown[]): RequestError {
  try {
    requestToConversation(parseRequest({ tools: TOOLS, input }));
  } catch (e) {
    if (e instanceof RequestError) return e;
    throw e;
  }
  throw new Error("accepted");
}

test("a completion's output items render back to the completion, next to the tool's answer", () => {
  const user = { type: "message", role: "user", content: "Weather?" };
  const before = encoding.renderConversationForCompletion(requestToConversation(parseRequest({ tools: TOOLS, input: [user] })), Role.Assistant);
  const text =
    "<|channel|>analysis<|message|>Need it.<|end|>" +
    "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{}<|call|>";
  const completion = encoding.encode(text, { allowedSpecial: "all" });
  const response = buildResponse(completion, encoding, parseRequest({ tools: TOOLS, input: [user] }), { ids: countingIds() });
  const output = (dumpAs("ResponseResource", response) as Json)["output"] as Json[];
  assert.deepEqual(output.map((o) => o["type"]), ["reasoning", "function_call"]);
  const answer = { type: "function_call_output", call_id: output[1]?.["call_id"], output: "sunny" };
  const after = encoding.renderConversationForCompletion(requestToConversation(parseRequest({ tools: TOOLS, input: [user, ...output, answer] })), Role.Assistant);
  assert.deepEqual(after.slice(0, before.length + completion.length), [...before, ...completion]);
  assert.ok(encoding.decodeUtf8(after).endsWith("<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny<|end|><|start|>assistant"));
});

test("a function call renders on the channel and with the content type its vendor fields name", () => {
  const call = { type: "function_call", call_id: "c1", name: "get_weather", arguments: "{}", [spec.RESPONSE_CHANNEL_FIELD]: "analysis", [spec.RESPONSE_CONTENT_TYPE_FIELD]: null };
  const answer = { type: "function_call_output", call_id: "c1", output: "sunny" };
  assert.ok(
    promptOf([call, answer]).includes(
      "<|start|>assistant to=functions.get_weather<|channel|>analysis<|message|>{}<|call|><|start|>functions.get_weather to=assistant<|channel|>analysis<|message|>sunny<|end|>",
    ),
  );
  const bare = { type: "function_call", call_id: "c1", name: "get_weather", arguments: "{}", [spec.RESPONSE_CHANNEL_FIELD]: null, [spec.RESPONSE_CONTENT_TYPE_FIELD]: "json" };
  assert.ok(promptOf([bare]).includes("<|start|>assistant to=functions.get_weather json<|message|>{}<|call|>"));
});

test("an answer written with no channel comes back with none, and a message's content type comes back too", () => {
  const user = { type: "message", role: "user", content: "Weather?" };
  const later = { type: "message", role: "user", content: "Thanks" };
  const outputOf = (text: string): Json[] => {
    const response = buildResponse([text], encoding, parseRequest({ tools: TOOLS, input: [user] }), { ids: countingIds() });
    return (dumpAs("ResponseResource", response) as Json)["output"] as Json[];
  };
  // the lenient parser reads text after <|end|> with no header as the answer: a message with no channel
  const bare = outputOf("<|channel|>analysis<|message|>think<|end|>The answer");
  assert.deepEqual([bare[1]?.["phase"], bare[1]?.[spec.RESPONSE_CHANNEL_FIELD]], ["final_answer", null]);
  assert.ok(!(spec.RESPONSE_CONTENT_TYPE_FIELD in (bare[1] ?? {})));
  assert.ok(
    promptOf([user, ...bare, later]).endsWith(
      "<|start|>user<|message|>Weather?<|end|><|start|>assistant<|channel|>analysis<|message|>think<|end|>" +
        "<|start|>assistant<|message|>The answer<|end|><|start|>user<|message|>Thanks<|end|><|start|>assistant",
    ),
  );
  const typed = outputOf('<|channel|>final <|constrain|>json<|message|>{"a":1}<|return|>');
  assert.deepEqual([typed[0]?.[spec.RESPONSE_CONTENT_TYPE_FIELD], spec.RESPONSE_CHANNEL_FIELD in (typed[0] ?? {})], ["<|constrain|>json", false]);
  assert.ok(promptOf([user, ...typed, later]).includes('<|start|>assistant<|channel|>final <|constrain|>json<|message|>{"a":1}<|end|><|start|>user'));
  // a channel the format does not know is hidden text: reasoning (issue 17), never a message
  const other = outputOf("<|channel|>notes<|message|>x<|return|>");
  assert.deepEqual(other.map((item) => item["type"]), ["reasoning"]);
  assert.ok(promptOf([user, ...other]).includes("<|start|>assistant<|channel|>analysis<|message|>x<|end|>"));
  const thought = outputOf("<|channel|>analysis json<|message|>{}<|end|><|start|>assistant<|channel|>final<|message|>x<|return|>");
  assert.equal(thought[0]?.[spec.RESPONSE_CONTENT_TYPE_FIELD], "json");
  assert.ok(promptOf([user, thought[0]]).includes("<|channel|>analysis json<|message|>{}<|end|>"));
});

test("reasoning content wins over its summary, and is dropped after a final answer", () => {
  const reasoning = { type: "reasoning", summary: [{ type: "summary_text", text: "Summary." }], content: [{ type: "reasoning_text", text: "Raw." }] };
  const kept = promptOf([{ type: "message", role: "user", content: "q" }, reasoning]);
  assert.ok(kept.includes("<|channel|>analysis<|message|>Raw.<|end|>") && !kept.includes("Summary."));
  const final = { type: "message", role: "assistant", phase: "final_answer", content: [{ type: "output_text", text: "A." }] };
  const dropped = promptOf([{ type: "message", role: "user", content: "q" }, reasoning, final, { type: "message", role: "user", content: "more" }]);
  assert.ok(!dropped.includes("Raw.") && dropped.includes("<|channel|>final<|message|>A.<|end|>"));
});

test("extension calls and their outputs, and the calls a store shares across batches", () => {
  const call = { type: "harmony:python_call", id: "hpc_1", recipient: "python", arguments: "1+1", channel: "analysis", content_type: "code" };
  const answer = { type: spec.INPUT_TOOL_OUTPUT_TYPE, call_id: "hpc_1", output: "2" };
  assert.ok(promptOf([call, answer]).includes("<|start|>assistant to=python<|channel|>analysis code<|message|>1+1<|call|><|start|>python to=assistant<|channel|>analysis<|message|>2<|end|>"));
  const calls = new KnownCalls();
  itemsToMessages([validateAs("ItemParam", call)], "stored", calls);
  const read = itemsToMessages([validateAs("ItemParam", answer)], "input", calls);
  assert.equal(read.messages[0]?.author.name, "python");
  assert.throws(() => itemsToMessages([validateAs("ItemParam", answer)]), (e: unknown) => e instanceof RequestError && e.param === "input[0].call_id");
});

test("malformed items are typed 400s at their field", () => {
  assert.equal(refusal([{ type: "harmony:browser_call", recipient: 5, arguments: "" }]).param, "input[0].recipient");
  assert.equal(refusal([{ type: "harmony:browser_call", recipient: "x" }]).code, "missing_required_parameter");
  assert.equal(refusal([{ type: spec.INPUT_TOOL_OUTPUT_TYPE, call_id: "nope", output: "x" }]).code, "unknown_call_id");
  assert.equal(refusal([{ type: "reasoning", summary: [], content: 5 }]).param, "input[0].content");
  assert.equal(refusal([{ type: "function_call", call_id: "c", name: "get_weather", arguments: "{}", [spec.RESPONSE_CHANNEL_FIELD]: 5 }]).param, `input[0]["${spec.RESPONSE_CHANNEL_FIELD}"]`);
  const answer = { type: "message", role: "assistant", phase: "final_answer", content: [{ type: "output_text", text: "A." }] };
  assert.equal(refusal([{ ...answer, [spec.RESPONSE_CHANNEL_FIELD]: 5 }]).param, `input[0]["${spec.RESPONSE_CHANNEL_FIELD}"]`);
  assert.equal(refusal([{ ...answer, [spec.RESPONSE_CONTENT_TYPE_FIELD]: [] }]).param, `input[0]["${spec.RESPONSE_CONTENT_TYPE_FIELD}"]`);
  assert.equal(refusal([{ type: "reasoning", summary: [], [spec.RESPONSE_CONTENT_TYPE_FIELD]: 1 }]).param, `input[0]["${spec.RESPONSE_CONTENT_TYPE_FIELD}"]`);
  assert.equal(refusal([{ type: "acme:thing" }]).code, "unsupported_item");
});
