/**
 * The generated tables this runtime reads, checked against the format version it was written for.
 *
 * Every runtime module takes the facts of the format from here, never from `#generated/*` directly, so a
 * package whose generated modules come from another version of harmonygen fails when it loads, with a
 * message saying what to regenerate, instead of misbehaving later (tree-sitter's ABI check is the model).
 */

import { FORMAT_VERSION } from "#generated/index.js";
import * as grammar from "#generated/grammar.js";
import * as spec from "#generated/spec.js";

export const RUNTIME_FORMAT_VERSION = 1;

if (FORMAT_VERSION !== RUNTIME_FORMAT_VERSION) {
  throw new Error(
    `harmony-responses: the generated tables have format version ${FORMAT_VERSION}, this runtime reads ` +
      `version ${RUNTIME_FORMAT_VERSION}; regenerate with \`harmonygen generate\` from the matching generator`,
  );
}

export { FORMAT_VERSION, grammar, spec };
export type { JsonValue } from "#generated/spec.js";
export * from "#generated/enums.js";
export * as responses from "#generated/responses.js";
