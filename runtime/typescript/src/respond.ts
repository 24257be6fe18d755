/**
 * `harmony-responses respond`: an Open Responses request and a Harmony completion → the response.
 *
 * Prints the `ResponseResource` JSON, the SSE stream (`--stream`), or the Chat Completions form (`--chat`, with
 * `--stream`: its chunks as SSE `data:` lines). A request the model cannot take prints its 400 error body on
 * standard error and exits 2. Mirrors the Python package's `respond.py`, output byte for byte.
 */

import type { CreateResponseBody } from "#types";

import type { CommandSpec, Value } from "./argparse.js";
import { type BuilderOptions, countingIds, randomId, streamResponse, buildResponse, type Completion } from "./bridge/items.js";
import { chatCompletionChunks, toChatCompletion } from "./bridge/chat.js";
import { parseRequest, RequestError, requestToConversation } from "./bridge/request.js";
import { dumpAs } from "./bridge/schema.js";
import { DONE, OPENAI_REASONING_EVENTS, type ReasoningNames, toSse } from "./bridge/sse.js";
import { Crash, OsError, readTextOrOsError } from "./cliio.js";
import { type HarmonyEncoding, HarmonyEncodingName, loadHarmonyEncoding } from "./encoding.js";
import { HarmonyError } from "./errors.js";
import { isJsonObject, type JsonData, JsonSyntaxError, keysOf, readJson, writeJson } from "./json.js";
import { Role, spec } from "./tables.js";

const PROG = "harmony-responses respond";

function namesPattern(names: readonly string[]): string {
  const first = names[0] ?? "";
  return first.slice(0, first.lastIndexOf(".")) + ".*";
}

/** The `respond` subcommand's flags (the Python CLI's `add_respond_parser`). */
export function respondCommand(): CommandSpec {
  const ours = namesPattern(Object.keys(OPENAI_REASONING_EVENTS));
  const openai = namesPattern(Object.values(OPENAI_REASONING_EVENTS));
  return {
    name: "respond",
    help: "turn an Open Responses request and a Harmony completion into the response",
    positional: null,
    options: [
      { flag: "--request", dest: "request", kind: "value", required: true, help: "request JSON file (CreateResponseBody)" },
      {
        flag: "--completion",
        dest: "completion",
        kind: "value",
        required: true,
        help: `the model's completion after ${spec.SPELLING_START}${Role.Assistant}, or -`,
      },
      { flag: "--tokens", dest: "tokens", kind: "flag", help: "the completion file holds a JSON list of token ids" },
      { flag: "--stream", dest: "stream", kind: "flag", help: "print the SSE event stream" },
      { flag: "--chat", dest: "chat", kind: "flag", help: "print the Chat Completions form instead" },
      {
        flag: "--reasoning-events",
        dest: "reasoning_events",
        kind: "value",
        choices: ["spec", "openai"],
        default: "spec",
        help: `raw reasoning event names: ${ours} (spec) or ${openai} (openai)`,
      },
      { flag: "--fixed-ids", dest: "fixed_ids", kind: "flag", help: "counting ids and created_at 0, for reproducible output" },
    ],
  };
}

/** The pieces Python's `feed_all` iterates over in what `json.loads` gave for `--tokens` (a list, as it should be;
 * the other shapes are fed as Python iterates them, until issue 9's check of the file lands on both sides). */
function completionOf(data: JsonData): Completion {
  if (typeof data === "string") return [...data];
  if (isJsonObject(data)) return keysOf(data);
  if (!Array.isArray(data)) throw new Crash(`'${typeof data}' object is not iterable`);
  return data.map((piece) => {
    if (typeof piece === "string") return piece;
    if (typeof piece === "boolean") return piece ? 1 : 0;
    if ((typeof piece === "number" && Number.isInteger(piece)) || typeof piece === "bigint") return piece as number;
    throw new Crash(`a completion token of type ${typeof piece}`);
  }) as Completion;
}

/** Run `respond`; returns the exit code. */
export function respond(values: Readonly<Record<string, Value>>, out: (text: string) => void, err: (text: string) => void): number {
  let body: CreateResponseBody;
  let completion: Completion;
  let inputTokens: number;
  let enc: HarmonyEncoding;
  try {
    const raw = readJson(readTextOrOsError(String(values["request"])));
    body = parseRequest(raw);
    enc = loadHarmonyEncoding(HarmonyEncodingName.HarmonyGptOss);
    inputTokens = enc.renderConversationForCompletion(requestToConversation(body), Role.Assistant).length;
    const text = readTextOrOsError(String(values["completion"]));
    completion = values["tokens"] === true ? completionOf(readJson(text)) : [text];
  } catch (e) {
    if (e instanceof RequestError) {
      err(writeJson(e.toBody(), { ensureAscii: false }) + "\n");
      return 2;
    }
    if (e instanceof OsError || e instanceof JsonSyntaxError || e instanceof HarmonyError) {
      err(`${PROG}: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const fixed = values["fixed_ids"] === true;
  const options: BuilderOptions = fixed ? { inputTokens, ids: countingIds(), createdAt: 0, clock: () => 0 } : { inputTokens, ids: randomId };
  if (values["stream"] === true) {
    const events = streamResponse(completion, enc, body, options);
    if (values["chat"] === true) {
      for (const chunk of chatCompletionChunks(events)) out(`data: ${writeJson(chunk, { ensureAscii: false })}\n\n`);
      out(`data: ${DONE}\n\n`);
    } else {
      for (const frame of toSse(events, values["reasoning_events"] as ReasoningNames)) out(frame);
    }
    return 0;
  }
  const response = buildResponse(completion, enc, body, options);
  const data = values["chat"] === true ? toChatCompletion(response) : dumpAs("ResponseResource", response);
  out(writeJson(data, { ensureAscii: false, indent: 2 }) + "\n");
  return 0;
}
