"""Request bodies read within bounds: size checked while reading, nesting depth checked before parsing.

`read_json` refuses a body over `max_bytes` with 413 as soon as its Content-Length or the bytes read so
far say so (the rest is never read), and, with 400 before `json.loads` builds any of it, a body nested
deeper than `max_depth`, holding more than `MAX_VALUES` separate values (a few megabytes of `[{},{},…]`
would become hundreds of megabytes of objects) or more than `MAX_STRINGS` strings. Every scan is linear
in the body's size and runs at C speed (`bytes.replace`, `split`, `count`, `find`), so a hostile body
costs no more than a long one: strings are removed by dropping escaped backslashes and quotes first (what
is left of `"` then delimits strings), and the depth scan peels the innermost brackets a bounded number
of times, after a check for a run of openers longer than the limit. A body larger than
`offload.OFFLOAD_BYTES` is checked and parsed on a worker thread (`read_json`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from .errors import ErrorKind, ServerError
from .offload import maybe_off_loop

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")
MAX_VALUES = 200_000  # commas outside strings: a 10,000-message conversation has about 50,000
MAX_STRINGS = 2 * MAX_VALUES  # keys and string values; the scan's work is bounded by their number


def _structure(data: bytes) -> bytes | None:
    """The text outside strings (None when it holds more than `MAX_STRINGS` strings)."""
    # Inside a string `\\` is one backslash and `\"` a quote; left to right, pairs first, as a parser reads
    # them. Outside strings neither is valid JSON, and the parser says so.
    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    if plain.count(b'"') > 2 * MAX_STRINGS:
        return None
    return b"".join(plain.split(b'"')[0::2])


def too_many_values(data: bytes, limit: int = MAX_VALUES) -> bool:
    """True when the JSON text separates more than `limit` values (commas outside strings)."""
    structure = _structure(data)
    return structure is None or structure.count(b",") > limit


def nesting_exceeds(data: bytes, limit: int) -> bool:
    """True when the JSON text nests arrays/objects deeper than `limit` (malformed text is left to the parser)."""
    structure = _structure(data)
    if structure is None:
        return False  # `too_many_values` refuses it
    brackets = structure.translate(_ONE_KIND, _NOT_BRACKETS)
    too_deep = b"[" * (limit + 1)  # that many openers in a row nest that deep, balanced or not
    for _ in range(limit):
        if not brackets:
            return False
        if too_deep in brackets:
            return True
        peeled = brackets.replace(b"[]", b"")  # one pass over the text: every innermost pair, one level
        if len(peeled) == len(brackets):
            return False  # unbalanced: json.loads will say where
        brackets = peeled
    return bool(brackets)


async def read_json(
    headers: Mapping[str, str], chunks: AsyncIterator[bytes], *, max_bytes: int, max_depth: int
) -> dict[str, Any]:
    """The body as a JSON object, or a `ServerError` (413 too large, 400 not JSON, too deep, not an object)."""
    value, _size = await read_json_sized(headers, chunks, max_bytes=max_bytes, max_depth=max_depth)
    return value


async def read_json_sized(
    headers: Mapping[str, str], chunks: AsyncIterator[bytes], *, max_bytes: int, max_depth: int
) -> tuple[dict[str, Any], int]:
    """`read_json`, and the body's size in bytes (which tells whether the next steps run off the loop)."""
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise ServerError(ErrorKind.BODY_TOO_LARGE, f"the body is {declared} bytes; the limit is {max_bytes}")
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise ServerError(ErrorKind.BODY_TOO_LARGE, f"the body is over the limit of {max_bytes} bytes")
        parts.append(chunk)
    data = b"".join(parts)
    value = await maybe_off_loop(len(data), load_json_object, data, max_bytes=max_bytes, max_depth=max_depth)
    return value, len(data)


def load_json_object(data: bytes, *, max_bytes: int, max_depth: int, what: str = "the body") -> dict[str, Any]:
    """`data` (a whole body, or a WebSocket message) as a JSON object, within the same limits as `read_json`."""
    if len(data) > max_bytes:
        raise ServerError(ErrorKind.BODY_TOO_LARGE, f"{what} is {len(data)} bytes; the limit is {max_bytes}")
    if not data.strip():
        raise ServerError(ErrorKind.BAD_REQUEST, f"no body: {what} is empty; send a JSON object")
    if nesting_exceeds(data, max_depth):
        raise ServerError(ErrorKind.BAD_REQUEST, f"the JSON of {what} nests deeper than {max_depth} levels")
    if too_many_values(data):
        raise ServerError(
            ErrorKind.BAD_REQUEST, f"the JSON of {what} holds more than {MAX_VALUES} values or {MAX_STRINGS} strings"
        )
    try:
        value = json.loads(data)
    except UnicodeDecodeError as exc:
        raise ServerError(ErrorKind.BAD_REQUEST, f"{what} is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ServerError(
            ErrorKind.BAD_REQUEST, f"{what} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise ServerError(ErrorKind.BAD_REQUEST, f"the JSON of {what} nests too deeply") from None
    if not isinstance(value, dict):
        raise ServerError(ErrorKind.BAD_REQUEST, f"{what} must be a JSON object, not {type(value).__name__}")
    return value
