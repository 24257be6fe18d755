/**
 * An interactive LALR parser driven by the tables harmonygen compiles from grammar/harmony.lark.
 *
 * It knows nothing of Harmony itself: `feedToken(terminal, value)`, `feedEof()`, `copy()`, `accepts(terminal)`
 * and `expected()` over `grammar.ACTIONS`. Values are built by a reduce callback `(origin, children) => value`,
 * so callers decide what a rule means and what is kept in memory. Mirrors the Python package's `lalr.py`.
 */

import { HarmonyError } from "./errors.js";
import { fill } from "./texts.js";
import { grammar, spec } from "./tables.js";
import { compareCodePoints } from "./toolNamespace.js";

export type Reducer = (origin: string, children: unknown[]) => unknown;

const END = grammar.END;
const EXPECTED: readonly ReadonlySet<string>[] = grammar.EXPECTED.map((terminals) => new Set(terminals));

/** The input does not follow the grammar: which terminal came, which were expected. */
export class GrammarError extends HarmonyError {
  constructor(
    readonly terminal: string,
    readonly expectedTerminals: ReadonlySet<string>,
  ) {
    const listed = [...expectedTerminals].sort(compareCodePoints).join(", ") || spec.PARSE_ERR_NOTHING;
    super(fill(spec.PARSE_ERR_UNEXPECTED_TERMINAL, { terminal, expected: listed }));
  }
}

/** The table's action on `symbol` in the state on top of `states`. */
function action(states: readonly number[], symbol: string): number | undefined {
  return grammar.ACTIONS[states[states.length - 1] as number]?.[symbol];
}

const ACCEPTED = -1;

/** Reduce on `terminal` as the tables say (`reduced` builds each rule's value; `states` follows) until it would
 * be shifted (its target state), the start rule is complete at the end of input (`ACCEPTED`), or it has no
 * action (undefined). */
function drive(states: number[], terminal: string, reduced: (origin: string, size: number) => void): number | undefined {
  for (;;) {
    const act = action(states, terminal);
    if (act === undefined || act >= 0) return act;
    const [origin, size] = grammar.RULES[~act] as readonly [string, number];
    states.length -= size;
    reduced(origin, size);
    if (terminal === END && origin === grammar.START_RULE && states.length === 1) return ACCEPTED;
    states.push(action(states, origin) as number);
  }
}

/** Feed terminals one at a time; the state stack is the whole parse state. */
export class IncrementalParser {
  private states: number[] = [grammar.START_STATE];
  private values: unknown[] = [];

  constructor(private readonly reduce: Reducer = () => null) {}

  get state(): number {
    return this.states[this.states.length - 1] as number;
  }

  /** The value on the stack at `index` (negative: from the top). */
  valueAt(index: number): unknown {
    return this.values.at(index);
  }

  /** Terminals with an action in the current state (a superset of what `accepts` allows). */
  expected(): ReadonlySet<string> {
    return EXPECTED[this.state] as ReadonlySet<string>;
  }

  /** Whether `terminal` would be shifted (after any reductions) without an error. */
  accepts(terminal: string): boolean {
    const first = action(this.states, terminal);
    if (first === undefined || first >= 0) return first !== undefined; // no action, or a shift: nothing to simulate
    return drive([...this.states], terminal, () => undefined) !== undefined;
  }

  copy(): IncrementalParser {
    return new IncrementalParser(this.reduce).restore(this);
  }

  /** Go back to the state `other` (a copy taken earlier) is in. */
  restore(other: IncrementalParser): this {
    this.states = [...other.states];
    this.values = [...other.values];
    return this;
  }

  /** Reduce a `size`-symbol rule: its children off the value stack, its value on. */
  private readonly reduced = (origin: string, size: number): void => {
    this.values.push(this.reduce(origin, this.values.splice(this.values.length - size, size)));
  };

  /** Shift `terminal`, reducing first as the tables say; throws GrammarError if it cannot. */
  feedToken(terminal: string, value: unknown = null): void {
    const act = drive(this.states, terminal, this.reduced);
    if (act === undefined || act === ACCEPTED) throw new GrammarError(terminal, this.expected());
    this.states.push(act);
    this.values.push(value);
  }

  /** End the input: reduce to `start` and return its value; throws GrammarError if incomplete. */
  feedEof(): unknown {
    if (drive(this.states, END, this.reduced) !== ACCEPTED) throw new GrammarError(END, this.expected());
    this.states.push(grammar.ACCEPT_STATE);
    return this.values[this.values.length - 1];
  }
}
