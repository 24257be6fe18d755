/**
 * `harmony-responses`: render conversations and tool namespaces from the command line, with the Python CLI's
 * flags, output, one-line errors and exit codes (0 done, 2 bad input, 1 a crash).
 */

import { readFileSync } from "node:fs";

import { ArgExit, type CommandSpec, parseArgs, type ProgramSpec } from "./argparse.js";
import { loadHarmonyEncoding } from "./encoding.js";
import { HarmonyError } from "./errors.js";
import { floatRepr, isJsonObject, JsonFloat, type JsonData, type JsonObject, JsonSyntaxError, keysOf, readJson, writeJson } from "./json.js";
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
import { pyRepr } from "./pyformat.js";
import { Role, ROLE_VALUES, spec } from "./tables.js";
import { compareCodePoints, renderToolNamespace } from "./toolNamespace.js";

const PROG = "harmony-responses";
const STDIN = "-";

/** What the CLI says when reading a file fails, by Node's error code (the C library's words, as Python prints them). */
const STRERROR: Readonly<Record<string, string>> = {
  ENOENT: "No such file or directory",
  EISDIR: "Is a directory",
  EACCES: "Permission denied",
  ENOTDIR: "Not a directory",
  ELOOP: "Too many levels of symbolic links",
  ENAMETOOLONG: "File name too long",
};

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
    // Stage B of the TypeScript port: listed so usage and help read as the Python CLI's; running them says so.
    {
      name: "parse",
      help: "parse a completion (text, or token ids) into messages as JSON Lines",
      positional: { dest: "file", help: "completion file, or - for standard input" },
      options: [],
    },
    {
      name: "respond",
      help: "turn an Open Responses request and a Harmony completion into the response",
      positional: { dest: "file", help: "" },
      options: [],
    },
    // The server is Python's only (harmony_responses.server): listed so usage reads the same.
    {
      name: "serve",
      help: "serve Open Responses and Chat Completions in front of an inference engine",
      positional: { dest: "file", help: "" },
      options: [],
    },
  ];
  return { prog: PROG, description: "Harmony format tools.", commands };
}

/** Bad user input: the file, the JSON path and what was expected. */
export class InputError extends Error {
  override readonly name = "InputError";
  constructor(file: string, path: string, expected: string) {
    super(`${file}: ${path}: ${expected}`);
  }
}

/** A crash the Python CLI does not catch either (it exits 1 with a traceback there). */
class Crash extends Error {
  override readonly name = "Crash";
}

function readText(file: string): string {
  let data: Buffer;
  try {
    data = file === STDIN ? readFileSync(0) : readFileSync(file);
  } catch (e) {
    const code = (e as { code?: string }).code ?? "";
    throw new InputError(file, "$", `cannot read file (${STRERROR[code] ?? code})`);
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(data);
  } catch {
    throw new Crash(`${file}: not UTF-8 text`);
  }
  return text.replace(/\r\n?/g, "\n"); // Python reads text files with universal newlines
}

function readJsonFile(file: string): JsonData {
  const text = readText(file);
  try {
    return readJson(text);
  } catch (e) {
    if (e instanceof JsonSyntaxError) throw new InputError(file, "$", `expected JSON, line ${e.line} column ${e.column}: ${e.msg}`);
    throw e;
  }
}

/** A JSON value as Python's `repr` writes the object `json.loads` made of it. */
export function pyReprJson(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    if (Number.isNaN(value)) return "nan";
    if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
    return floatRepr(value);
  }
  if (value instanceof JsonFloat) return Number.isFinite(value.value) ? floatRepr(value.value) : value.value > 0 ? "inf" : "-inf";
  if (typeof value === "string") return pyRepr(value);
  if (Array.isArray(value)) return "[" + value.map(pyReprJson).join(", ") + "]";
  if (isJsonObject(value)) return "{" + keysOf(value).map((k) => `${pyRepr(k)}: ${pyReprJson(value[k])}`).join(", ") + "}";
  return String(value);
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
      throw new InputError(file, `${where}.role`, `expected one of [${roles.map((r) => pyRepr(r)).join(", ")}], found ${pyReprJson(role)}`);
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
    for (const key of ["name", "channel", "recipient", "content_type"]) {
      const value = raw[key];
      if (value !== null && value !== undefined && typeof value !== "string") {
        throw new InputError(file, `${where}.${key}`, "expected a string or null");
      }
    }
    const str = (key: string): string | null => {
      const value = raw[key];
      return typeof value === "string" ? value : null;
    };
    const msg = Message.fromRoleAndContents(parseRole(role), items);
    msg.author.name = str("name");
    msg.channel = str("channel");
    msg.recipient = str("recipient");
    msg.contentType = str("content_type");
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

function render(values: Readonly<Record<string, string | boolean | null>>, out: (text: string) => void): number {
  const file = String(values["file"]);
  const conversation = loadConversation(file);
  const encoding = loadHarmonyEncoding(spec.ENCODING_NAME);
  const config = new RenderConversationConfig(values["no_drop_analysis"] !== true);
  const nextRole = values["next_role"];
  let tokens: number[];
  if (values["training"] === true) tokens = encoding.renderConversationForTraining(conversation, config);
  else if (typeof nextRole === "string" && nextRole !== "") tokens = encoding.renderConversationForCompletion(conversation, parseRole(nextRole), config);
  else tokens = encoding.renderConversation(conversation, config);
  out(values["tokens"] === true ? writeJson(tokens) + "\n" : encoding.decodeUtf8(tokens) + "\n");
  return 0;
}

function tools(values: Readonly<Record<string, string | boolean | null>>, out: (text: string) => void): number {
  const [name, description, list] = loadTools(String(values["file"]));
  const ns = truthy(values["namespace"]) ? values["namespace"] : truthy(name) ? name : spec.HEADER_FUNCTION_NAMESPACE;
  const desc = truthy(values["description"]) ? values["description"] : description;
  if (typeof ns !== "string") throw new Crash(`namespace name ${pyReprJson(ns)} is not a string`);
  if (desc !== null && typeof desc !== "string") throw new Crash(`namespace description ${pyReprJson(desc)} is not a string`);
  try {
    out(renderToolNamespace(ns, list, desc) + "\n");
  } catch (e) {
    if (e instanceof TypeError) throw new Crash(e.message);
    throw e;
  }
  return 0;
}

/** Run the CLI; returns the exit code. Output goes through `out` and `err` (stdout and stderr by default). */
export function main(
  argv: readonly string[],
  out: (text: string) => void = (t) => process.stdout.write(t),
  err: (text: string) => void = (t) => process.stderr.write(t),
): number {
  let file = "";
  try {
    const { command, values } = parseArgs(program(), argv);
    file = String(values["file"]);
    if (command.name === "render") return render(values, out);
    if (command.name === "tools") return tools(values, out);
    err(`${PROG}: ${command.name}: not in the TypeScript CLI yet (stage B of the port); use the Python CLI\n`);
    return 2;
  } catch (e) {
    if (e instanceof ArgExit) {
      out(e.stdout);
      err(e.stderr);
      return e.code;
    }
    if (e instanceof InputError) {
      err(`${PROG}: ${e.message}\n`);
      return 2;
    }
    if (e instanceof HarmonyError) {
      err(`${PROG}: ${file}: ${e.message}\n`);
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
