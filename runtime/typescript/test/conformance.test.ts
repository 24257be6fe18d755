/**
 * The conformance corpus (conformance/ at the repository's root), run by the TypeScript runtime: one test per
 * case, comparing only. conformance/README.md defines the operations and the files; the expected files are
 * written from the Python runtime by `tests/conformance_tool.py bootstrap`, never by this runner, and this
 * runner needs no Python (`make ts-test-no-python` runs the TypeScript tests with none on the path).
 */

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { main } from "../src/cli.js";
import {
  Conversation,
  HarmonyError,
  loadHarmonyEncoding,
  Message,
  parseRole,
  RenderConversationConfig,
  detectLeak,
  escapeControlTokens,
  escapeControlTokensJson,
  renderToolNamespace,
  StreamableParser,
  unescapeControlTokens,
} from "../src/index.js";
import type { StreamingEvent } from "#types";
import { isJsonObject, type JsonObject, readJson } from "../src/json.js";
import { eventDict, type Event, HarmonyStreamParser, type Mode } from "../src/stream/index.js";
import {
  type BuilderOptions,
  buildResponse,
  chatCompletionChunks,
  checkArguments,
  countingIds,
  dumpAs,
  parseRequest,
  type ReasoningNames,
  RequestError,
  requestToConversation,
  responseSnapshot,
  SSEStreamer,
  streamResponse,
  toChatCompletion,
  toolPolicy,
} from "../src/bridge/index.js";
import { ReasoningSeal } from "../src/bridge/encrypted.js";
import { Role, spec } from "../src/tables.js";
import { ROOT } from "./shared.js";

const CORPUS = join(ROOT, "conformance");
const KINDS = ["render", "namespace", "prompt", "request_error", "parse", "stream", "events", "bridge", "arguments", "safety", "cli"];
const INPUT = "input.json";
const encoding = loadHarmonyEncoding(spec.ENCODING_NAME);

type Case = Record<string, unknown>;
type Outputs = Record<string, unknown>;

function role(value: unknown): ReturnType<typeof parseRole> | null {
  return value === null || value === undefined ? null : parseRole(value);
}

function failure(e: unknown): string {
  if (e instanceof HarmonyError) return e.message;
  throw e;
}

function render(c: Case): Outputs {
  const drop = c["auto_drop_analysis"];
  const config = typeof drop === "boolean" ? new RenderConversationConfig(drop) : null;
  let tokens: number[];
  try {
    if (c["function"] === "render") {
      tokens = encoding.render(Message.fromDict(readJson(JSON.stringify(c["message"])) as JsonObject));
    } else {
      const conversation = Conversation.fromJson(JSON.stringify(c["conversation"]));
      if (c["function"] === "render_conversation_for_completion") {
        tokens = encoding.renderConversationForCompletion(conversation, parseRole(c["next_turn_role"]), config);
      } else if (c["function"] === "render_conversation_for_training") {
        tokens = encoding.renderConversationForTraining(conversation, config);
      } else {
        tokens = encoding.renderConversation(conversation, config);
      }
    }
  } catch (e) {
    return { error: failure(e) };
  }
  return { tokens, text: encoding.decode(tokens) };
}

function requestError(e: unknown): Outputs {
  if (!(e instanceof RequestError)) throw e;
  return { status: e.status, type: e.type, code: e.code, param: e.param, message: e.reason };
}

function request(c: Case): Outputs {
  let body;
  try {
    body = parseRequest(readJson(String(c["body"])));
  } catch (e) {
    return { error: requestError(e) };
  }
  const options = { responseId: "resp_x", createdAt: 0, model: "m", status: "completed", output: [] } as const;
  const out: Outputs = { snapshot: dumpAs("ResponseResource", responseSnapshot(body, options)) };
  const key = c["reasoning_key"];
  const reader = typeof key === "string" ? new ReasoningSeal(Buffer.from(key, "hex")).reader() : null;
  try {
    const conversation = requestToConversation(body, null, reader);
    const policy = toolPolicy(body);
    const tokens = encoding.renderConversationForCompletion(conversation, Role.Assistant);
    return { ...out, tokens, text: encoding.decode(tokens), policy: [policy.mode, [...policy.allowed]] };
  } catch (e) {
    return { ...out, error: requestError(e) };
  }
}

function parse(c: Case): Outputs {
  try {
    const messages = encoding.parseMessagesFromCompletionTokens(c["tokens"] as number[], role(c["role"]), c["strict"] === true);
    return { messages: messages.map((m) => m.toDict()) };
  } catch (e) {
    return { error: failure(e) };
  }
}

/** The reference API's `StreamableParser`, fed one token at a time: its observable state after each. */
function stream(c: Case): Outputs {
  const parser = new StreamableParser(encoding, role(c["role"]), c["strict"] === true);
  const steps: unknown[] = [];
  for (const token of c["tokens"] as number[]) {
    try {
      parser.process(token);
    } catch (e) {
      return { steps, error: failure(e) };
    }
    steps.push({
      state: parser.state,
      current_role: parser.currentRole,
      current_channel: parser.currentChannel,
      current_recipient: parser.currentRecipient,
      current_content_type: parser.currentContentType,
      last_content_delta: parser.lastContentDelta,
      current_content: parser.currentContent,
      messages: parser.messages.length,
    });
  }
  try {
    parser.processEos();
  } catch (e) {
    return { steps, eos_error: failure(e) };
  }
  return { steps, messages: parser.messages.map((m) => m.toDict()) };
}

function events(c: Case): Outputs {
  const parser = new HarmonyStreamParser(encoding, role(c["role"]), c["mode"] as Mode, (c["tools"] as string[] | null) ?? null, {
    stopAfterToolCall: c["stop_after_tool_call"] === true,
    stopAtTurnEnd: (c["stop_at_turn_end"] ?? null) as boolean | null,
    maxToolCalls: (c["max_tool_calls"] ?? null) as number | null,
  });
  const seen: Event[] = [];
  try {
    for (const chunk of c["chunks"] as (string | number[])[]) {
      seen.push(...(typeof chunk === "string" ? parser.feedText(chunk) : parser.feedTokens(chunk)));
    }
    seen.push(...parser.close());
  } catch (e) {
    return { events: seen.map(eventDict), error: failure(e) };
  }
  return { events: seen.map(eventDict) };
}

/** The fixed clock and ids of conformance/README.md: counting ids, created_at 0, a clock at 0, 7 input tokens. */
function fixed(c: Case): BuilderOptions {
  const options: BuilderOptions = { ids: countingIds(), createdAt: 0, clock: () => 0, strict: c["strict"] === true, inputTokens: 7 };
  const extra: { role?: ReturnType<typeof role>; tools?: string[] | null } = {};
  if ("role" in c) extra.role = role(c["role"]);
  if ("tools" in c) extra.tools = c["tools"] as string[] | null;
  return { ...options, ...extra };
}

function bridge(c: Case): Outputs {
  const body = c["request"] === null ? null : parseRequest(c["request"]);
  const pieces = c["pieces"] as (string | number)[];
  const stopped = (c["stopped"] ?? null) as boolean | null;
  const names = c["reasoning_names"] as ReasoningNames;
  try {
    const streamer = new SSEStreamer(encoding, body, { ...fixed(c), reasoningNames: names });
    let sse = streamer.start();
    for (const piece of pieces) sse += typeof piece === "string" ? streamer.feedText(piece) : streamer.feed(piece);
    sse += streamer.finish(stopped);
    const response = buildResponse(pieces as Iterable<number>, encoding, body, { ...fixed(c), stopped });
    const stream: Iterable<StreamingEvent> = streamResponse(pieces as Iterable<number>, encoding, body, { ...fixed(c), stopped });
    return {
      sse,
      response: dumpAs("ResponseResource", response),
      chat: toChatCompletion(response),
      chunks: [...chatCompletionChunks(stream, c["include_usage"] === true)],
    };
  } catch (e) {
    return { error: failure(e) };
  }
}

/** The command line in a fresh folder holding the case's files (`{dir}` in argv and in the output), COLUMNS=80. */
function cli(c: Case): Outputs {
  const folder = mkdtempSync(join(tmpdir(), "conformance-"));
  try {
    for (const [name, text] of Object.entries((c["files"] ?? {}) as Record<string, string>)) writeFileSync(join(folder, name), text, "utf8");
    for (const [name, data] of Object.entries((c["binary_files"] ?? {}) as Record<string, string>)) writeFileSync(join(folder, name), Buffer.from(data, "base64"));
    const argv = (c["argv"] as string[]).map((arg) => arg.replaceAll("{dir}", folder));
    let stdout = "";
    let stderr = "";
    process.env["COLUMNS"] = "80";
    const code = main(argv, (t) => (stdout += t), (t) => (stderr += t));
    return flagLibraryWords(argv, { code, stdout: stdout.replaceAll(folder, "{dir}"), stderr: stderr.replaceAll(folder, "{dir}") });
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/** Help and usage errors are worded by each language's flag library: the corpus fixes their code and stream only. */
function flagLibraryWords(argv: string[], out: { code: number; stdout: string; stderr: string }): Outputs {
  if (out.code === 0 && (argv.includes("-h") || argv.includes("--help")) && out.stdout !== "" && out.stderr === "") {
    return { ...out, stdout: "<help text of the flag library>" };
  }
  if (out.code === 2 && out.stdout === "" && /^(usage|error):/i.test(out.stderr)) {
    return { ...out, stderr: "<usage error of the flag library>" };
  }
  return out;
}

/** A UTF-16 offset into `text` as a count of code points (the corpus's unit). */
function codePoints(text: string, index: number): number {
  return [...text.slice(0, index)].length;
}

function safety(c: Case): Outputs {
  const text = String(c["text"]);
  const leaks = detectLeak(text).map((l) => ({ kind: l.kind, start: codePoints(text, l.start), end: codePoints(text, l.end), text: l.text }));
  return { escaped: escapeControlTokens(text), unescaped: unescapeControlTokens(text), json: escapeControlTokensJson(text), leaks };
}

function namespace(c: Case): Outputs {
  const tools = readJson(String(c["tools"]));
  const list = Array.isArray(tools) ? tools.filter(isJsonObject) : [];
  const description = c["description"];
  return { text: renderToolNamespace(String(c["name"]), list, typeof description === "string" ? description : null) };
}

const OPS: Record<string, (c: Case) => Outputs> = {
  render,
  request,
  parse,
  stream,
  events,
  bridge,
  cli,
  safety,
  namespace,
  arguments: (c) => ({ validation: checkArguments(String(c["arguments"]), c["schema"] as JsonObject).toDict() }),
};

/** An `sse` output as the corpus compares it: frame by frame, each `data:` payload as a JSON value, every other
 * line (and the framing) as text. */
function sseFrames(text: string): unknown[] {
  return text.split("\n\n").map((frame) =>
    frame.split("\n").map((line) => {
      if (!line.startsWith("data: {")) return line;
      try {
        return { data: plain(JSON.parse(line.slice("data: ".length))) };
      } catch {
        return line;
      }
    }),
  );
}

/** The JSON document (an object) `text` is, or null. */
function documentOf(text: string): unknown {
  try {
    const value = text.startsWith("{") ? (JSON.parse(text) as unknown) : null;
    return value !== null && typeof value === "object" && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

/** A case's expected outputs, by key: `.txt` byte for byte, `.jsonl` a list of values, `.json` a value. */
function expected(folder: string): Outputs {
  const out: Outputs = {};
  for (const name of readdirSync(folder).sort()) {
    if (name === INPUT) continue;
    const text = readFileSync(join(folder, name), "utf8");
    const dot = name.lastIndexOf(".");
    const key = name.slice(0, dot);
    const suffix = name.slice(dot);
    if (suffix === ".txt") out[key] = text;
    else if (suffix === ".jsonl") out[key] = text.split("\n").filter((line) => line.trim() !== "").map((line) => JSON.parse(line) as unknown);
    else if (suffix === ".json") out[key] = JSON.parse(text) as unknown;
    else throw new Error(`${folder}: ${name} is neither .txt, .json nor .jsonl`);
  }
  return out;
}

/** Outputs as JSON values, read as `JSON.parse` reads the expected file (a big integer as the nearest double). */
function plain(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (_key, v: unknown) => (typeof v === "bigint" ? Number(v) : v))) as unknown;
}

const cases = KINDS.flatMap((kind) =>
  existsSync(join(CORPUS, kind))
    ? readdirSync(join(CORPUS, kind))
        .sort()
        .filter((name) => existsSync(join(CORPUS, kind, name, INPUT)))
        .map((name) => `${kind}/${name}`)
    : [],
);

test("the corpus is there, with every kind", () => {
  assert.ok(cases.length >= 300, `${cases.length} cases`);
  for (const kind of KINDS) assert.ok(cases.some((c) => c.startsWith(`${kind}/`)), kind);
});

for (const id of cases) {
  test(id, () => {
    const folder = join(CORPUS, id);
    const c = JSON.parse(readFileSync(join(folder, INPUT), "utf8")) as Case;
    const op = OPS[String(c["op"])];
    assert.ok(op !== undefined, `unknown op ${String(c["op"])}`);
    const want = expected(folder);
    const got = op(c);
    assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort());
    for (const [key, value] of Object.entries(want)) {
      const isSse = key === "sse" || (key === "stdout" && typeof value === "string" && value.startsWith("event: "));
      if (isSse && typeof value === "string") assert.deepEqual(sseFrames(String(got[key])), sseFrames(value), key);
      else if (key === "stdout" && typeof value === "string" && documentOf(value) !== null) assert.deepEqual(documentOf(String(got[key])), documentOf(value), key);
      else if (typeof value === "string") assert.equal(got[key], value, key);
      else assert.deepEqual(plain(got[key]), value, key);
    }
  });
}
