/**
 * The CLI's flags, declared as data and parsed by commander: sub-commands, `--opt VALUE` / `--opt=VALUE`, flags,
 * repeatable options, `choices`, one positional, `-h`/`--help`, `--version`. Help and usage errors are
 * commander's; the exit codes are the Python CLI's (0 for help and version, 2 for a usage error).
 */

import { Command, CommanderError, Option } from "commander";

export interface OptionSpec {
  readonly flag: string; // "--next-role"
  readonly dest: string;
  readonly metavar?: string; // default: the dest in capitals
  readonly kind: "value" | "flag" | "append"; // append: repeatable, the values in a list
  readonly choices?: readonly string[];
  readonly required?: boolean;
  readonly default?: string;
  readonly help: string;
}

export interface CommandSpec {
  readonly name: string;
  readonly help: string;
  readonly positional: { readonly dest: string; readonly help: string } | null;
  readonly options: readonly OptionSpec[];
}

export interface ProgramSpec {
  readonly prog: string;
  readonly description: string;
  readonly version?: string;
  readonly commands: readonly CommandSpec[];
}

export type Value = string | boolean | null | readonly string[];
export type Parsed = { readonly command: CommandSpec; readonly values: Readonly<Record<string, Value>> };

/** What the parser asks the caller to print before exiting (help, version, a usage error). */
export class ArgExit {
  constructor(
    readonly code: number,
    readonly stdout: string,
    readonly stderr: string,
  ) {}
}

const USAGE_ERROR = 2;
const NEGATED = "--no-";

function option(spec: OptionSpec): Option {
  const metavar = spec.metavar ?? spec.dest.toUpperCase();
  const opt = new Option(spec.kind === "flag" ? spec.flag : `${spec.flag} <${metavar}>`, spec.help);
  if (spec.choices !== undefined) opt.choices(spec.choices);
  if (spec.default !== undefined) opt.default(spec.default);
  if (spec.kind === "append") opt.argParser((value: string, before: string[] | undefined) => [...(before ?? []), value]);
  if (spec.required === true) opt.makeOptionMandatory();
  return opt;
}

/** Parse `argv` (without node and the script); throws `ArgExit` for help, version and usage errors. */
export function parseArgs(program: ProgramSpec, argv: readonly string[]): Parsed {
  let stdout = "";
  let stderr = "";
  let parsed: Parsed | null = null;
  const root = new Command(program.prog).description(program.description).exitOverride();
  root.configureOutput({ writeOut: (t) => void (stdout += t), writeErr: (t) => void (stderr += t) });
  if (program.version !== undefined) root.version(`${program.prog} ${program.version}`, "--version");
  for (const spec of program.commands) {
    const sub = root.command(spec.name).description(spec.help).allowExcessArguments(false);
    if (spec.positional !== null) sub.argument(`<${spec.positional.dest}>`, spec.positional.help);
    for (const o of spec.options) sub.addOption(option(o));
    sub.action((...args: unknown[]) => {
      const given = (spec.positional !== null ? args[1] : args[0]) as Record<string, unknown>;
      const values: Record<string, Value> = {};
      for (const o of spec.options) {
        const value = given[new Option(o.flag).attributeName()];
        // commander reads `--no-x` as x set to false (true by default)
        const flag = o.flag.startsWith(NEGATED) ? value === false : value === true;
        values[o.dest] = o.kind === "flag" ? flag : ((value as Value | undefined) ?? null);
      }
      if (spec.positional !== null) values[spec.positional.dest] = String(args[0]);
      parsed = { command: spec, values };
    });
  }
  try {
    root.parse([process.execPath, program.prog, ...argv], { from: "node" });
  } catch (e) {
    if (!(e instanceof CommanderError)) throw e;
    throw new ArgExit(e.exitCode === 0 ? 0 : USAGE_ERROR, stdout, stderr);
  }
  if (parsed === null) throw new ArgExit(USAGE_ERROR, "", root.helpInformation());
  return parsed;
}
