/** The grammar corpus (tests/corpus/*.txt), read as tests/corpus_tool.py reads it. */

import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { ROOT } from "./shared.js";

const RULER = "=".repeat(80);
export const ERROR = "ERROR: ";
export const CORPUS = join(ROOT, "tests", "corpus");

export interface CorpusCase {
  readonly file: string;
  readonly name: string;
  readonly options: Readonly<Record<string, string>>;
  readonly input: string;
  readonly expected: readonly string[]; // JSON lines of messages, or one "ERROR: ..." line
}

export function parseArgs(c: CorpusCase): { role: string | null; mode: "strict" | "lenient"; tools: string[] | null } {
  const role = c.options["role"] ?? "assistant";
  const tools = c.options["tools"] ?? "";
  const mode = c.options["mode"] ?? "strict";
  if (mode !== "strict" && mode !== "lenient") throw new Error(`${c.file}: ${c.name}: mode ${mode}`);
  return { role: role === "none" ? null : role, mode, tools: tools ? tools.split(",") : null };
}

export function expectsError(c: CorpusCase): boolean {
  return c.expected.length > 0 && (c.expected[0] ?? "").startsWith(ERROR);
}

export function loadCorpus(file: string): CorpusCase[] {
  const blocks = readFileSync(join(CORPUS, file), "utf8").split(RULER + "\n");
  if ((blocks[0] ?? "").trim()) throw new Error(`${file}: text before the first case`);
  const cases: CorpusCase[] = [];
  for (let i = 1; i + 1 < blocks.length; i += 2) {
    const lines = (blocks[i] ?? "").trim().split("\n");
    const options: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const eq = line.indexOf("=");
      options[line.slice(1, eq)] = line.slice(eq + 1);
    }
    const body = blocks[i + 1] ?? "";
    const sep = body.indexOf("\n---\n");
    if (sep < 0) throw new Error(`${file}: case ${lines[0] ?? ""} has no --- line`);
    const expected = body
      .slice(sep + 5)
      .trim()
      .split("\n")
      .filter((x) => x !== "");
    cases.push({ file, name: lines[0] ?? "", options, input: body.slice(0, sep), expected });
  }
  return cases;
}

export function loadAll(): CorpusCase[] {
  return readdirSync(CORPUS)
    .filter((f) => f.endsWith(".txt"))
    .sort()
    .flatMap(loadCorpus);
}
