/**
 * Encrypted reasoning, as the Python bridge's `bridge/encrypted.py`: a reasoning item's `encrypted_content` is
 * `hrr1.` (`ENCRYPTED_REASONING_SEAL`) + unpadded base64url of a 12-byte nonce, then the AES-256-GCM ciphertext
 * and its 16-byte tag, over the UTF-8 JSON `{"text", "channel", "content_type", "created_at"}`, with the version
 * as additional authenticated data. `ReasoningSeal.open` gives back the analysis message the model wrote; a blob
 * that does not open (another key, a changed character, a non-canonical spelling, another version) or is older
 * than `maxAge` seconds is refused, and the reader's 400 names `input[N].encrypted_content`. An item that also
 * carries `content` must carry the sealed text (else the 400 names `input[N].content`).
 */

import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";

import { spec } from "../tables.js";
import { assistant, type ReasoningReader, RequestError } from "./request.js";

export const SEAL_VERSION: string = spec.ENCRYPTED_REASONING_SEAL;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
const AAD = Buffer.from(SEAL_VERSION, "ascii"); // the version, authenticated with the ciphertext

/** What a blob holds: the reasoning the model wrote and its header. */
export interface SealedReasoning {
  readonly text: string;
  readonly channel: string | null;
  readonly contentType: string | null;
  readonly createdAt: number;
}

function isTextOrNull(value: unknown): value is string | null {
  return value === null || typeof value === "string";
}

export interface SealOptions {
  readonly maxAge?: number | null; // seconds a blob stays good (null: for ever)
  readonly clock?: () => number; // seconds since the epoch
}

/** Seals reasoning into `encrypted_content` and opens it again (AES-256-GCM under one key). */
export class ReasoningSeal {
  private readonly key: Buffer;
  private readonly maxAge: number | null;
  private readonly clock: () => number;

  constructor(key: Uint8Array, options: SealOptions = {}) {
    if (key.length !== KEY_BYTES) throw new Error(`a reasoning key is ${KEY_BYTES} bytes, got ${key.length}`);
    this.key = Buffer.from(key);
    this.maxAge = options.maxAge ?? null;
    this.clock = options.clock ?? (() => Date.now() / 1000);
  }

  /** The seal for a configured key: any string, stretched to 32 bytes with SHA-256. */
  static fromPassphrase(passphrase: string, options: SealOptions = {}): ReasoningSeal {
    return new ReasoningSeal(createHash("sha256").update(passphrase, "utf8").digest(), options);
  }

  seal(text: string, channel: string | null, contentType: string | null, nonce: Uint8Array = randomBytes(NONCE_BYTES)): string {
    const payload = JSON.stringify({ text, channel, content_type: contentType, created_at: Math.floor(this.clock()) });
    const cipher = createCipheriv("aes-256-gcm", this.key, nonce);
    cipher.setAAD(AAD);
    const sealed = Buffer.concat([cipher.update(payload, "utf8"), cipher.final(), cipher.getAuthTag()]);
    return `${SEAL_VERSION}.${Buffer.concat([nonce, sealed]).toString("base64url")}`;
  }

  /** What `blob` holds, or null when this seal did not make it, it was changed, or it has expired. */
  open(blob: string): SealedReasoning | null {
    if (!blob.startsWith(`${SEAL_VERSION}.`)) return null;
    const encoded = blob.slice(SEAL_VERSION.length + 1);
    const raw = Buffer.from(encoded, "base64url");
    // canonical unpadded base64url only (Node's decoder skips what it cannot read: what it read must write back as the same text)
    if (raw.toString("base64url") !== encoded || raw.length < NONCE_BYTES + TAG_BYTES) return null;
    let data: Record<string, unknown> | null;
    try {
      // a wrong key or a changed byte fails the tag; bytes that are not UTF-8 JSON fail to read
      const decipher = createDecipheriv("aes-256-gcm", this.key, raw.subarray(0, NONCE_BYTES));
      decipher.setAAD(AAD);
      decipher.setAuthTag(raw.subarray(raw.length - TAG_BYTES));
      const bytes = Buffer.concat([decipher.update(raw.subarray(NONCE_BYTES, raw.length - TAG_BYTES)), decipher.final()]);
      data = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes)) as Record<string, unknown> | null;
    } catch {
      return null;
    }
    const { text, channel, content_type: contentType, created_at: createdAt } = data ?? {};
    if (typeof text !== "string" || typeof createdAt !== "number" || !isTextOrNull(channel) || !isTextOrNull(contentType)) return null;
    if (this.maxAge !== null && this.clock() - createdAt > this.maxAge) return null;
    return { text, channel, contentType, createdAt };
  }

  /** The bridge's reader of reasoning input items that carry `encrypted_content`. */
  reader(): ReasoningReader {
    return (item, where) => {
      const found = this.open(String(item["encrypted_content"]));
      if (found === null) throw RequestError.of(spec.REQUEST_ERROR_REASONING_NOT_OURS, `${where}.encrypted_content`);
      const content = item["content"];
      if (Array.isArray(content) && content.length > 0) {
        const text = (content as { text?: string }[]).map((p) => p.text ?? "").join("");
        if (text !== found.text) throw RequestError.of(spec.REQUEST_ERROR_REASONING_CONTENT_DIFFERS, `${where}.content`);
      }
      return assistant(found.text, found.channel, found.contentType);
    };
  }
}
