/**
 * `harmony-responses respond`: an Open Responses request and a Harmony completion → the response.
 *
 * Prints the `ResponseResource` JSON, the SSE stream (`--stream`, or `"stream": true` in the request), or the Chat
 * Completions form (`--chat`, with streaming: its chunks as SSE `data:` lines). A request the model cannot take
 * prints its 400 error body on standard error and exits 2; so does a request field `respond` does not honour
 * (`RESPOND_CAPABILITIES`): the completion is given, not sampled. `max_output_tokens` is honoured by cutting the
 * completion after that many tokens: a turn the cut interrupts ends `incomplete`. Mirrors the Python package's
 * `respond.py`, output byte for byte.
 */

import { type Command, Option } from "commander";

import { chatCompletionChunks, toChatCompletion } from "./bridge/chat.js";
import { buildResponse, type Completion, countingIds, randomId, streamResponse, tokensFromText } from "./bridge/items.js";
import type { Capabilities } from "./bridge/request.js";
import { dumpAs } from "./bridge/schema.js";
import { DONE_FRAME, OPENAI_REASONING_EVENTS, type ReasoningNames, streamSse, type StreamSSEOptions } from "./bridge/sse.js";
import { CommandError, InputError, type Out, readText, readTokenIds, STDIN } from "./cliio.js";
import type { HarmonyEncoding } from "./encoding.js";
import { HarmonyError, rethrow } from "./errors.js";
import { writeJson } from "./json.js";
import { planRequest, type PromptFlags, REQUEST_FLAG } from "./prompt.js";
import { Role, spec } from "./tables.js";

/** What `respond` honours beyond the prompt: a token budget, by cutting the given completion. */
export const RESPOND_CAPABILITIES: Capabilities = { maxOutputTokens: true };
const STOP = spec.CHAT_FINISH_REASONS["stop"] ?? ""; // the engines' finish reasons, as Chat Completions names them
const COMPLETION_FLAG = "--completion";

/** `respond` shares `prompt`'s `--request`, and its `--tokens` reads the completion as token ids. */
export interface RespondFlags extends PromptFlags {
  readonly completion: string;
  readonly stream?: boolean;
  readonly chat?: boolean;
  readonly reasoningEvents: ReasoningNames;
  readonly finish?: string;
  readonly fixedIds?: boolean;
}

/** The `respond` subcommand's flags (the Python CLI's `add_respond_parser`). */
export function respondCommand(root: Command): Command {
  // each naming's event names as one pattern: its first name's prefix and `.*`
  const namings = [Object.keys(OPENAI_REASONING_EVENTS), Object.values(OPENAI_REASONING_EVENTS)];
  const [ours, openai] = namings.map(([first = ""]) => first.slice(0, first.lastIndexOf(".")) + ".*");
  const finish =
    "how the engine ended the completion (its finish reason): on a stop token it may have left out, or at the token budget; " +
    "unknown by default (text is taken as stopped unless it ends inside a header, reasoning or a call's JSON; " +
    "token ids as cut if they end mid-message)";
  return root
    .command("respond")
    .description("turn an Open Responses request and a Harmony completion into the response")
    .requiredOption(`${REQUEST_FLAG} <REQUEST>`, "request JSON file (CreateResponseBody), or -")
    .requiredOption(`${COMPLETION_FLAG} <COMPLETION>`, `the model's completion after ${spec.SPELLING_START}${Role.Assistant}, or -`)
    .option("--tokens", "the completion file holds a JSON list of token ids")
    .option("--stream", "print the SSE event stream (as does stream: true)")
    .option("--chat", "print the Chat Completions form instead")
    .addOption(
      new Option("--reasoning-events <REASONING_EVENTS>", `raw reasoning event names: ${ours} (spec) or ${openai} (openai)`)
        .choices(["spec", "openai"])
        .default("spec"),
    )
    .addOption(new Option("--finish <FINISH>", finish).choices([STOP, spec.CHAT_FINISH_REASONS["incomplete"] ?? ""]))
    .option("--fixed-ids", "counting ids and created_at 0, for reproducible output");
}

/** The completion's token ids from `--tokens` input; an id outside the vocabulary is an error naming it. */
function completionIds(file: string, encoding: HarmonyEncoding): number[] {
  const ids = readTokenIds(file, COMPLETION_FLAG);
  ids.forEach((token, i) => {
    const unknown = (): Error => new InputError(file, `$[${i}]`, `token id ${String(token)} is not in the vocabulary`, COMPLETION_FLAG);
    rethrow(HarmonyError, () => encoding.decodeBytes([token]), unknown);
  });
  return ids;
}

export function respond(flags: RespondFlags, out: Out, err: Out): number {
  if (flags.request === STDIN && flags.completion === STDIN) {
    throw new CommandError(`${REQUEST_FLAG} and ${COMPLETION_FLAG} both read standard input; give one of them a file`);
  }
  const planned = planRequest(flags.request, RESPOND_CAPABILITIES, err);
  if (planned === null) return 2;
  const { body, encoding, prompt } = planned;
  const text = flags.tokens === true ? null : readText(flags.completion, COMPLETION_FLAG);
  const budget = body.max_output_tokens ?? null;
  const all = text === null ? completionIds(flags.completion, encoding) : budget !== null ? [...tokensFromText([text], encoding)] : null;
  const ids = budget !== null ? (all?.slice(0, Number(budget)) ?? null) : all;
  // The budget cut the turn when it dropped tokens the turn still needed: none of those kept is a stop token.
  const ends = new Set(encoding.stopTokensForAssistantActions());
  const cut = ids !== null && all !== null && ids.length < all.length && !ids.some((t) => ends.has(t));
  const completion: Completion = ids ?? [text ?? ""];
  // A budget that cut the turn overrides the finish reason given (the turn ends `incomplete`, even between two
  // messages); without either, the builder decides.
  const stopped = cut ? false : flags.finish !== undefined ? flags.finish === STOP : null;
  const fixed = flags.fixedIds === true ? { ids: countingIds(), createdAt: 0, clock: () => 0 } : { ids: randomId };
  const options: StreamSSEOptions = { ...fixed, inputTokens: prompt.length, stopped, reasoningNames: flags.reasoningEvents };
  const streaming = flags.stream === true || body.stream === true;
  if (streaming && flags.chat !== true) {
    // SSE text, deltas written straight from their text (the same bytes as `toSse`)
    for (const piece of streamSse(completion, encoding, body, options)) out(piece);
  } else if (streaming) {
    const chunks = chatCompletionChunks(streamResponse(completion, encoding, body, options));
    for (const chunk of chunks) out(`data: ${writeJson(chunk, { ensureAscii: false })}\n\n`);
    out(DONE_FRAME);
  } else {
    const response = buildResponse(completion, encoding, body, options);
    const data = flags.chat === true ? toChatCompletion(response) : dumpAs("ResponseResource", response);
    out(writeJson(data, { ensureAscii: false, indent: 2 }) + "\n");
  }
  return 0;
}
