"""API keys: `Authorization: Bearer KEY`, compared in constant time against every configured key.

With no keys configured every request is accepted, with or without a key (the server warns at start
when it then listens beyond loopback). Keys are compared as SHA-256 digests with `hmac.compare_digest`,
so neither the content nor the length of a key shows in the timing, and every key is compared.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping

from .errors import ErrorKind, ServerError

_BEARER = "bearer "


def presented_key(headers: Mapping[str, str]) -> str | None:
    """The key a request presents (`Authorization: Bearer KEY`), or None: what its stored objects belong to."""
    value = headers.get("authorization", "")
    if value[: len(_BEARER)].lower() != _BEARER:
        return None
    return value[len(_BEARER) :].strip() or None


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


class KeyCheck:
    """Checks a request's headers against the configured keys."""

    def __init__(self, keys: Iterable[str]) -> None:
        self._digests = tuple(_digest(k) for k in keys)

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def check(self, headers: Mapping[str, str]) -> None:
        """Nothing, or `ServerError` 401 naming what is missing or wrong (never which key was close)."""
        if not self._digests:
            return
        value = headers.get("authorization", "")
        if not value[: len(_BEARER)].lower() == _BEARER:
            raise ServerError(
                ErrorKind.UNAUTHORIZED,
                "missing API key: send the header 'Authorization: Bearer KEY'",
                headers={"WWW-Authenticate": "Bearer"},
            )
        given = _digest(value[len(_BEARER) :].strip())
        ok = False
        for digest in self._digests:
            ok |= hmac.compare_digest(given, digest)
        if not ok:
            raise ServerError(ErrorKind.UNAUTHORIZED, "invalid API key", headers={"WWW-Authenticate": "Bearer"})
