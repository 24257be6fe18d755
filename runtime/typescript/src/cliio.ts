/**
 * The command line's input files: read strictly, and every problem one line naming the file and the place (the
 * Python package's `cli_input`, same messages).
 *
 * Text must be UTF-8 (an undecodable byte is an error naming its offset, on standard input too); JSON is read
 * within the limits of `jsonInput`; a token-id file is a JSON array of integers. Errors are `InputError`s, which
 * the CLI prints as `harmony-responses: [FLAG ]FILE: PATH: WHAT` and exits 2. `Crash` is for what the Python CLI
 * does not catch either (it exits 1 with a traceback there).
 */

import { readFileSync } from "node:fs";

import { kindOf } from "./bridge/validation.js";
import { type HarmonyEncoding, loadHarmonyEncoding } from "./encoding.js";
import { rethrow } from "./errors.js";
import { floatRepr, JsonFloat, type JsonData } from "./json.js";
import { JSONInputError, loadJson } from "./jsonInput.js";
import { spec } from "./tables.js";
import { firstUtf8Problem } from "./utf8.js";

export const STDIN = "-";

/** Where the CLI writes (standard output or error, or a test's buffer). */
export type Out = (text: string) => void;

/** What the CLI says when reading a file fails, by Node's error code (the C library's words, as Python prints them). */
export const STRERROR: Readonly<Record<string, string>> = {
  ENOENT: "No such file or directory",
  EISDIR: "Is a directory",
  EACCES: "Permission denied",
  ENOTDIR: "Not a directory",
  ELOOP: "Too many levels of symbolic links",
  ENAMETOOLONG: "File name too long",
};

/** A problem the CLI reports in one line, with its exit status (2: bad input; 1: the environment). */
export class CommandError extends Error {
  override readonly name: string = "CommandError";
  constructor(
    message: string,
    readonly status = 2,
  ) {
    super(message);
  }
}

/** The Harmony encoding: its vocabulary comes with the package, so (unlike Python's) loading it cannot fail. */
export function loadEncoding(): HarmonyEncoding {
  return loadHarmonyEncoding(spec.ENCODING_NAME);
}

/** `--completion out.txt`, `<stdin>`: how errors name an input. */
export function displayName(file: string, flag: string | null = null): string {
  const name = file === STDIN ? "<stdin>" : file;
  return flag ? `${flag} ${name}` : name;
}

/** Bad user input: the file (and the flag that named it), the JSON path and what was expected. */
export class InputError extends CommandError {
  override readonly name = "InputError";
  constructor(file: string, path: string, expected: string, flag: string | null = null) {
    super(`${displayName(file, flag)}: ${path}: ${expected}`);
  }
}

/** A crash the Python CLI does not catch either (it exits 1 with a traceback there). */
export class Crash extends Error {
  override readonly name = "Crash";
}

/** The file's (or standard input's) text, decoded as strict UTF-8. */
export function readText(file: string, flag: string | null = null): string {
  const unreadable = ({ code = "" }: NodeJS.ErrnoException): Error =>
    new InputError(file, "$", `cannot read file (${STRERROR[code] ?? code})`, flag);
  const data = rethrow(Error, () => readFileSync(file === STDIN ? 0 : file), unreadable);
  const problem = firstUtf8Problem(data);
  if (problem !== null) {
    const line = data.subarray(0, problem.start).filter((b) => b === 0x0a).length + 1;
    throw new InputError(file, "$", `not UTF-8: invalid byte at offset ${problem.start} (line ${line})`, flag);
  }
  return data.toString("utf8");
}

/** The file's JSON value, within `jsonInput`'s limits. */
export function readJsonFile(file: string, flag: string | null = null): JsonData {
  return rethrow(JSONInputError, () => loadJson(readText(file, flag), "$"), (e) => new InputError(file, e.path, e.reason, flag));
}

/** A JSON value's kind (`an integer`, `null`), a number with a fraction shown with it. */
function kind(value: unknown): string {
  const fraction = value instanceof JsonFloat || (typeof value === "number" && !Number.isInteger(value));
  return fraction ? `${floatRepr(Number(value))} (a number with a fraction)` : kindOf(value);
}

/** A JSON array of integers (`true` and `1.5` are not ids); whether each is in the vocabulary is the caller's. */
export function readTokenIds(file: string, flag: string | null = null): number[] {
  const data = readJsonFile(file, flag);
  if (!Array.isArray(data)) throw new InputError(file, "$", `expected a JSON list of token ids, found ${kind(data)}`, flag);
  const bad = data.findIndex((token) => typeof token !== "bigint" && !Number.isInteger(token));
  if (bad >= 0) throw new InputError(file, `$[${bad}]`, `expected a JSON list of token ids (integers), found ${kind(data[bad])}`, flag);
  return data as number[];
}
