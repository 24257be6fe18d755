/**
 * A small command-line parser that behaves like the parts of Python's argparse the Python CLI uses, so the
 * TypeScript CLI's usage lines, help and errors are byte for byte the Python CLI's: sub-commands, `--opt
 * VALUE` / `--opt=VALUE`, unique prefixes of long options, flags, `choices`, one positional, `-h`.
 */

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
  readonly version?: string; // `--version` prints `prog version`, as argparse's action="version"
  readonly commands: readonly CommandSpec[];
}

export type Value = string | boolean | null | readonly string[];
export type Parsed = { readonly command: CommandSpec; readonly values: Readonly<Record<string, Value>> };

/** What the parser asks the caller to print before exiting (argparse's own output). */
export class ArgExit {
  constructor(
    readonly code: number,
    readonly stdout: string,
    readonly stderr: string,
  ) {}
}

const HELP_FLAGS = ["-h", "--help"];
const HELP_TEXT = "show this help message and exit";
const VERSION_FLAG = "--version";
const VERSION_TEXT = "show program's version number and exit";
const MAX_HELP_POSITION = 24;

function width(): number {
  const env = Number.parseInt(process.env["COLUMNS"] ?? "", 10);
  const columns = Number.isFinite(env) && env > 0 ? env : process.stdout.isTTY ? process.stdout.columns : 80;
  return columns - 2;
}

function metavar(opt: OptionSpec): string {
  return opt.choices !== undefined ? `{${opt.choices.join(",")}}` : (opt.metavar ?? opt.dest.toUpperCase());
}

function usageParts(command: CommandSpec | null, program: ProgramSpec): [string[], string[]] {
  if (command === null) {
    const main = program.version !== undefined ? ["[-h]", `[${VERSION_FLAG}]`] : ["[-h]"];
    return [main, [`{${program.commands.map((c) => c.name).join(",")}}`, "..."]];
  }
  const opts = ["[-h]"];
  for (const o of command.options) {
    if (o.kind === "flag") opts.push(`[${o.flag}]`);
    else if (o.required === true) opts.push(o.flag, metavar(o)); // argparse wraps a required option's two words apart
    else opts.push(`[${o.flag} ${metavar(o)}]`);
  }
  return [opts, command.positional !== null ? [command.positional.dest] : []];
}

function usage(prog: string, command: CommandSpec | null, program: ProgramSpec): string {
  const prefix = "usage: ";
  const [opts, pos] = usageParts(command, program);
  const flat = [prog, ...opts, ...pos].join(" ");
  const textWidth = width();
  if (prefix.length + flat.length <= textWidth) return prefix + flat + "\n";
  const getLines = (parts: string[], indent: string, withPrefix: boolean): string[] => {
    const lines: string[] = [];
    let line: string[] = [];
    let lineLen = withPrefix ? prefix.length - 1 : indent.length - 1;
    for (const part of parts) {
      if (lineLen + 1 + part.length > textWidth && line.length > 0) {
        lines.push(indent + line.join(" "));
        line = [];
        lineLen = indent.length - 1;
      }
      line.push(part);
      lineLen += part.length + 1;
    }
    if (line.length > 0) lines.push(indent + line.join(" "));
    if (withPrefix && lines[0] !== undefined) lines[0] = lines[0].slice(indent.length);
    return lines;
  };
  const indent = " ".repeat(prefix.length + prog.length + 1);
  const lines = [...getLines([prog, ...opts], indent, true), ...getLines(pos, indent, false)];
  return prefix + lines.join("\n") + "\n";
}

function wrap(text: string, limit: number): string[] {
  const words = text.split(/\s+/).filter((w) => w !== "");
  const lines: string[] = [];
  let line = "";
  for (const word of words) {
    if (line !== "" && line.length + 1 + word.length > limit) {
      lines.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  if (line !== "") lines.push(line);
  return lines;
}

function helpText(prog: string, command: CommandSpec | null, program: ProgramSpec): string {
  const textWidth = width();
  const rows: [string, string][] = [];
  const sections: [string, [string, string, number][]][] = [];
  if (command === null) {
    const subs: [string, string, number][] = [[`{${program.commands.map((c) => c.name).join(",")}}`, "", 2]];
    for (const c of program.commands) subs.push([c.name, c.help, 4]);
    sections.push(["positional arguments", subs]);
  } else if (command.positional !== null) {
    sections.push(["positional arguments", [[command.positional.dest, command.positional.help, 2]]]);
  }
  const options: [string, string, number][] = [[HELP_FLAGS.join(", "), HELP_TEXT, 2]];
  if (command === null && program.version !== undefined) options.push([VERSION_FLAG, VERSION_TEXT, 2]);
  for (const o of command?.options ?? []) options.push([o.kind === "flag" ? o.flag : `${o.flag} ${metavar(o)}`, o.help, 2]);
  sections.push(["options", options]);
  for (const [, items] of sections) for (const [inv, help] of items) rows.push([inv, help]);
  const longest = Math.max(...sections.flatMap(([, items]) => items.map(([inv, , indent]) => inv.length + indent)));
  const helpPosition = Math.min(longest + 2, MAX_HELP_POSITION);
  const helpWidth = Math.max(textWidth - helpPosition, 11);
  let out = usage(prog, command, program);
  if (command === null) out += "\n" + wrap(program.description, textWidth).join("\n") + "\n";
  for (const [title, items] of sections) {
    out += `\n${title}:\n`;
    for (const [inv, help, indent] of items) {
      const head = " ".repeat(indent) + inv;
      const lines = help === "" ? [] : wrap(help, helpWidth);
      if (lines.length === 0) {
        out += head + "\n";
        continue;
      }
      if (head.length <= helpPosition - 2) out += head.padEnd(helpPosition) + lines[0] + "\n";
      else out += head + "\n" + " ".repeat(helpPosition) + lines[0] + "\n";
      for (const line of lines.slice(1)) out += " ".repeat(helpPosition) + line + "\n";
    }
  }
  return out;
}

function quoteChoices(choices: readonly string[]): string {
  return choices.map((c) => `'${c}'`).join(", ");
}

/** Parse `argv` (without node and the script) like argparse; throws `ArgExit` for help and usage errors. */
export function parseArgs(program: ProgramSpec, argv: readonly string[]): Parsed {
  const mainError = (message: string): never => {
    throw new ArgExit(2, "", usage(program.prog, null, program) + `${program.prog}: error: ${message}\n`);
  };
  let i = 0;
  while (i < argv.length && HELP_FLAGS.includes(argv[i] ?? "") === false && (argv[i] ?? "").startsWith("-") && argv[i] !== "-") {
    if (program.version !== undefined && argv[i] === VERSION_FLAG) throw new ArgExit(0, `${program.prog} ${program.version}\n`, "");
    i++; // argparse sets unknown main options aside and reports them at the end
  }
  const first = argv[i];
  if (first !== undefined && HELP_FLAGS.includes(first)) throw new ArgExit(0, helpText(program.prog, null, program), "");
  const unknownMain = argv.slice(0, i);
  if (first === undefined) mainError("the following arguments are required: command");
  const command = program.commands.find((c) => c.name === first);
  if (command === undefined) {
    mainError(`argument command: invalid choice: '${first ?? ""}' (choose from ${quoteChoices(program.commands.map((c) => c.name))})`);
    throw new Error("unreachable");
  }
  const prog = `${program.prog} ${command.name}`;
  const subError = (message: string): never => {
    throw new ArgExit(2, "", usage(prog, command, program) + `${prog}: error: ${message}\n`);
  };
  const values: Record<string, Value> = {};
  for (const o of command.options) values[o.dest] = o.kind === "flag" ? false : (o.default ?? null);
  const given = new Set<string>();
  const positionals: string[] = [];
  const extras = [...unknownMain];
  const rest = argv.slice(i + 1);
  let onlyPositionals = false;
  for (let j = 0; j < rest.length; j++) {
    const arg = rest[j] ?? "";
    if (onlyPositionals || arg === "-" || !arg.startsWith("-")) {
      positionals.push(arg);
      continue;
    }
    if (arg === "--") {
      onlyPositionals = true;
      continue;
    }
    if (HELP_FLAGS.includes(arg)) throw new ArgExit(0, helpText(prog, command, program), "");
    const eq = arg.indexOf("=");
    const name = eq >= 0 && arg.startsWith("--") ? arg.slice(0, eq) : arg;
    const explicit = eq >= 0 && arg.startsWith("--") ? arg.slice(eq + 1) : null;
    let opt = command.options.find((o) => o.flag === name);
    if (opt === undefined && name.startsWith("--")) {
      const candidates = [...command.options.map((o) => o.flag), "--help"].filter((f) => f.startsWith(name));
      if (candidates.length > 1) subError(`ambiguous option: ${name} could match ${candidates.join(", ")}`);
      if (candidates[0] === "--help") throw new ArgExit(0, helpText(prog, command, program), "");
      opt = command.options.find((o) => o.flag === candidates[0]);
    }
    if (opt === undefined) {
      extras.push(arg);
      continue;
    }
    if (opt.kind === "flag") {
      if (explicit !== null) subError(`argument ${opt.flag}: ignored explicit argument '${explicit}'`);
      values[opt.dest] = true;
      continue;
    }
    let value = explicit;
    if (value === null) {
      const next = rest[j + 1];
      if (next === undefined || (next.startsWith("-") && next !== "-")) subError(`argument ${opt.flag}: expected one argument`);
      value = next ?? "";
      j++;
    }
    if (opt.choices !== undefined && !opt.choices.includes(value)) {
      subError(`argument ${opt.flag}: invalid choice: '${value}' (choose from ${quoteChoices(opt.choices)})`);
    }
    given.add(opt.dest);
    const before = values[opt.dest];
    values[opt.dest] = opt.kind === "append" ? [...(Array.isArray(before) ? before : []), value] : value;
  }
  const missing: string[] = [];
  if (command.positional !== null && positionals.length === 0) missing.push(command.positional.dest);
  for (const o of command.options) if (o.required === true && !given.has(o.dest)) missing.push(o.flag);
  if (missing.length > 0) subError(`the following arguments are required: ${missing.join(", ")}`);
  if (command.positional !== null) values[command.positional.dest] = positionals[0] ?? null;
  extras.push(...positionals.slice(command.positional !== null ? 1 : 0));
  if (extras.length > 0) mainError(`unrecognized arguments: ${extras.join(" ")}`);
  return { command, values };
}
