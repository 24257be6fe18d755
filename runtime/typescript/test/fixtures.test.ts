/** The shared fixtures, in TypeScript: the reference's render cases and goldens, and the three corpora. */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import {
  Conversation,
  HarmonyError,
  loadHarmonyEncoding,
  Message,
  parseRole,
  RenderConversationConfig,
  type Role,
  StreamableParser,
  StreamState,
} from "../src/index.js";
import { isJsonObject, readJson, type JsonObject } from "../src/json.js";
import { spec } from "../src/tables.js";
import { FIXTURES, readJsonl } from "./shared.js";

const encoding = loadHarmonyEncoding(spec.ENCODING_NAME);

type Case = Record<string, unknown>;

function renderCase(c: Case): number[] {
  const drop = c["auto_drop_analysis"];
  const config = typeof drop === "boolean" ? new RenderConversationConfig(drop) : null;
  const fn = c["function"];
  if (fn === "render") return encoding.render(Message.fromDict(readJson(JSON.stringify(c["message"])) as JsonObject));
  const conversation = Conversation.fromJson(JSON.stringify(c["conversation"]));
  if (fn === "render_conversation_for_completion") {
    return encoding.renderConversationForCompletion(conversation, parseRole(c["next_turn_role"]), config);
  }
  if (fn === "render_conversation_for_training") return encoding.renderConversationForTraining(conversation, config);
  assert.equal(fn, "render_conversation");
  return encoding.renderConversation(conversation, config);
}

const cases = JSON.parse(readFileSync(join(FIXTURES, "reference", "cases.json"), "utf8")) as Case[];
const renderCorpus = readJsonl(join(FIXTURES, "corpus", "render.jsonl"));
const parseCorpus = readJsonl(join(FIXTURES, "corpus", "parse.jsonl"));
const streamCorpus = readJsonl(join(FIXTURES, "corpus", "stream.jsonl"));

test("fixture counts", () => {
  assert.equal(cases.length, 28);
  assert.equal(renderCorpus.length, 300);
  assert.equal(parseCorpus.length, 500);
  assert.equal(streamCorpus.length, 100);
});

test("reference cases: token-exact, and the decoded text", () => {
  for (const c of cases) {
    const tokens = renderCase(c);
    assert.deepEqual(tokens, c["expected_tokens"], `${String(c["reference_file"])} ${String(c["function"])}`);
    assert.equal(encoding.decodeUtf8(tokens), c["expected_text"]);
  }
});

test("reference golden files: each is produced by its case", () => {
  const names = [...new Set(cases.map((c) => c["reference_file"]).filter((n): n is string => typeof n === "string" && n !== ""))].sort();
  assert.ok(names.length > 15);
  for (const name of names) {
    const golden = readFileSync(join(FIXTURES, "reference", name), "utf8").trimEnd();
    const rendered = cases.filter((c) => c["reference_file"] === name).map((c) => encoding.decodeUtf8(renderCase(c)).trimEnd());
    const parts = golden.split(/\s+/);
    if (parts.every((p) => /^[0-9]+$/.test(p))) {
      const ids = parts.map(Number);
      assert.ok(rendered.some((text) => JSON.stringify(encoding.encode(text, { allowedSpecial: "all" })) === JSON.stringify(ids)), name);
    } else {
      assert.ok(rendered.includes(golden), name);
    }
  }
});

test("render corpus: 300 cases token-exact", () => {
  let passed = 0;
  for (const c of renderCorpus) {
    assert.deepEqual(renderCase(c), c["expected_tokens"], String(c["id"]));
    passed++;
  }
  assert.equal(passed, 300);
});

function roleOf(value: unknown): Role | null {
  return value === null || value === undefined ? null : parseRole(value);
}

function dicts(messages: readonly Message[]): unknown {
  return JSON.parse(JSON.stringify(messages.map((m) => m.toDict())));
}

test("parse corpus: 500 completions, messages or the reference's error text", () => {
  let passed = 0;
  for (const c of parseCorpus) {
    let got: unknown;
    try {
      got = dicts(encoding.parseMessagesFromCompletionTokens(c["tokens"] as number[], roleOf(c["role"]), c["strict"] === true));
    } catch (e) {
      if (!(e instanceof HarmonyError)) throw e;
      got = `error: ${e.message}`;
    }
    const expected = "expected_error" in c ? `error: ${String(c["expected_error"])}` : c["expected_messages"];
    assert.deepEqual(got, expected, String(c["id"]));
    passed++;
  }
  assert.equal(passed, 500);
});

const STATE_NAMES: Readonly<Record<StreamState, string>> = {
  [StreamState.ExpectStart]: "EXPECT_START",
  [StreamState.Header]: "HEADER",
  [StreamState.Content]: "CONTENT",
};

function observe(parser: StreamableParser): Record<string, unknown> {
  return {
    state: STATE_NAMES[parser.state],
    current_role: parser.currentRole,
    current_channel: parser.currentChannel,
    current_recipient: parser.currentRecipient,
    current_content_type: parser.currentContentType,
    last_content_delta: parser.lastContentDelta,
    current_content: parser.currentContent,
    messages_so_far: parser.messages.length,
  };
}

test("stream corpus: the parser's state after every token", () => {
  let passed = 0;
  for (const c of streamCorpus) {
    const id = String(c["id"]);
    const parser = new StreamableParser(encoding, roleOf(c["role"]), c["strict"] === true);
    const tokens = c["tokens"] as number[];
    const steps = c["steps"] as unknown[];
    let failedAt: number | null = null;
    for (const [index, token] of tokens.entries()) {
      try {
        parser.process(token);
      } catch (e) {
        if (!(e instanceof HarmonyError)) throw e;
        assert.equal(c["error_at_step"], index, `${id}: unexpected error at step ${index}: ${e.message}`);
        assert.equal(e.message, c["error"], id);
        assert.equal(steps.length, index, id);
        failedAt = index;
        break;
      }
      assert.deepEqual(observe(parser), steps[index], `${id} step ${index}`);
      assert.deepEqual(parser.tokens, tokens.slice(0, index + 1), id);
    }
    if (failedAt === null) {
      assert.ok(!("error" in c), `${id}: the reference raised, the parser did not`);
      assert.equal(steps.length, tokens.length, id);
      let eosError: string | null = null;
      try {
        parser.processEos();
      } catch (e) {
        if (!(e instanceof HarmonyError)) throw e;
        eosError = e.message;
      }
      if (eosError !== null) assert.equal(eosError, c["eos_error"], id);
      else {
        assert.ok(!("eos_error" in c), `${id}: the reference raised at end of stream, the parser did not`);
        assert.deepEqual(dicts(parser.messages), c["final_messages"], id);
      }
    }
    passed++;
  }
  assert.equal(passed, 100);
});

test("state data shapes", () => {
  const parser = new StreamableParser(encoding, null);
  assert.deepEqual(parser.stateData, { state: "ExpectStart" });
  const tokens = encoding.encode(`${spec.SPELLING_START}x${spec.SPELLING_CHANNEL}y${spec.SPELLING_MESSAGE}Hi`, { allowedSpecial: "all" });
  for (const t of tokens.slice(0, 3)) parser.process(t);
  assert.deepEqual(parser.stateData, { state: "Header", header_tokens: tokens.slice(1, 3) });
  assert.ok(isJsonObject({}));
});
