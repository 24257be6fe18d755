/** The one error type the package throws for format problems. */

/** Thrown for rendering, encoding and parsing errors, with the reference's message texts. */
export class HarmonyError extends Error {
  override readonly name = "HarmonyError";
}
