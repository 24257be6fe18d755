"""The command line's input files: read strictly, and every problem one line naming the file and the place.

Text must be UTF-8 (an undecodable byte is an error naming its offset, on standard input too, never
passed through); JSON is read within the limits of `json_input` (no `RecursionError`, no lone
surrogate); a token-id file is a JSON array of integers. Errors are `InputError`s, which the CLI prints
as `harmony-responses: [FLAG ]FILE: PATH: WHAT` and exits 2.
"""

from __future__ import annotations

import sys
from typing import Any

from ._tables import spec as _spec
from .encoding import HarmonyEncoding, load_harmony_encoding
from .errors import HarmonyError
from .json_input import JSONInputError, load_json

STDIN = "-"


class CommandError(Exception):
    """A problem the CLI reports in one line, with its exit status (2: bad input; 1: the environment)."""

    def __init__(self, message: str, status: int = 2) -> None:
        super().__init__(message)
        self.status = status


def load_encoding() -> HarmonyEncoding:
    """The Harmony encoding; a missing or wrong vocabulary is reported as such, not as a problem of the input."""
    try:
        return load_harmony_encoding(_spec.ENCODING_NAME)
    except HarmonyError as exc:
        raise CommandError(f"cannot load the vocabulary: {exc}", status=1) from None


def display_name(file: str, flag: str | None = None) -> str:
    """`--completion out.txt`, `<stdin>`: how errors name an input."""
    name = "<stdin>" if file == STDIN else file
    return f"{flag} {name}" if flag else name


class InputError(CommandError):
    """Bad user input: the file (and the flag that named it), the JSON path and what was expected."""

    def __init__(self, file: str, path: str, expected: str, flag: str | None = None) -> None:
        super().__init__(f"{display_name(file, flag)}: {path}: {expected}")


def read_text(file: str, flag: str | None = None) -> str:
    """The file's (or standard input's) text, decoded as strict UTF-8."""
    try:
        if file == STDIN:
            data = sys.stdin.buffer.read()
        else:
            with open(file, "rb") as fh:
                data = fh.read()
    except OSError as exc:
        raise InputError(file, "$", f"cannot read file ({exc.strerror})", flag) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:  # where the first bad sequence starts (its bytes and words vary by language)
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(file, "$", f"not UTF-8: invalid byte at offset {exc.start} (line {line})", flag) from None


def read_json(file: str, flag: str | None = None) -> Any:
    """The file's JSON value, within `json_input`'s limits."""
    try:
        return load_json(read_text(file, flag), "$")
    except JSONInputError as exc:
        raise InputError(file, exc.path, exc.reason, flag) from None


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return f"{value!r} (a number with a fraction)"  # the float spelling of format.json's text_rules
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__


def read_token_ids(file: str, flag: str | None = None) -> list[int]:
    """A JSON array of integers (`true` and `1.5` are not ids); whether each is in the vocabulary is the caller's."""
    data = read_json(file, flag)
    if not isinstance(data, list):
        raise InputError(file, "$", f"expected a JSON list of token ids, found {_kind(data)}", flag)
    for i, token in enumerate(data):
        if not isinstance(token, int) or isinstance(token, bool):
            expected = f"expected a JSON list of token ids (integers), found {_kind(token)}"
            raise InputError(file, f"$[{i}]", expected, flag)
    return data
