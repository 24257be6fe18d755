/**
 * harmony-responses for TypeScript: OpenAI's Harmony format, generated from the same spec as the Python
 * package and held to the same fixtures. The names mirror the Python API (camelCase); see the README's table.
 */

export { HarmonyEncoding, loadHarmonyEncoding, type EncodeOptions } from "./encoding.js";
export { HarmonyError } from "./errors.js";
export { entriesOf, JsonFloat, type JsonData, type JsonObject, JsonSyntaxError, keysOf, readJson, writeJson } from "./json.js";
export { Author, ChannelConfig, type Content, contentFromDict, Conversation, DeveloperContent, Message, parseRole } from "./models.js";
export { RenderConversationConfig, RenderOptions, SystemContent, TextContent, ToolDescription, ToolNamespaceConfig } from "./models.js";
export { ValidationError } from "./models.js";
export { ContentDelta, type Event, HarmonyParseError, HarmonyStreamParser, MessageEnd, MessageStart, messagesOf } from "./stream/index.js";
export { type Mode, ParsedMessage, parseText, parseTokens, Recovered, RECOVERY_RULES, Region } from "./stream/index.js";
export { type StreamParserOptions } from "./stream/index.js";
export { GrammarError, IncrementalParser, type Reducer } from "./lalr.js";
export { ParsedHeader, parseHeaderText, type StateData, StreamableParser, StreamState } from "./parser.js";
export { detectLeak, escapeControlTokens, escapeControlTokensJson, type Leak, type LeakKind, unescapeControlTokens } from "./safety.js";
export { FORMAT_VERSION, HarmonyEncodingName, ItemKind, ReasoningEffort, Role, Terminator } from "./tables.js";
export { renderToolNamespace, schemaToTypescript, type ToolLike } from "./toolNamespace.js";
export * as bridge from "./bridge/index.js";
