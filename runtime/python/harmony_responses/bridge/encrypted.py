"""Encrypted reasoning: a reasoning item's `encrypted_content`, sealed by the server and opened when it comes back.

A client that keeps no state on the server (`store: false`, as Codex runs every turn) asks for
`include: ["reasoning.encrypted_content"]`; each reasoning output item then carries `encrypted_content`,
the reasoning the model wrote sealed with authenticated encryption, and the client sends the item back
in the next request's input. `ReasoningSeal.open` gives back exactly what the model wrote (its text,
channel and content type), so the analysis message renders token for token as stored state would render
it, and the chain-of-thought rule then drops or keeps it as for any reasoning item.

The blob (`encrypted_content`) is `hrr1.` (the version, `ENCRYPTED_REASONING_SEAL`) + base64url, no padding,
of a 12-byte random nonce then the AES-256-GCM ciphertext and its 16-byte tag. The plaintext is UTF-8 JSON
`{"text": ..., "channel": ..., "content_type": ..., "created_at": ...}` (null: none); the additional
authenticated data is the version, so a blob cannot be replayed under another format. A blob that does not
open (another server's key, a changed byte, another version) or is older than the seal's `max_age` is the
spec's 400 naming `input[N].encrypted_content`. The TypeScript bridge reads the same format with node's
crypto (`bridge/encrypted.ts`).

An item with both `content` and `encrypted_content` (a client that sends back the item as it came) renders
the sealed reasoning; its `content` must be that text, or the item is refused naming `input[N].content`
(nothing the client sent is silently set aside). Its `summary` is not rendered: the model wrote none.

The key: 32 bytes; `ReasoningSeal.from_passphrase` stretches a configured string with SHA-256. The server
keeps a random key in its response store (the secret `encrypted_reasoning`, as the compaction key), so every process
on one store opens the others' items. `cryptography` is imported when a seal is made (the server extra).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._tables import spec as _spec
from ..models import Message, Role
from ..types import ReasoningItemParam
from .request import ReasoningReader, RequestError

SEAL_VERSION = _spec.ENCRYPTED_REASONING_SEAL
NONCE_BYTES = 12
KEY_BYTES = 32
SECRET_NAME = "encrypted_reasoning"  # the store secret that seals reasoning when no key is configured


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """The bytes of canonical unpadded base64url only: any other spelling (a character outside the alphabet,
    a length no encoding has, unused bits set) is refused, so a changed character never opens as the original."""
    if not text or any(c not in _B64_ALPHABET for c in text) or len(text) % 4 == 1:
        raise ValueError("not base64url")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not canonical base64url")
    return data


_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass(frozen=True)
class SealedReasoning:
    """What a blob holds: the reasoning the model wrote and its header."""

    text: str
    channel: str | None
    content_type: str | None
    created_at: int

    def message(self) -> Message:
        """The analysis message the model wrote."""
        message = Message.from_role_and_content(Role.ASSISTANT, self.text)
        message = message.with_channel(self.channel) if self.channel is not None else message
        return message.with_content_type(self.content_type) if self.content_type is not None else message


class ReasoningSeal:
    """Seals reasoning into `encrypted_content` and opens it again (AES-256-GCM under one key)."""

    def __init__(self, key: bytes, *, max_age: float | None = None, clock: Callable[[], float] = time.time) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if len(key) != KEY_BYTES:
            raise ValueError(f"a reasoning key is {KEY_BYTES} bytes, got {len(key)}")
        self._aead = AESGCM(key)
        self.max_age = max_age
        self._clock = clock

    @classmethod
    def from_passphrase(cls, passphrase: str, **kwargs: Any) -> ReasoningSeal:
        """The seal for a configured key: any string, stretched to 32 bytes with SHA-256."""
        return cls(hashlib.sha256(passphrase.encode("utf-8")).digest(), **kwargs)

    def seal(self, text: str, channel: str | None, content_type: str | None, *, nonce: bytes | None = None) -> str:
        """`encrypted_content` for reasoning the model wrote (a fresh random nonce unless given, for tests)."""
        payload = {"text": text, "channel": channel, "content_type": content_type, "created_at": int(self._clock())}
        plain = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
        sealed = self._aead.encrypt(nonce, plain, SEAL_VERSION.encode("ascii"))
        return f"{SEAL_VERSION}.{_b64(nonce + sealed)}"

    def open(self, blob: str) -> SealedReasoning | None:
        """What `blob` holds, or None when this seal did not make it, it was changed, or it has expired."""
        from cryptography.exceptions import InvalidTag

        version, dot, body = blob.partition(".")
        if version != SEAL_VERSION or not dot:
            return None
        try:
            raw = _unb64(body)
        except (ValueError, binascii.Error):
            return None
        if len(raw) <= NONCE_BYTES:
            return None
        try:
            plain = self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], SEAL_VERSION.encode("ascii"))
        except InvalidTag:
            return None
        try:
            data = json.loads(plain.decode("utf-8", "surrogatepass"))
            found = SealedReasoning(data["text"], data["channel"], data["content_type"], int(data["created_at"]))
        except (UnicodeDecodeError, ValueError, KeyError, TypeError):  # pragma: no cover - authenticated
            return None
        if self.max_age is not None and self._clock() - found.created_at > self.max_age:
            return None
        return found

    def reader(self) -> ReasoningReader:
        """The bridge's reader of reasoning input items that carry `encrypted_content`."""

        def read(item: ReasoningItemParam, where: str) -> Message:
            assert item.encrypted_content is not None
            found = self.open(item.encrypted_content)
            if found is None:
                raise RequestError.of(_spec.REQUEST_ERROR_REASONING_NOT_OURS, f"{where}.encrypted_content")
            if item.content and "".join(part.text for part in item.content) != found.text:
                raise RequestError.of(_spec.REQUEST_ERROR_REASONING_CONTENT_DIFFERS, f"{where}.content")
            return found.message()

        return read


ReasoningSealer = Callable[[str, str | None, str | None], str]
"""Seals a reasoning output item's text, channel and content type into its `encrypted_content`."""
