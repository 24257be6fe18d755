"""Request bodies read within bounds: size checked while reading, nesting depth checked before parsing.

`read_json` refuses a body over `max_bytes` with 413 as soon as its Content-Length or the bytes read so
far say so (the rest is never read), and, with 400 before `json.loads` builds any of it, a body nested
deeper than `max_depth` or holding more than `MAX_VALUES` separate values (a few megabytes of `[{},{},…]`
would become hundreds of megabytes of objects). The scans work on bytes with strings removed, at C speed:
the depth scan peels one level of innermost brackets per pass.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from .errors import ErrorKind, ServerError

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")
MAX_VALUES = 200_000  # commas outside strings: a 10,000-message conversation has about 50,000


def _structure(data: bytes) -> bytes:
    return _STRING.sub(b"", data)


def too_many_values(data: bytes, limit: int = MAX_VALUES) -> bool:
    """True when the JSON text separates more than `limit` values (commas outside strings)."""
    return _structure(data).count(b",") > limit


def nesting_exceeds(data: bytes, limit: int) -> bool:
    """True when the JSON text nests arrays/objects deeper than `limit` (malformed text is left to the parser)."""
    brackets = _structure(data).translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        peeled = _INNERMOST.sub(b"", brackets)  # one pass over the text: exactly one level
        if len(peeled) == len(brackets):
            return False  # unbalanced: json.loads will say where
        brackets = peeled
    return bool(brackets)


async def read_json(
    headers: Mapping[str, str], chunks: AsyncIterator[bytes], *, max_bytes: int, max_depth: int
) -> dict[str, Any]:
    """The body as a JSON object, or a `ServerError` (413 too large, 400 not JSON, too deep, not an object)."""
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
    return load_json_object(b"".join(parts), max_bytes=max_bytes, max_depth=max_depth)


def load_json_object(data: bytes, *, max_bytes: int, max_depth: int, what: str = "the body") -> dict[str, Any]:
    """`data` (a whole body, or a WebSocket message) as a JSON object, within the same limits as `read_json`."""
    if len(data) > max_bytes:
        raise ServerError(ErrorKind.BODY_TOO_LARGE, f"{what} is {len(data)} bytes; the limit is {max_bytes}")
    if not data.strip():
        raise ServerError(ErrorKind.BAD_REQUEST, f"no body: {what} is empty; send a JSON object")
    if nesting_exceeds(data, max_depth):
        raise ServerError(ErrorKind.BAD_REQUEST, f"the JSON of {what} nests deeper than {max_depth} levels")
    if too_many_values(data):
        raise ServerError(ErrorKind.BAD_REQUEST, f"the JSON of {what} holds more than {MAX_VALUES} values")
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
