/** The one error type the package throws for format problems, and the step that turns one layer's errors into the next's. */

/** Thrown for rendering, encoding and parsing errors, with the reference's message texts. */
export class HarmonyError extends Error {
  override readonly name = "HarmonyError";
}

type ErrorClass<E> = abstract new (...args: never[]) => E;

/** `run()`; an error of class `type` it throws goes to `handle` instead, whose value is returned (or which throws). */
export function recover<T, E>(type: ErrorClass<E>, run: () => T, handle: (error: E) => T): T {
  try {
    return run();
  } catch (e) {
    if (e instanceof type) return handle(e);
    throw e;
  }
}

/** `run()`; an error of class `type` it throws is thrown as `as(error)` instead (in the words of the caller's layer). */
export function rethrow<T, E>(type: ErrorClass<E>, run: () => T, as: (error: E) => Error): T {
  return recover(type, run, (e) => {
    throw as(e);
  });
}
