/**
 * The TypeScript side of bench/bench_typescript.py: reads a workload (JSON file: the conversation in the
 * reference's JSON form, the next role, a completion's tokens, and the two bridge workloads), times rendering,
 * parsing (the reference-compatible parser and the event parser, one token or one token's text a call) and the
 * bridge (SSE, one token a call), and prints one JSON line with the figures and the outputs (so the Python side
 * can check both languages did the same work).
 */

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

import { countingIds, SSEStreamer } from "../src/bridge/index.js";
import { Conversation, HarmonyStreamParser, loadHarmonyEncoding, parseRole, StreamableParser } from "../src/index.js";
import { spec } from "../src/tables.js";

interface BridgeWorkload {
  readonly name: string;
  readonly tokens: number[];
  readonly chunks: string[]; // each token's text
  readonly role: string | null;
  readonly stop_at_turn_end: boolean;
}

interface Workload {
  readonly conversation: string;
  readonly next_role: string;
  readonly tokens: number[];
  readonly rounds: number;
  readonly calls: number;
  readonly bridge: BridgeWorkload[];
}

function perCall(fn: () => unknown, calls: number): number {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) fn();
  return Number(process.hrtime.bigint() - start) / 1e9 / calls;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

const workload = JSON.parse(readFileSync(process.argv[2] ?? "", "utf8")) as Workload;
const encoding = loadHarmonyEncoding(spec.ENCODING_NAME);
const conversation = Conversation.fromJson(workload.conversation);
const role = parseRole(workload.next_role);
const render = (): number[] => encoding.renderConversationForCompletion(conversation, role);
const stream = (): number => {
  const parser = new StreamableParser(encoding, null);
  for (const token of workload.tokens) parser.process(token);
  parser.processEos();
  return parser.messages.length;
};
const batch = (): number => encoding.parseMessagesFromCompletionTokens(workload.tokens, null).length;

perCall(render, workload.calls); // warm-up
const renderTimes: number[] = [];
for (let i = 0; i < workload.rounds; i++) renderTimes.push(perCall(render, workload.calls));
stream();
const streamTimes: number[] = [];
const batchTimes: number[] = [];
for (let i = 0; i < 5; i++) {
  streamTimes.push(perCall(stream, 1) / workload.tokens.length);
  batchTimes.push(perCall(batch, 1) / workload.tokens.length);
}
function best(fn: () => unknown, repeat = 5): number {
  fn(); // warm-up
  const times: number[] = [];
  for (let i = 0; i < repeat; i++) times.push(perCall(fn, 1));
  return Math.min(...times);
}

const bridge = workload.bridge.map((w) => {
  const role = w.role === null ? null : parseRole(w.role);
  const events = (byText: boolean): number => {
    const parser = new HarmonyStreamParser(encoding, role, "lenient");
    let n = 0;
    if (byText) for (const chunk of w.chunks) n += parser.feedText(chunk).length;
    else for (const token of w.tokens) n += parser.feedTokens([token]).length;
    return n + parser.close().length;
  };
  const sse = (fixed: boolean): string[] => {
    const options = { role, stopAtTurnEnd: w.stop_at_turn_end, ...(fixed ? { ids: countingIds(), createdAt: 0, clock: () => 0 } : {}) };
    const streamer = new SSEStreamer(encoding, null, options);
    const out = [streamer.start()];
    for (const token of w.tokens) out.push(streamer.feed(token));
    out.push(streamer.finish());
    return out;
  };
  const n = w.tokens.length;
  return {
    name: w.name,
    events_by_tokens: events(false),
    events_by_text: events(true),
    sse_sha256: createHash("sha256").update(sse(true).join("")).digest("hex"),
    feed_tokens_s_per_token: best(() => events(false)) / n,
    feed_text_s_per_token: best(() => events(true)) / n,
    sse_s_per_token: best(() => sse(false)) / n,
  };
});

process.stdout.write(
  JSON.stringify({
    render_s: median(renderTimes),
    stream_s_per_token: Math.min(...streamTimes),
    batch_s_per_token: Math.min(...batchTimes),
    bridge,
    rendered: render(),
    messages: encoding.parseMessagesFromCompletionTokens(workload.tokens, null).map((m) => m.toDict()),
  }) + "\n",
);
