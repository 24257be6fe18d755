#!/usr/bin/env node
/**
 * The package's `bin`: turns on source maps first, so a stack trace names the file a developer edits
 * (runtime/typescript/src/…), then runs the CLI.
 */

process.setSourceMapsEnabled(true);
const { main } = await import("./cli.js");
process.exitCode = main(process.argv.slice(2));
