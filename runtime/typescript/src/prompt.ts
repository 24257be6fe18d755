/**
 * `harmony-responses prompt`: the Harmony prompt an Open Responses request renders to.
 *
 * Prints what the model gets for a request: the conversation `requestToConversation` builds, rendered by
 * `renderConversationForCompletion` up to the `<|start|>assistant` the completion follows (the same rendering
 * `respond` uses), as text or, with `--tokens`, as a JSON list of token ids. A request the model cannot take prints
 * its 400 error body on standard error and exits 2. Fields that do not change the prompt (sampling, a token
 * budget, `store`, `background`, log probabilities) are accepted (`PROMPT_CAPABILITIES`); `truncation: "auto"` would
 * change it and is refused. Mirrors the Python package's `prompt.py`, output byte for byte.
 */

import type { CreateResponseBody } from "#types";

import type { Command } from "commander";

import { type Capabilities, parseRequest, RequestError, requestToConversation } from "./bridge/request.js";
import { CommandError, displayName, loadEncoding, type Out, readJsonFile } from "./cliio.js";
import type { HarmonyEncoding } from "./encoding.js";
import { HarmonyError, recover, rethrow } from "./errors.js";
import { writeJson } from "./json.js";
import { Role } from "./tables.js";

/** What `prompt` accepts beyond the prompt's own fields: everything that leaves the prompt as it is. */
export const PROMPT_CAPABILITIES: Capabilities = { store: true, background: true, sampling: true, logprobs: true, maxOutputTokens: true };
/** The flag naming the request file, in `prompt` and `respond`. */
export const REQUEST_FLAG = "--request";

export interface PromptFlags {
  readonly request: string;
  readonly tokens?: boolean;
}

/** The `prompt` subcommand's flags (the Python CLI's `add_prompt_parser`). */
export function promptCommand(root: Command): Command {
  return root
    .command("prompt")
    .description("print the Harmony prompt an Open Responses request renders to")
    .requiredOption(`${REQUEST_FLAG} <REQUEST>`, "request JSON file (CreateResponseBody), or -")
    .option("--tokens", "print token ids (JSON) instead of text");
}

/** A request read and checked, the encoding, and the prompt the request renders to. */
type Plan = { readonly body: CreateResponseBody; readonly encoding: HarmonyEncoding; readonly prompt: number[] };

/** Read a request file, check it under `capabilities` and render its prompt; a bad request prints its 400 error body
 * on `err` and gives null (exit 2), a rendering error names the file. */
export function planRequest(file: string, capabilities: Capabilities, err: Out): Plan | null {
  const raw = readJsonFile(file, REQUEST_FLAG);
  const plan = (): Plan => {
    const body = parseRequest(raw, capabilities);
    const encoding = loadEncoding();
    return { body, encoding, prompt: encoding.renderConversationForCompletion(requestToConversation(body), Role.Assistant) };
  };
  const named = (e: HarmonyError): Error => new CommandError(`${displayName(file, REQUEST_FLAG)}: $: ${e.message}`);
  return recover<Plan | null, RequestError>(RequestError, () => rethrow(HarmonyError, plan, named), (e) => {
    err(writeJson(e.toBody(), { ensureAscii: true }) + "\n");
    return null;
  });
}

export function prompt(flags: PromptFlags, out: Out, err: Out): number {
  const planned = planRequest(flags.request, PROMPT_CAPABILITIES, err);
  if (planned === null) return 2;
  out((flags.tokens === true ? writeJson(planned.prompt) : planned.encoding.decodeUtf8(planned.prompt)) + "\n");
  return 0;
}
