/**
 * `harmony-responses`: render conversations and tool namespaces, parse completions, answer Open Responses
 * requests and show their prompts from the command line, with the Python CLI's flags, output, one-line errors and
 * exit codes (0 done, 2 bad input, 1 a crash). Flags, help and usage errors are commander's.
 */

import { readFileSync } from "node:fs";

import { Command, CommanderError, Option } from "commander";

import { CommandError, Crash, displayName, InputError, loadEncoding, type Out, readJsonFile, readText, readTokenIds } from "./cliio.js";
import { HarmonyError, recover, rethrow } from "./errors.js";
import { isJsonObject, type JsonObject, writeJson } from "./json.js";
import {
  Author,
  type Content,
  CONTENT_TYPE_TAGS,
  contentFromDict,
  Conversation,
  Message,
  parseRole,
  RenderConversationConfig,
  ValidationError,
} from "./models.js";
import { prompt, promptCommand, type PromptFlags } from "./prompt.js";
import { respond, respondCommand, type RespondFlags } from "./respond.js";
import { type Event, eventDict, HarmonyStreamParser, MessageEnd, type Mode, Recovered } from "./stream/index.js";
import { Role, ROLE_VALUES, spec } from "./tables.js";
import { fill, quoted } from "./texts.js";
import { compareCodePoints, renderToolNamespace } from "./toolNamespace.js";

const PROG = "harmony-responses";
const PACKAGE_NAME = "@harmony-responses/harmony";
const USAGE_ERROR = 2;
const ROLE_EXPECTED = "expected one of {roles:json}, found {found:json}"; // the Python CLI says the same
const NO_ROLE = "none"; // --role: the completion starts with its own <|start|>
// The server and its demo are Python's only (harmony_responses.server): listed so usage reads the same.
const PYTHON_ONLY: readonly [string, string][] = [
  ["serve", "serve Open Responses and Chat Completions in front of an inference engine"],
  ["demo", "start serve on the demo engine, run a scripted session with the openai SDK, print the transcript"],
];

/** The package's version, read from its package.json (no second copy of the number). */
function packageVersion(): string {
  for (const up of ["../package.json", "../../package.json"]) { // dist/cli.js, build/src/cli.js
    // no readable package.json in this folder gives null: the loop tries the next one up
    const manifest = recover(Error, (): unknown => JSON.parse(readFileSync(new URL(up, import.meta.url), "utf8")), () => null);
    if (isJsonObject(manifest) && manifest["name"] === PACKAGE_NAME && typeof manifest["version"] === "string") return manifest["version"];
  }
  return "unknown (not installed)";
}

interface RenderFlags {
  readonly nextRole?: string;
  readonly training?: boolean;
  readonly dropAnalysis: boolean; // --no-drop-analysis sets it false
  readonly tokens?: boolean;
}

interface ToolsFlags {
  readonly namespace?: string;
  readonly description?: string;
}

interface ParseFlags {
  readonly tokens?: boolean;
  readonly mode: Mode; // commander's choices
  readonly role: string;
  readonly tool?: string[];
  readonly events?: boolean;
}

/** A command on one input file: a format error (strict parsing, rendering) is bad input, named by the file. */
function onFile<F>(command: (file: string, flags: F) => void): (file: string, flags: F) => void {
  return (file, flags) => rethrow(HarmonyError, () => command(file, flags), (e) => new CommandError(`${displayName(file)}: ${e.message}`));
}

/** The command line; `respond` and `prompt` leave their exit code in `run.code` (commander ignores what an action returns). */
function program(out: Out, err: Out, run: { code: number }): Command {
  const exitWith = (code: number): void => {
    run.code = code;
  };
  const root = new Command(PROG)
    .description("Harmony format tools, and an Open Responses server for gpt-oss (serve; demo shows it).")
    .version(`${PROG} ${packageVersion()}`, "--version")
    .exitOverride()
    .configureOutput({ writeOut: out, writeErr: err });
  const fileCommand = (name: string, description: string, file: string): Command =>
    root.command(name).description(description).argument("<file>", `${file}, or - for standard input`);
  fileCommand("render", "render a conversation (reference JSON form) to Harmony text", "conversation JSON file")
    .addOption(new Option("--next-role <NEXT_ROLE>", `append ${spec.SPELLING_START}ROLE for completion`).choices(ROLE_VALUES))
    .option("--training", `end a final answer with ${spec.SPELLING_END_DONE_SAMPLING}`)
    .option("--no-drop-analysis", `keep ${spec.CHANNEL_REASONING} before the ${spec.CHANNEL_ANSWER} answer`)
    .option("--tokens", "print token ids (JSON) instead of text")
    .action(onFile((file, flags: RenderFlags) => render(file, flags, out)));
  fileCommand("tools", "render a tools list as a TypeScript-like namespace", "tools JSON file")
    .option("--namespace <NAMESPACE>", `namespace name (default: the file's, else ${spec.HEADER_FUNCTION_NAMESPACE})`)
    .option("--description <DESCRIPTION>", "namespace description")
    .action(onFile((file, flags: ToolsFlags) => tools(file, flags, out)));
  const modes = "lenient (default, as the bridge and the server read completions): repair and report; strict: fail";
  const start = spec.SPELLING_START;
  const role = `role the completion starts in (the prompt ended with ${start}ROLE); ${NO_ROLE}: it starts with ${start}`;
  fileCommand("parse", "parse a completion (text, or token ids) into messages as JSON Lines", "completion file")
    .option("--tokens", "the file holds a JSON list of token ids")
    .addOption(new Option("--mode <MODE>", modes).choices(["strict", "lenient"]).default("lenient"))
    .addOption(new Option("--role <ROLE>", role).choices([...ROLE_VALUES, NO_ROLE]).default(Role.Assistant))
    .option("--tool <TOOL>", "a declared function name (repeatable; lenient repairs)", (name, seen?: string[]) => [...(seen ?? []), name])
    .option("--events", "print the event stream instead of the messages")
    .action(onFile((file, flags: ParseFlags) => parse(file, flags, out, err)));
  // no file argument: their errors name the files
  respondCommand(root).action((flags: RespondFlags) => exitWith(respond(flags, out, err)));
  promptCommand(root).action((flags: PromptFlags) => exitWith(prompt(flags, out, err)));
  for (const [name, help] of PYTHON_ONLY) {
    root.command(name).description(help).action(() => {
      throw new CommandError(`${name}: the server is the Python package's (harmony_responses.server); run the Python CLI`, USAGE_ERROR);
    });
  }
  return root;
}

/** `obj[key]` when a string, null when absent or null; anything else is bad input at `where.key`. */
function optionalText(file: string, obj: JsonObject, key: string, where: string, expected: string): string | null {
  const value = obj[key] ?? null;
  if (value !== null && typeof value !== "string") throw new InputError(file, `${where}.${key}`, expected);
  return value;
}

function loc(base: string, path: readonly (string | number)[]): string {
  return base + path.map((p) => (typeof p === "number" ? `[${p}]` : `.${p}`)).join("");
}

/** A conversation in the reference's JSON form, with errors that point into the file. */
function loadConversation(file: string): Conversation {
  const data = readJsonFile(file);
  if (!isJsonObject(data) || !Array.isArray(data["messages"])) throw new InputError(file, "$.messages", "expected a list of messages");
  const roles = ROLE_VALUES.map((r) => String(r)).sort(compareCodePoints);
  return new Conversation(data["messages"].map((raw, i): Message => {
    const where = `$.messages[${i}]`;
    if (!isJsonObject(raw)) throw new InputError(file, where, "expected a message object");
    const role = raw["role"];
    if (typeof role !== "string" || !roles.includes(role)) {
      throw new InputError(file, `${where}.role`, fill(ROLE_EXPECTED, { roles, found: role ?? null }));
    }
    let content = raw["content"];
    if (typeof content === "string") content = [{ type: CONTENT_TYPE_TAGS[0] ?? "", text: content }];
    if (!Array.isArray(content)) throw new InputError(file, `${where}.content`, "expected a string or a list of content items");
    const items = content.map((item: unknown, j): Content => {
      const cwhere = `${where}.content[${j}]`;
      const kind = isJsonObject(item) ? item["type"] : undefined;
      if (typeof kind !== "string" || !CONTENT_TYPE_TAGS.includes(kind)) {
        throw new InputError(file, `${cwhere}.type`, `expected ${quoted(CONTENT_TYPE_TAGS)}`);
      }
      return rethrow(ValidationError, () => contentFromDict(item), (e) => new InputError(file, loc(cwhere, e.loc), e.msg));
    });
    const field = (key: string): string | null => optionalText(file, raw, key, where, "expected a string or null");
    return Message.withHeader(new Author(parseRole(role), field("name")), items, field);
  }));
}

/** A list of tools, or `{"name", "description", "tools"}` for a whole namespace. */
function loadTools(file: string): [string | null, string | null, JsonObject[]] {
  const data = readJsonFile(file);
  const text = (obj: JsonObject, key: string, where: string): string | null => optionalText(file, obj, key, where, "expected a string");
  const whole = isJsonObject(data);
  const name = whole ? text(data, "name", "$") : null;
  const description = whole ? text(data, "description", "$") : null;
  const base = whole ? "$.tools" : "$";
  const list = whole ? (data["tools"] ?? null) : data;
  if (!Array.isArray(list)) throw new InputError(file, base, "expected a list of tools");
  list.forEach((tool, i) => {
    const where = `${base}[${i}]`;
    if (!isJsonObject(tool)) throw new InputError(file, where, "expected a tool object");
    const nested = tool["function"];
    const [body, prefix] = isJsonObject(nested) ? [nested, `${where}.function`] : [tool, where];
    if (typeof body["name"] !== "string") throw new InputError(file, `${prefix}.name`, "expected a string");
    text(body, "description", prefix);
    const params = body["parameters"] ?? null;
    if (params !== null && !isJsonObject(params)) throw new InputError(file, `${prefix}.parameters`, "expected a JSON Schema object");
  });
  return [name, description, list as JsonObject[]];
}

function render(file: string, flags: RenderFlags, out: Out): void {
  const conversation = loadConversation(file);
  const encoding = loadEncoding();
  const config = new RenderConversationConfig(flags.dropAnalysis);
  let tokens: number[];
  if (flags.training === true) tokens = encoding.renderConversationForTraining(conversation, config);
  else if (flags.nextRole !== undefined) tokens = encoding.renderConversationForCompletion(conversation, parseRole(flags.nextRole), config);
  else tokens = encoding.renderConversation(conversation, config);
  out((flags.tokens === true ? writeJson(tokens) : encoding.decodeUtf8(tokens)) + "\n");
}

function tools(file: string, flags: ToolsFlags, out: Out): void {
  const [name, description, list] = loadTools(file);
  // an empty flag or name counts as not given, as in the Python CLI
  const ns = flags.namespace || name || spec.HEADER_FUNCTION_NAMESPACE;
  const render = (): string => renderToolNamespace(ns, list, flags.description || description);
  out(rethrow(TypeError, render, (e) => new Crash(e.message)) + "\n");
}

const STOP_SPELLINGS = Object.keys(spec.NAMED_TOKENS).filter((s) => spec.STOP_TOKENS.includes(spec.NAMED_TOKENS[s] ?? -1));

/** One line for standard error: what lenient parsing repaired and set aside, by rule (messages hide it). */
function setAsideNote(file: string, events: readonly Event[]): string | null {
  const recovered = events.filter((e): e is Recovered => e instanceof Recovered);
  if (recovered.length === 0) return null;
  const counts = new Map<string, number>();
  for (const e of recovered) counts.set(e.rule, (counts.get(e.rule) ?? 0) + 1);
  const chars = recovered.reduce((n, e) => n + [...e.text].length, 0);
  const rules = [...counts].sort(([a], [b]) => compareCodePoints(a, b)).map(([rule, n]) => `${rule} x${n}`).join(", ");
  const aside = chars ? `${chars} characters set aside` : "no text set aside";
  return `${displayName(file)}: lenient parse repaired the input (${rules}; ${aside}); --events shows each repair`;
}

/** A completion file's text: the newline a file ends with is not part of the completion. */
function completionText(file: string): string {
  const text = readText(file);
  return text.endsWith("\n") && STOP_SPELLINGS.some((s) => text.slice(0, -1).endsWith(s)) ? text.slice(0, -1) : text;
}

function parse(file: string, flags: ParseFlags, out: Out, err: Out): void {
  const encoding = loadEncoding();
  const role = flags.role === NO_ROLE ? null : parseRole(flags.role);
  const parser = new HarmonyStreamParser(encoding, role, flags.mode, flags.tool ?? null);
  const fed = flags.tokens === true ? parser.feedTokens(readTokenIds(file)) : parser.feedText(completionText(file));
  const events = [...fed, ...parser.close()];
  for (const event of events) {
    if (flags.events === true) out(writeJson(eventDict(event), { ensureAscii: false }) + "\n");
    else if (event instanceof MessageEnd) out(writeJson(event.message.toDict(), { ensureAscii: false }) + "\n");
  }
  const note = flags.events === true ? null : setAsideNote(file, events);
  if (note !== null) err(`${PROG}: ${note}\n`);
}

/** Run the CLI; returns the exit code. Output goes through `out` and `err` (stdout and stderr by default). */
export function main(
  argv: readonly string[],
  out: Out = (t) => process.stdout.write(t),
  err: Out = (t) => process.stderr.write(t),
): number {
  const run = { code: 0 };
  try {
    program(out, err, run).parse(["node", "harmony-responses", ...argv]);  // commander's default form: node, script, args
    return run.code;
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : USAGE_ERROR; // help and version exit 0
    if (e instanceof CommandError || e instanceof HarmonyError) {
      err(`${PROG}: ${e.message}\n`);
      return e instanceof CommandError ? e.status : USAGE_ERROR;
    }
    if (e instanceof Crash) {
      err(`${PROG}: internal error: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}
