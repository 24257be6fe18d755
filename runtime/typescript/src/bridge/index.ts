/**
 * Open Responses on top of Harmony, by responsibility (the Python package's `bridge`):
 *
 * - `request`: an Open Responses request → a Harmony conversation (and the 400s it can throw);
 * - `encrypted`: reasoning items' `encrypted_content`, sealed and opened (AES-256-GCM, as the Python bridge);
 * - `items`: the completion → output items and the ordered event stream (the item/event state machine);
 * - `arguments`: a strict function tool's arguments checked against its schema (with ajv);
 * - `resource`: the `ResponseResource` and the request settings it echoes;
 * - `sse`: the event stream's wire form, written and read back;
 * - `chat`: the Chat Completions shapes of a response and of its event stream;
 * - `schema`: the Open Responses models (validation and JSON), read from the generated schemas.
 */

export * from "./arguments.js";
export * from "./chat.js";
export * from "./encrypted.js";
export * from "./items.js";
export {
  type Capabilities,
  checkSupported,
  type ItemMessages,
  type ReasoningReader,
  itemsToMessages,
  KnownCalls,
  NOTHING_MORE,
  Verbatim,
  parseRequest,
  RequestError,
  requestToConversation,
  type ToolCall,
  type ToolPolicy,
  toolPolicy,
} from "./request.js";
export * from "./resource.js";
export { compactJson, dumpAs, ModelValidationError, modelOf, validateAs } from "./schema.js";
export * from "./sse.js";
export { explain, found, type Problem } from "./validation.js";
