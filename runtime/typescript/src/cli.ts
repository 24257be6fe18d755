/**
 * `harmony-responses`: render conversations and tool namespaces, parse completions, answer Open Responses
 * requests and show their prompts from the command line, with the Python CLI's flags, output, one-line errors and
 * exit codes (0 done, 2 bad input, 1 a crash).
 */

import { readFileSync } from "node:fs";

import { ArgExit, type CommandSpec, parseArgs, type ProgramSpec, type Value } from "./args.js";
import { CommandError, Crash, displayName, InputError, loadEncoding, readJsonFile, readText, readTokenIds } from "./cliio.js";
import { HarmonyError } from "./errors.js";
import { isJsonObject, type JsonObject, writeJson } from "./json.js";
import {
  type Content,
  CONTENT_TYPE_TAGS,
  contentFromDict,
  Conversation,
  Message,
  parseRole,
  RenderConversationConfig,
  ValidationError,
} from "./models.js";
import { prompt, promptCommand } from "./prompt.js";
import { respond, respondCommand } from "./respond.js";
import { type Event, eventDict, HarmonyStreamParser, MessageEnd, Recovered } from "./stream/index.js";
import { Role, ROLE_VALUES, spec } from "./tables.js";
import { fill } from "./texts.js";
import { compareCodePoints, renderToolNamespace } from "./toolNamespace.js";

const PROG = "harmony-responses";
const PACKAGE_NAME = "@harmony-responses/harmony";
const SERVE = "serve";
const DEMO = "demo";

/** The package's version, read from its package.json (no second copy of the number). */
function packageVersion(): string {
  for (const up of ["../package.json", "../../package.json"]) { // dist/cli.js, build/src/cli.js
    try {
      const manifest: unknown = JSON.parse(readFileSync(new URL(up, import.meta.url), "utf8"));
      if (isJsonObject(manifest) && manifest["name"] === PACKAGE_NAME && typeof manifest["version"] === "string") return manifest["version"];
    } catch {
      // not this folder: try the next one up
    }
  }
  return "unknown (not installed)";
}
const ROLE_EXPECTED = "expected one of {roles:json}, found {found:json}"; // the Python CLI says the same
const NO_ROLE = "none"; // --role: the completion starts with its own <|start|>

function program(): ProgramSpec {
  const roles = ROLE_VALUES.map((r) => String(r));
  const commands: CommandSpec[] = [
    {
      name: "render",
      help: "render a conversation (reference JSON form) to Harmony text",
      positional: { dest: "file", help: "conversation JSON file, or - for standard input" },
      options: [
        { flag: "--next-role", dest: "next_role", kind: "value", choices: roles, help: `append ${spec.SPELLING_START}ROLE for completion` },
        { flag: "--training", dest: "training", kind: "flag", help: `end a final answer with ${spec.SPELLING_END_DONE_SAMPLING}` },
        { flag: "--no-drop-analysis", dest: "no_drop_analysis", kind: "flag", help: `keep ${spec.CHANNEL_REASONING} before the ${spec.CHANNEL_ANSWER} answer` },
        { flag: "--tokens", dest: "tokens", kind: "flag", help: "print token ids (JSON) instead of text" },
      ],
    },
    {
      name: "tools",
      help: "render a tools list as a TypeScript-like namespace",
      positional: { dest: "file", help: "tools JSON file, or - for standard input" },
      options: [
        { flag: "--namespace", dest: "namespace", kind: "value", help: `namespace name (default: the file's, else ${spec.HEADER_FUNCTION_NAMESPACE})` },
        { flag: "--description", dest: "description", kind: "value", help: "namespace description" },
      ],
    },
    {
      name: "parse",
      help: "parse a completion (text, or token ids) into messages as JSON Lines",
      positional: { dest: "file", help: "completion file, or - for standard input" },
      options: [
        { flag: "--tokens", dest: "tokens", kind: "flag", help: "the file holds a JSON list of token ids" },
        {
          flag: "--mode",
          dest: "mode",
          kind: "value",
          choices: ["strict", "lenient"],
          default: "lenient",
          help: "lenient (default, as the bridge and the server read completions): repair and report; strict: fail",
        },
        {
          flag: "--role",
          dest: "role",
          kind: "value",
          choices: [...roles, NO_ROLE],
          default: Role.Assistant,
          help:
            `role the completion starts in (the prompt ended with ${spec.SPELLING_START}ROLE); ` +
            `${NO_ROLE}: it starts with ${spec.SPELLING_START}`,
        },
        { flag: "--tool", dest: "tool_names", metavar: "TOOL", kind: "append", help: "a declared function name (repeatable; lenient repairs)" },
        { flag: "--events", dest: "events", kind: "flag", help: "print the event stream instead of the messages" },
      ],
    },
    respondCommand(),
    promptCommand(),
    // The server and its demo are Python's only (harmony_responses.server): listed so usage reads the same.
    { name: SERVE, help: "serve Open Responses and Chat Completions in front of an inference engine", positional: null, options: [] },
    {
      name: DEMO,
      help: "start serve on the demo engine, run a scripted session with the openai SDK, print the transcript",
      positional: null,
      options: [],
    },
  ];
  return {
    prog: PROG,
    description: "Harmony format tools, and an Open Responses server for gpt-oss (serve; demo shows it).",
    version: packageVersion(),
    commands,
  };
}

function loc(base: string, path: readonly (string | number)[]): string {
  return base + path.map((p) => (typeof p === "number" ? `[${p}]` : `.${p}`)).join("");
}

function quoted(items: readonly string[]): string {
  return items.map((t) => `'${t}'`).join(", ").replace(/, ([^,]*)$/, " or $1");
}

/** A conversation in the reference's JSON form, with errors that point into the file. */
export function loadConversation(file: string): Conversation {
  const data = readJsonFile(file);
  if (!isJsonObject(data) || !Array.isArray(data["messages"])) throw new InputError(file, "$.messages", "expected a list of messages");
  const roles = ROLE_VALUES.map((r) => String(r)).sort(compareCodePoints);
  const messages: Message[] = [];
  data["messages"].forEach((raw, i) => {
    const where = `$.messages[${i}]`;
    if (!isJsonObject(raw)) throw new InputError(file, where, "expected a message object");
    const role = raw["role"];
    if (typeof role !== "string" || !roles.includes(role)) {
      throw new InputError(file, `${where}.role`, fill(ROLE_EXPECTED, { roles, found: role ?? null }));
    }
    let content = raw["content"];
    if (typeof content === "string") content = [{ type: CONTENT_TYPE_TAGS[0] ?? "", text: content }];
    if (!Array.isArray(content)) throw new InputError(file, `${where}.content`, "expected a string or a list of content items");
    const items: Content[] = [];
    content.forEach((item, j) => {
      const cwhere = `${where}.content[${j}]`;
      const kind = isJsonObject(item) ? item["type"] : undefined;
      if (typeof kind !== "string" || !CONTENT_TYPE_TAGS.includes(kind)) {
        throw new InputError(file, `${cwhere}.type`, `expected ${quoted(CONTENT_TYPE_TAGS)}`);
      }
      try {
        items.push(contentFromDict(item));
      } catch (e) {
        if (e instanceof ValidationError) throw new InputError(file, loc(cwhere, e.loc), e.msg);
        throw e;
      }
    });
    const fields: Record<string, string | null> = {};
    for (const key of ["name", "channel", "recipient", "content_type"]) {
      const value = raw[key];
      if (value !== null && value !== undefined && typeof value !== "string") {
        throw new InputError(file, `${where}.${key}`, "expected a string or null");
      }
      fields[key] = typeof value === "string" ? value : null;
    }
    const msg = Message.fromRoleAndContents(parseRole(role), items);
    msg.author.name = fields["name"] ?? null;
    msg.channel = fields["channel"] ?? null;
    msg.recipient = fields["recipient"] ?? null;
    msg.contentType = fields["content_type"] ?? null;
    messages.push(msg);
  });
  return new Conversation(messages);
}

/** A list of tools, or `{"name", "description", "tools"}` for a whole namespace. */
export function loadTools(file: string): [unknown, unknown, JsonObject[]] {
  let data = readJsonFile(file);
  let name: unknown = null;
  let description: unknown = null;
  let base = "$";
  if (isJsonObject(data)) {
    name = data["name"] ?? null;
    description = data["description"] ?? null;
    for (const [key, value] of [["name", name], ["description", description]] as const) {
      if (value !== null && typeof value !== "string") throw new InputError(file, `$.${key}`, "expected a string");
    }
    data = data["tools"] ?? null;
    base = "$.tools";
  }
  if (!Array.isArray(data)) throw new InputError(file, base, "expected a list of tools");
  const tools: JsonObject[] = [];
  data.forEach((tool, i) => {
    const where = `${base}[${i}]`;
    if (!isJsonObject(tool)) throw new InputError(file, where, "expected a tool object");
    const nested = tool["function"];
    const body = isJsonObject(nested) ? nested : tool;
    const prefix = isJsonObject(nested) ? `${where}.function` : where;
    if (typeof body["name"] !== "string") throw new InputError(file, `${prefix}.name`, "expected a string");
    const desc = body["description"];
    if (desc !== null && desc !== undefined && typeof desc !== "string") throw new InputError(file, `${prefix}.description`, "expected a string");
    const params = body["parameters"];
    if (params !== null && params !== undefined && !isJsonObject(params)) {
      throw new InputError(file, `${prefix}.parameters`, "expected a JSON Schema object");
    }
    tools.push(tool);
  });
  return [name, description, tools];
}

function truthy(value: unknown): boolean {
  return !(value === null || value === undefined || value === "" || value === false || value === 0);
}

function render(values: Readonly<Record<string, Value>>, out: (text: string) => void): number {
  const file = String(values["file"]);
  const conversation = loadConversation(file);
  const encoding = loadEncoding();
  const config = new RenderConversationConfig(values["no_drop_analysis"] !== true);
  const nextRole = values["next_role"];
  let tokens: number[];
  if (values["training"] === true) tokens = encoding.renderConversationForTraining(conversation, config);
  else if (typeof nextRole === "string" && nextRole !== "") tokens = encoding.renderConversationForCompletion(conversation, parseRole(nextRole), config);
  else tokens = encoding.renderConversation(conversation, config);
  out(values["tokens"] === true ? writeJson(tokens) + "\n" : encoding.decodeUtf8(tokens) + "\n");
  return 0;
}

function tools(values: Readonly<Record<string, Value>>, out: (text: string) => void): number {
  const [name, description, list] = loadTools(String(values["file"]));
  const ns = truthy(values["namespace"]) ? values["namespace"] : truthy(name) ? name : spec.HEADER_FUNCTION_NAMESPACE;
  const desc = truthy(values["description"]) ? values["description"] : description;
  if (typeof ns !== "string") throw new Crash(fill("namespace name {ns:json} is not a string", { ns }));
  if (desc !== null && typeof desc !== "string") throw new Crash(fill("namespace description {desc:json} is not a string", { desc }));
  try {
    out(renderToolNamespace(ns, list, desc) + "\n");
  } catch (e) {
    if (e instanceof TypeError) throw new Crash(e.message);
    throw e;
  }
  return 0;
}

const STOP_SPELLINGS = Object.entries(spec.NAMED_TOKENS)
  .filter(([, id]) => spec.STOP_TOKENS.includes(id))
  .map(([spelling]) => spelling);

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

function parse(values: Readonly<Record<string, Value>>, out: (text: string) => void, err: (text: string) => void): number {
  const file = String(values["file"]);
  const encoding = loadEncoding();
  const roleName = String(values["role"]);
  const tool = values["tool_names"];
  const mode = values["mode"] === "strict" ? "strict" : "lenient";
  const parser = new HarmonyStreamParser(encoding, roleName === NO_ROLE ? null : parseRole(roleName), mode, Array.isArray(tool) && tool.length > 0 ? tool : null);
  let events: Event[];
  if (values["tokens"] === true) {
    events = parser.feedTokens(readTokenIds(file));
  } else {
    let text = readText(file);
    if (text.endsWith("\n") && STOP_SPELLINGS.some((s) => text.slice(0, -1).endsWith(s))) text = text.slice(0, -1); // the newline a file ends with is not part of the completion
    events = parser.feedText(text);
  }
  events = [...events, ...parser.close()];
  for (const event of events) {
    if (values["events"] === true) out(writeJson(eventDict(event), { ensureAscii: false }) + "\n");
    else if (event instanceof MessageEnd) out(writeJson(event.message.toDict(), { ensureAscii: false }) + "\n");
  }
  const note = values["events"] === true ? null : setAsideNote(file, events);
  if (note !== null) err(`${PROG}: ${note}\n`);
  return 0;
}

/** Run the CLI; returns the exit code. Output goes through `out` and `err` (stdout and stderr by default). */
export function main(
  argv: readonly string[],
  out: (text: string) => void = (t) => process.stdout.write(t),
  err: (text: string) => void = (t) => process.stderr.write(t),
): number {
  let file: string | null = null;
  try {
    const { command, values } = parseArgs(program(), argv);
    if (command.name === "respond") return respond(values, out, err); // no file argument: its errors name the files
    if (command.name === "prompt") return prompt(values, out, err);
    if (command.name === SERVE || command.name === DEMO) {
      err(`${PROG}: ${command.name}: the server is the Python package's (harmony_responses.server); run the Python CLI\n`);
      return 2;
    }
    file = String(values["file"]);
    if (command.name === "render") return render(values, out);
    if (command.name === "tools") return tools(values, out);
    return parse(values, out, err);
  } catch (e) {
    if (e instanceof ArgExit) {
      out(e.stdout);
      err(e.stderr);
      return e.code;
    }
    if (e instanceof CommandError) {
      err(`${PROG}: ${e.message}\n`);
      return e.status;
    }
    if (e instanceof HarmonyError) {
      // the format rejected what the file holds (strict parsing, rendering)
      err(`${PROG}: ${file !== null ? `${displayName(file)}: ` : ""}${e.message}\n`);
      return 2;
    }
    if (e instanceof Crash) {
      err(`${PROG}: internal error: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
}

export { Role };
