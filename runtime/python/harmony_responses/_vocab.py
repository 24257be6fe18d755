"""Finding and checking the o200k_base ranks the Harmony encoding is built on, offline first."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from ._tables import spec as _spec
from .errors import HarmonyError
from .texts import fill


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _checked(data: bytes, where: str) -> bytes:
    actual = hashlib.sha256(data).hexdigest()
    if actual != _spec.RANKS_SHA256:
        raise HarmonyError(fill(_spec.ERR_RANKS_HASH_MISMATCH, path=where, actual=actual, expected=_spec.RANKS_SHA256))
    return data


def _from_env() -> bytes | None:
    base = os.environ.get(_spec.RANKS_ENV_VAR)
    if not base:
        return None
    if "://" in base and not base.startswith("file://"):
        import tiktoken.load

        url = base.rstrip("/") + "/" + _spec.RANKS_FILE
        return _checked(tiktoken.load.read_file_cached(url, _spec.RANKS_SHA256), url)
    path = Path(base.removeprefix("file://")) / _spec.RANKS_FILE
    if not path.is_file():
        raise HarmonyError(
            f"{_spec.RANKS_ENV_VAR}={base} but {path} does not exist; point it at the folder holding {_spec.RANKS_FILE}"
        )
    return _checked(path.read_bytes(), str(path))


def load_ranks() -> dict[bytes, int]:
    """Ranks from TIKTOKEN_ENCODINGS_BASE if set, else through tiktoken's own loading and cache."""
    data = _from_env()
    if data is not None:
        return _parse_ranks(data)
    try:
        from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

        ranks: dict[bytes, int] = ENCODING_CONSTRUCTORS[_spec.RANKS_TIKTOKEN_NAME]()["mergeable_ranks"]
        return ranks
    except Exception as exc:
        raise HarmonyError(
            fill(
                _spec.ERR_RANKS_MISSING,
                file=_spec.RANKS_FILE,
                env_var=_spec.RANKS_ENV_VAR,
                reason=f"{type(exc).__name__}: {exc}"[:200],
            )
        ) from exc
