/** What the event parser reports: messages as they start, grow and end, repairs, and strict-mode errors. */

import { HarmonyError } from "../errors.js";
import type { JsonObject } from "../json.js";
import { Author, Message, TextContent } from "../models.js";
import { fill } from "../texts.js";
import { grammar, type Role, spec, type Terminator } from "../tables.js";

export type Mode = "strict" | "lenient";

/** Every repair lenient mode makes, by the `rule` its `Recovered` event carries. */
export const RECOVERY_RULES: Readonly<Record<string, string>> = { ...spec.RECOVERY_RULES };

/** A repair's values, filled into its detail text. */
export type RepairValues = Parameters<typeof fill>[1];

/**
 * A repair's detail and the text it sets aside, as the spec's `REPAIRS` table says for `rule`: its detail text
 * filled with `values`, and `text`, or else the value the rule sets aside (none: "").
 */
export function described(rule: string, values: RepairValues = {}, text?: string): [string, string] {
  const row = spec.REPAIRS[rule];
  if (row === undefined) throw new Error(`no repair ${rule} in the spec's table`);
  const aside = row.sets_aside === null ? "" : String(values[row.sets_aside] ?? "");
  return [fill(row.detail, values), text ?? aside];
}

/**
 * The input leaves the Harmony grammar (strict mode): what came, what was expected, and where.
 * `position` counts tokens or characters (code points), as the input was given (`unit` says which).
 */
export class HarmonyParseError extends HarmonyError {
  constructor(
    message: string,
    readonly position: number,
    readonly unit: string,
  ) {
    super(fill(spec.PARSE_ERR_AT, { message, unit, position }));
  }
}

/** A parsed message: author, header fields, the whole text and how it ended. */
export class ParsedMessage {
  constructor(
    readonly role: Role,
    readonly name: string | null,
    readonly channel: string | null,
    readonly recipient: string | null,
    readonly contentType: string | null,
    readonly content: string,
    readonly terminator: Terminator,
  ) {}

  toMessage(): Message {
    const content = [new TextContent(this.content)];
    return new Message(new Author(this.role, this.name), content, this.channel, this.recipient, this.contentType);
  }

  /** The reference's JSON form of the message, plus how it ended (keyed as the grammar names it). */
  toDict(): JsonObject {
    return { ...this.toMessage().toDict(), role: this.role, [grammar.RULE_TERMINATOR]: this.terminator };
  }
}

/** A header is complete: the body follows. */
export class MessageStart {
  readonly type = spec.PARSE_EVENT_START;
  constructor(
    readonly index: number,
    readonly role: Role,
    readonly name: string | null,
    readonly channel: string | null,
    readonly recipient: string | null,
    readonly contentType: string | null,
  ) {}
}

/** Body text, in input order; the deltas of a message concatenate to its content. */
export class ContentDelta {
  readonly type = spec.PARSE_EVENT_DELTA;
  constructor(
    readonly index: number,
    readonly text: string,
  ) {}
}

/** A message is complete. */
export class MessageEnd {
  readonly type = spec.PARSE_EVENT_END;
  constructor(
    readonly index: number,
    readonly message: ParsedMessage,
    readonly terminator: Terminator,
  ) {}
}

/** Lenient mode repaired the input: which rule (see RECOVERY_RULES), where, and any text set aside. */
export class Recovered {
  readonly type = spec.PARSE_EVENT_RECOVERED;
  constructor(
    readonly rule: string,
    readonly detail: string,
    readonly position: number,
    readonly text: string = "",
  ) {}
}

export type Event = MessageStart | ContentDelta | MessageEnd | Recovered;

/** The messages that ended among `events`, in order. */
export function messagesOf(events: readonly Event[]): ParsedMessage[] {
  return events.flatMap((e) => (e instanceof MessageEnd ? [e.message] : []));
}

/** An event as the Python CLI's `parse --events` prints it: `type` first, then the fields in order. */
export function eventDict(event: Event): JsonObject {
  if (event instanceof MessageStart) {
    const { type, index, role, name, channel, recipient } = event;
    return { type, index, role, name, channel, recipient, content_type: event.contentType };
  }
  if (event instanceof ContentDelta) return { type: event.type, index: event.index, text: event.text };
  if (event instanceof MessageEnd) {
    return { type: event.type, index: event.index, message: event.message.toDict(), terminator: event.terminator };
  }
  return { type: event.type, rule: event.rule, detail: event.detail, position: event.position, text: event.text };
}
