/**
 * The TypeScript side of bench/bench_leak.py: reads `{patterns: {name: unit}, sizes: [chars...], runs}` as JSON on
 * standard input, times `detectLeak` on each unit repeated to each size (best of `runs`), and prints one JSON line:
 * `{name: [seconds per size], ...}` plus each text's leak count (so the Python side can check the work was done).
 */

import { readFileSync } from "node:fs";

import { detectLeak } from "../src/safety.js";

interface Job {
  readonly patterns: Record<string, string>;
  readonly sizes: number[];
  readonly runs: number;
}

const job = JSON.parse(readFileSync(0, "utf8")) as Job;
const out: Record<string, { seconds: number[]; leaks: number[] }> = {};
for (const [name, unit] of Object.entries(job.patterns)) {
  const seconds: number[] = [];
  const leaks: number[] = [];
  for (const size of job.sizes) {
    const text = unit.repeat(Math.floor(size / unit.length));
    let best = Infinity;
    let found = 0;
    for (let i = 0; i < job.runs; i++) {
      const start = process.hrtime.bigint();
      found = detectLeak(text).length;
      best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
    }
    seconds.push(best);
    leaks.push(found);
  }
  out[name] = { seconds, leaks };
}
process.stdout.write(JSON.stringify(out) + "\n");
