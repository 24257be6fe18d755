/** Where the tests find the repository and the shared fixtures (`../shared` beside the repository). */

import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

function findRoot(start: string): string {
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "pyproject.toml")) && existsSync(join(dir, "runtime", "typescript"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no repository root above ${start}`);
  }
}

export const ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));
export const SHARED = resolve(process.env["HARMONY_SHARED"] ?? join(ROOT, "..", "shared"));
export const FIXTURES = join(SHARED, "fixtures", "harmony");

/** The lines of a JSON Lines file, parsed. */
export function readJsonl(path: string): Record<string, unknown>[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}
