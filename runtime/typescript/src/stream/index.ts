/**
 * The event API for servers: parse Harmony completions from token ids or from text, strictly or leniently.
 *
 * - `events`: what the parser reports (`MessageStart`, `ContentDelta`, `MessageEnd`, `Recovered`) and its error;
 * - `lexer`: token ids, text or bytes → control terminals and text;
 * - `header`: a message header's words → the grammar's terminals, and the lenient repairs of headers;
 * - `stripped`: text whose control tokens a detokenizer stripped, split into messages as it streams;
 * - `parser`: `HarmonyStreamParser`, which follows the whole stream with the grammar's LALR tables.
 */

export {
  ContentDelta, type Event, eventDict, HarmonyParseError, MessageEnd, MessageStart, messagesOf, type Mode, ParsedMessage, Recovered,
  RECOVERY_RULES,
} from "./events.js";
export { HarmonyStreamParser, parseText, parseTokens, Region, type StreamParserOptions } from "./parser.js";
