/**
 * The Harmony encoding: o200k_base plus Harmony's special tokens, and conversation rendering.
 *
 * Rendering walks the message objects directly and encodes each header piece and content item on its own
 * (BPE never merges across them), so the token ids equal the reference's exactly.
 */

import { HarmonyError } from "./errors.js";
import {
  type Content,
  type Conversation,
  DeveloperContent,
  type Message,
  RenderConversationConfig,
  RenderOptions,
  SystemContent,
  TextContent,
} from "./models.js";
import { StreamableParser } from "./parser.js";
import { alt, fill } from "./texts.js";
import { HarmonyEncodingName, type Role, Role as Roles, spec } from "./tables.js";
import { renderToolsSection } from "./toolNamespace.js";
import { decodeReplacing, firstUtf8Problem } from "./utf8.js";
import { type Vocabulary, vocabulary } from "./vocab.js";

const FUNCTIONS = spec.HEADER_FUNCTION_NAMESPACE;
const RECIPIENT_PREFIX = spec.HEADER_PART_SEPARATOR + spec.HEADER_RECIPIENT_KEYWORD;
const FUNCTION_CHANNEL_NOTE = fill(spec.SYS_FUNCTION_CHANNEL_NOTE, { channel: spec.CHANNEL_TOOL_CALLS, namespace: FUNCTIONS });
const PIECE_CACHE_LIMIT = 4096;

/** Which special-token spellings `encode` turns into special tokens, and which raise. */
export interface EncodeOptions {
  readonly allowedSpecial?: "all" | ReadonlySet<string>;
  readonly disallowedSpecial?: "all" | ReadonlySet<string>;
}

/** Renders conversations to token ids and decodes ids, as openai-harmony's HarmonyEncoding. */
export class HarmonyEncoding {
  private readonly specialIds: ReadonlySet<number>;
  private readonly pieceCache = new Map<string, readonly number[]>();
  private readonly specialRegexCache = new Map<string, RegExp>();
  private readonly stopSet: ReadonlySet<number> = new Set(spec.STOP_TOKENS);

  constructor(
    readonly name: string,
    private readonly vocab: Vocabulary,
  ) {
    this.specialIds = new Set(vocab.specials.values());
  }

  get specialTokensSet(): Set<string> {
    return new Set(this.vocab.specials.keys());
  }

  // -- encoding ------------------------------------------------------------------------------------------

  /** Encode text with every special-token spelling taken as ordinary text. */
  encodeOrdinary(text: string): number[] {
    return this.vocab.encodeOrdinary(text);
  }

  /** Encode a short header piece, memoised: headers repeat across every conversation. */
  private piece(text: string): readonly number[] {
    const cached = this.pieceCache.get(text);
    if (cached !== undefined) return cached;
    const tokens = this.encodeOrdinary(text);
    if (this.pieceCache.size < PIECE_CACHE_LIMIT) this.pieceCache.set(text, tokens);
    return tokens;
  }

  /** Header parts onto `out`: a number is a control token, a string a piece of text encoded on its own. */
  private pushParts(out: number[], parts: readonly (number | string)[]): void {
    for (const part of parts) pushAll(out, typeof part === "number" ? [part] : this.piece(part));
  }

  private specialRegex(spellings: Iterable<string>): RegExp {
    const sorted = [...spellings].sort((a, b) => b.length - a.length || (a < b ? -1 : a > b ? 1 : 0));
    const key = sorted.join("\u0000");
    const cached = this.specialRegexCache.get(key);
    if (cached !== undefined) return cached;
    const regex = new RegExp(`(${alt(sorted)})`); // the group: split keeps the spellings
    this.specialRegexCache.set(key, regex);
    return regex;
  }

  /** Encode text; spellings of special tokens throw unless allowed or no longer disallowed. */
  encode(text: string, { allowedSpecial = new Set(), disallowedSpecial = "all" }: EncodeOptions = {}): number[] {
    const all = this.vocab.specials;
    const allowed = new Set(allowedSpecial === "all" ? all.keys() : allowedSpecial);
    const disallowed = disallowedSpecial === "all" ? [...all.keys()].filter((s) => !allowed.has(s)) : [...disallowedSpecial];
    const match = disallowed.length > 0 ? this.specialRegex(disallowed).exec(text) : null;
    if (match !== null) throw new HarmonyError(fill(spec.ERR_DISALLOWED_SPECIAL, { token: match[0] }));
    const usable = [...allowed].filter((s) => all.has(s));
    if (usable.length === 0) return this.encodeOrdinary(text);
    // text, a spelling, text, ...: the spellings are special tokens, the rest ordinary text
    const parts = text.split(this.specialRegex(usable));
    return parts.flatMap((part, i) => (i % 2 === 1 ? [all.get(part) ?? 0] : this.encodeOrdinary(part)));
  }

  /** The bytes of one token, or throws for an id outside the vocabulary. */
  tokenBytes(token: number): Uint8Array {
    const bytes = Number.isInteger(token) && token >= 0 ? this.vocab.tokenBytes[token] : undefined;
    if (bytes === undefined) throw new HarmonyError(fill(spec.ERR_INVALID_TOKEN, { token }));
    return bytes;
  }

  decodeBytes(tokens: readonly number[]): Uint8Array {
    const parts = tokens.map((t) => this.tokenBytes(t));
    return parts.length === 1 && parts[0] !== undefined ? parts[0] : Buffer.concat(parts);
  }

  /** Decode to text; throws HarmonyError on invalid UTF-8 (use `decode` to replace it). */
  decodeUtf8(tokens: readonly number[]): string {
    const data = this.decodeBytes(tokens);
    const problem = firstUtf8Problem(data);
    if (problem === null) return decodeReplacing(data);
    const template = problem.incomplete ? spec.ERR_INVALID_UTF8_INCOMPLETE : spec.ERR_INVALID_UTF8_SEQUENCE;
    throw new HarmonyError(fill(template, { length: problem.length, index: problem.start }));
  }

  /** Decode to text, replacing invalid UTF-8 (as tiktoken does). */
  decode(tokens: readonly number[]): string {
    return decodeReplacing(this.decodeBytes(tokens));
  }

  isSpecialToken(token: number): boolean {
    return this.specialIds.has(token);
  }

  isStopToken(token: number): boolean {
    return this.stopSet.has(token);
  }

  stopTokens(): number[] {
    return [...spec.STOP_TOKENS];
  }

  stopTokensForAssistantActions(): number[] {
    return [...spec.STOP_TOKENS_FOR_ASSISTANT_ACTIONS];
  }

  // -- rendering -----------------------------------------------------------------------------------------

  private systemText(sys: SystemContent, functionTools: boolean): string {
    const sections: string[] = [];
    const top: string[] = [];
    if (sys.modelIdentity !== null) top.push(sys.modelIdentity);
    if (sys.knowledgeCutoff !== null) top.push(fill(spec.SYS_KNOWLEDGE_CUTOFF, { value: sys.knowledgeCutoff }));
    if (sys.conversationStartDate !== null) top.push(fill(spec.SYS_CURRENT_DATE, { value: sys.conversationStartDate }));
    if (top.length > 0) sections.push(top.join(spec.SYS_LINE_SEPARATOR));
    if (sys.reasoningEffort !== null) sections.push(fill(spec.SYS_REASONING, { value: spec.REASONING_RENDERED[sys.reasoningEffort] }));
    if (sys.tools !== null && sys.tools.size > 0) sections.push(renderToolsSection(sys.tools));
    const cc = sys.channelConfig;
    if (cc !== null && cc.validChannels.length > 0) {
      let text = fill(spec.SYS_VALID_CHANNELS, { channels: cc.validChannels.join(spec.SYS_VALID_CHANNELS_JOINER) });
      if (cc.channelRequired) text += spec.SYS_CHANNEL_REQUIRED;
      if (functionTools) text += spec.SYS_LINE_SEPARATOR + FUNCTION_CHANNEL_NOTE;
      sections.push(text);
    }
    return sections.join(spec.SYS_SECTION_SEPARATOR);
  }

  private developerText(dev: DeveloperContent): string {
    const sections: string[] = [];
    if (dev.instructions !== null) sections.push(spec.DEV_INSTRUCTIONS_HEADING, dev.instructions);
    if (dev.tools !== null && dev.tools.size > 0) sections.push(renderToolsSection(dev.tools));
    return sections.join(spec.SYS_SECTION_SEPARATOR);
  }

  /** The text a content item renders to; system and developer content only in their own role's message. */
  private contentText(content: Content, role: Role, functionTools: boolean): string {
    if (content instanceof TextContent) return content.text;
    const [own, misplaced] =
      content instanceof SystemContent
        ? [Roles.System, spec.ERR_SYSTEM_CONTENT_MISPLACED]
        : [Roles.Developer, spec.ERR_DEVELOPER_CONTENT_MISPLACED];
    if (role !== own) throw new HarmonyError(fill(misplaced, { role: spec.ROLE_DEBUG_NAMES[role] ?? role }));
    return content instanceof SystemContent ? this.systemText(content, functionTools) : this.developerText(content);
  }

  /** `message`'s tokens appended to `out`, which is returned. */
  private renderInto(message: Message, out: number[], functionTools: boolean): number[] {
    const { role, name } = message.author;
    const { recipient, channel, contentType } = message;
    if (role === Roles.Tool && name === null) throw new HarmonyError(spec.ERR_TOOL_WITHOUT_NAME);
    // a tool's author is its name alone; another role's name is a piece of its own after the role
    const parts: (number | string)[] = [spec.TOKEN_START, role === Roles.Tool ? (name ?? "") : role];
    if (role !== Roles.Tool && name !== null) parts.push(spec.HEADER_AUTHOR_NAME_SEPARATOR + name);
    if (recipient !== null && recipient !== spec.HEADER_BROADCAST_RECIPIENT) parts.push(RECIPIENT_PREFIX + recipient);
    if (channel !== null) parts.push(spec.TOKEN_CHANNEL, channel);
    const constrained = contentType?.startsWith(spec.SPELLING_CONSTRAIN) === true;
    if (constrained) parts.push(spec.HEADER_PART_SEPARATOR, spec.TOKEN_CONSTRAIN, contentType.slice(spec.SPELLING_CONSTRAIN.length));
    else if (contentType !== null) parts.push(spec.HEADER_PART_SEPARATOR + contentType);
    this.pushParts(out, [...parts, spec.TOKEN_MESSAGE]);
    for (const content of message.content) pushAll(out, this.encodeOrdinary(this.contentText(content, role, functionTools)));
    out.push(role === Roles.Assistant && recipient !== null ? spec.TOKEN_CALL : spec.TOKEN_END);
    return out;
  }

  render(message: Message, renderOptions: RenderOptions | null = null): number[] {
    return this.renderInto(message, [], renderOptions?.conversationHasFunctionTools ?? false);
  }

  /** Render every message; analysis before the first final is dropped when the last assistant message is
   * final (unless `autoDropAnalysis` is false). */
  renderConversation(conversation: Conversation, config: RenderConversationConfig | null = null): number[] {
    const out: number[] = [];
    const messages = [...conversation];
    const functions = (c: Content): boolean => c instanceof DeveloperContent && (c.tools?.get(FUNCTIONS)?.tools.length ?? 0) > 0;
    const functionTools = messages.some((msg) => msg.content.some(functions));
    const autoDrop = config === null ? spec.CONV_AUTO_DROP_ANALYSIS_DEFAULT : config.autoDropAnalysis;
    const lastAssistant = messages.filter((m) => m.author.role === Roles.Assistant).at(-1);
    const dropBefore =
      autoDrop && lastAssistant?.channel === spec.CHANNEL_ANSWER ? messages.findIndex((m) => m.channel === spec.CHANNEL_ANSWER) : -1;
    messages.forEach((msg, index) => {
      if (index >= dropBefore || msg.channel !== spec.CHANNEL_REASONING) this.renderInto(msg, out, functionTools);
    });
    return out;
  }

  /** Render the conversation, then `<|start|>` and the role that is to speak next. */
  renderConversationForCompletion(
    conversation: Conversation,
    nextTurnRole: Role,
    config: RenderConversationConfig | null = null,
  ): number[] {
    const out = this.renderConversation(conversation, config);
    this.pushParts(out, [spec.TOKEN_START, nextTurnRole]);
    return out;
  }

  /** Render the conversation; a trailing assistant final ends with `<|return|>`. */
  renderConversationForTraining(conversation: Conversation, config: RenderConversationConfig | null = null): number[] {
    const out = this.renderConversation(conversation, config);
    const last = [...conversation].at(-1); // an assistant final is never dropped, so its end is the last token
    if (last?.author.role === Roles.Assistant && last.channel === spec.CHANNEL_ANSWER) out[out.length - 1] = spec.TOKEN_END_DONE_SAMPLING;
    return out;
  }

  /** Parse completion tokens into messages (the reference's rules, strict by default). */
  parseMessagesFromCompletionTokens(tokens: readonly number[], role: Role | null = null, strict = true): Message[] {
    const parser = new StreamableParser(this, role, strict);
    for (const token of tokens) parser.process(token);
    parser.processEos();
    return parser.messages;
  }
}

function pushAll(out: number[], items: readonly number[]): void {
  for (const item of items) out.push(item);
}

/** Load the Harmony encoding by name; the o200k_base ranks come with the gpt-tokenizer package. */
export function loadHarmonyEncoding(name: HarmonyEncodingName | string): HarmonyEncoding {
  if (name !== spec.ENCODING_NAME) throw new RangeError(fill(spec.ERR_UNKNOWN_ENCODING, { name }));
  return new HarmonyEncoding(name, vocabulary());
}
