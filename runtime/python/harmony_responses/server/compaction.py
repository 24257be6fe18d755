"""Compaction: a conversation summarised by the model into one compaction item that stands in for its turns.

`POST /v1/responses/compact` takes the spec's compact request (`model`, `input`, `previous_response_id`,
`instructions`), renders the conversation as a response would, appends `COMPACTION_PROMPT` as a last
user message, and runs the engine (no tools, the default output budget). The model's final answer is the
summary. The result is the spec's `CompactResource`: the conversation's user messages, kept word for
word, then one `compaction` item. Sent back as input (`input: [...compacted.output, new message]`), the
item renders where it stands as one user message, `SUMMARY_FRAME` around the summary, in place of the
turns it replaces.

The item's `encrypted_content` comes back from the client, so it is **signed, not stored**: `hrc1.` +
the summary and its time as base64url JSON + `.` + an HMAC-SHA256 of both under the server's key
(`--compaction-key`, else a random key kept in the response store, so every process on one store and
every restart share it). Signing keeps compaction working with `store: false` and across processes
without a lookup, and an item this server did not make, or one changed on the way, is refused with a
400 (`invalid_encrypted_content`) instead of being rendered. The content is signed, not encrypted:
the summary is the client's own conversation. It renders as a user message, so even a key that leaked
would let a client put words in a user message only, never in the system or developer message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._tables import spec as _spec
from ..bridge import CompactionReader, RequestError
from ..models import Message, Role, TextContent
from ..types import CompactionSummaryItemParam, CompactResponseMethodPublicBody

# The server's words (spec/mapping/server.json): what the model is asked, and how its summary is put back.
COMPACTION_PROMPT = _spec.COMPACTION_PROMPT
SUMMARY_FRAME = _spec.COMPACTION_SUMMARY_FRAME
SEAL_VERSION = _spec.COMPACTION_SEAL
COMPACTION_ID_PREFIX = _spec.INPUT_ITEM_ID_PREFIX_COMPACTION  # compaction items' ids (the spec's example: `cmp_123`)
SECRET_NAME = "compaction"  # the store secret that signs compaction items when no key is configured


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CompactionSeal:
    """Signs summaries into compaction items' `encrypted_content` and opens them again."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def from_passphrase(cls, passphrase: str) -> CompactionSeal:
        """The seal for `--compaction-key`: any string, stretched to a key with SHA-256."""
        return cls(hashlib.sha256(passphrase.encode("utf-8")).digest())

    def _mac(self, signed: str) -> str:
        return _b64(hmac.new(self._key, signed.encode("utf-8", "surrogatepass"), hashlib.sha256).digest())

    def seal(self, summary: str, created_at: int) -> str:
        payload = json.dumps({"summary": summary, "created_at": created_at}, ensure_ascii=False, separators=(",", ":"))
        signed = f"{SEAL_VERSION}.{_b64(payload.encode('utf-8'))}"
        return f"{signed}.{self._mac(signed)}"

    def open(self, content: str) -> str | None:
        """The summary sealed in `content`, or None when this seal did not make it (or it was changed)."""
        signed, _, mac = content.rpartition(".")
        version, _, payload = signed.partition(".")
        given = mac.encode("utf-8", "surrogatepass")  # whatever came back: compared, never trusted
        if version != SEAL_VERSION or not hmac.compare_digest(given, self._mac(signed).encode("ascii")):
            return None
        try:
            summary = json.loads(_unb64(payload).decode("utf-8"))["summary"]
        except (binascii.Error, UnicodeDecodeError, ValueError, KeyError, TypeError):  # pragma: no cover - signed
            return None
        return summary if isinstance(summary, str) else None

    def reader(self) -> CompactionReader:
        """The bridge's reader: a compaction item → the user message of its summary, or the spec's 400."""

        def read(item: CompactionSummaryItemParam, where: str) -> list[Message]:
            summary = self.open(item.encrypted_content)
            if summary is None:
                raise RequestError.of(_spec.REQUEST_ERROR_COMPACTION_NOT_OURS, f"{where}.encrypted_content")
            return [summary_message(summary)]

        return read


def summary_message(summary: str) -> Message:
    """How a compaction item renders: one user message, the frame then the summary."""
    return Message.from_role_and_content(Role.USER, SUMMARY_FRAME + summary)


def text_of(message: Message) -> str:
    return "".join(c.text for c in message.content if isinstance(c, TextContent))


def kept_user_texts(messages: Sequence[Message]) -> list[str]:
    """The user's own messages of a compacted conversation, word for word (earlier summaries are summarised
    again, not kept)."""
    texts = [text_of(m) for m in messages if m.author.role == Role.USER]
    return [t for t in texts if not t.startswith(SUMMARY_FRAME)]


_COMPACT_FIELDS = frozenset(CompactResponseMethodPublicBody.model_fields)


def as_response_request(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A compact request as the response request it summarises (validated by the bridge after this): the
    spec's compact fields only, `model` required, nothing that would generate otherwise (tools, sampling)."""
    for key in raw:
        if key not in _COMPACT_FIELDS:
            raise RequestError.of(_spec.REQUEST_ERROR_UNKNOWN_FIELD, key)
    if raw.get("model") is None:
        raise RequestError.of(_spec.REQUEST_ERROR_MISSING, "model")
    return dict(raw)
