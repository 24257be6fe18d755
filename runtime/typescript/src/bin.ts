#!/usr/bin/env node
/**
 * The package's `bin`: turns on source maps first, so a stack trace names the file a developer edits
 * (runtime/typescript/src/…), then runs the CLI.
 */

process.setSourceMapsEnabled(true);
// `| head -1`: the reader has what it wanted; exit quietly with the status a shell shows for SIGPIPE, as Python's CLI does.
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code !== "EPIPE") throw e;
  process.exit(128 + 13);
});
const { main } = await import("./cli.js");
process.exitCode = main(process.argv.slice(2));
