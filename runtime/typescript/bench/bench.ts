/**
 * The TypeScript side of bench/bench_typescript.py: reads a workload (JSON file: the conversation in the
 * reference's JSON form, the next role, a completion's tokens), times rendering and parsing, and prints
 * one JSON line with the figures and the outputs (so the Python side can check both languages did the
 * same work).
 */

import { readFileSync } from "node:fs";

import { Conversation, loadHarmonyEncoding, parseRole, StreamableParser } from "../src/index.js";
import { spec } from "../src/tables.js";

interface Workload {
  readonly conversation: string;
  readonly next_role: string;
  readonly tokens: number[];
  readonly rounds: number;
  readonly calls: number;
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
process.stdout.write(
  JSON.stringify({
    render_s: median(renderTimes),
    stream_s_per_token: Math.min(...streamTimes),
    batch_s_per_token: Math.min(...batchTimes),
    rendered: render(),
    messages: encoding.parseMessagesFromCompletionTokens(workload.tokens, null).map((m) => m.toDict()),
  }) + "\n",
);
