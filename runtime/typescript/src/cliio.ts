/**
 * How the CLI reads its input files, with the Python CLI's errors: `InputError` (one line naming the file, the JSON
 * path and what was expected), `OsError` (Python's `OSError` text), and `Crash` for what the Python CLI does not
 * catch either (it exits 1 with a traceback there).
 */

import { readFileSync } from "node:fs";

import { type JsonData, JsonSyntaxError, readJson } from "./json.js";
import { pyRepr } from "./pyformat.js";

export const STDIN = "-";

/** What the CLI says when reading a file fails, by Node's error code (the C library's words, as Python prints them). */
export const STRERROR: Readonly<Record<string, string>> = {
  ENOENT: "No such file or directory",
  EISDIR: "Is a directory",
  EACCES: "Permission denied",
  ENOTDIR: "Not a directory",
  ELOOP: "Too many levels of symbolic links",
  ENAMETOOLONG: "File name too long",
};

/** Python's errno numbers for Node's error codes (Linux). */
const ERRNO: Readonly<Record<string, number>> = { ENOENT: 2, EISDIR: 21, EACCES: 13, ENOTDIR: 20, ELOOP: 40, ENAMETOOLONG: 36 };

/** Bad user input: the file, the JSON path and what was expected. */
export class InputError extends Error {
  override readonly name = "InputError";
  constructor(
    file: string,
    path: string,
    expected: string,
    readonly code = "", // Node's error code, when the file could not be read
  ) {
    super(`${file}: ${path}: ${expected}`);
  }
}

/** A crash the Python CLI does not catch either (it exits 1 with a traceback there). */
export class Crash extends Error {
  override readonly name = "Crash";
}

export function readText(file: string): string {
  let data: Buffer;
  try {
    data = file === STDIN ? readFileSync(0) : readFileSync(file);
  } catch (e) {
    const code = (e as { code?: string }).code ?? "";
    throw new InputError(file, "$", `cannot read file (${STRERROR[code] ?? code})`, code);
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(data);
  } catch {
    throw new Crash(`${file}: not UTF-8 text`);
  }
  return text.replace(/\r\n?/g, "\n"); // Python reads text files with universal newlines
}

export function readJsonFile(file: string): JsonData {
  const text = readText(file);
  try {
    return readJson(text);
  } catch (e) {
    if (e instanceof JsonSyntaxError) throw new InputError(file, "$", `expected JSON, line ${e.line} column ${e.column}: ${e.msg}`);
    throw e;
  }
}

/** A file that cannot be read, worded as Python's `OSError` (`[Errno 2] No such file or directory: 'x'`). */
export class OsError extends Error {
  override readonly name = "OsError";
}

/** A file's text (or standard input's), as Python's `open(path, encoding="utf-8").read()` gives it; throws `OsError`. */
export function readTextOrOsError(file: string): string {
  try {
    return readText(file);
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    const code = e.code;
    throw new OsError(`[Errno ${ERRNO[code] ?? 0}] ${STRERROR[code] ?? code}: ${pyRepr(file)}`);
  }
}
