"""The server's own errors, each answered with the spec's error body (`{"error": ErrorPayload}`) and a status.

Request errors found by the bridge (`bridge.RequestError`, HTTP 400) carry their own body; everything the
server adds (auth, limits, the engine, tool-choice enforcement) is an `ErrorKind` here. The statuses,
types and codes below are the server's documented contract (README, "Errors").
"""

from __future__ import annotations

from enum import Enum, auto
from typing import Any

from .._tables import spec as _spec


class ErrorKind(Enum):
    """What went wrong; `SERVER_ERRORS` gives its HTTP status, error type and code."""

    BAD_REQUEST = auto()
    UNAUTHORIZED = auto()
    NOT_FOUND = auto()
    METHOD_NOT_ALLOWED = auto()
    BODY_TOO_LARGE = auto()
    TOO_MANY_REQUESTS = auto()
    ENGINE_REJECTED = auto()
    ENGINE_FAILED = auto()
    ENGINE_TIMEOUT = auto()
    TOOL_CHOICE_VIOLATED = auto()
    MODEL_OUTPUT_INVALID = auto()
    CLIENT_DISCONNECTED = auto()
    CANCELLED = auto()
    STORE_FAILED = auto()
    HEAD_TOO_LARGE = auto()
    REQUEST_TIMEOUT = auto()
    TOO_MANY_CONNECTIONS = auto()
    SHUTTING_DOWN = auto()
    NOT_READY = auto()
    INTERNAL = auto()


# The server's error contract (spec/mapping/server.json): status, type, code. None: never an HTTP status,
# only the error a stored response carries (its client left mid-stream).
SERVER_ERRORS: dict[ErrorKind, tuple[int | None, str, str]] = {
    kind: (row["status"], row["type"], row["code"])
    for kind, row in ((kind, _spec.SERVER_ERRORS[kind.name.lower()]) for kind in ErrorKind)
}


def http_status(kind: ErrorKind) -> int:
    """The HTTP status of `kind`; an error that is never an HTTP status answers as an internal one, if ever sent."""
    status = SERVER_ERRORS[kind][0]
    if status is None:
        status = SERVER_ERRORS[ErrorKind.INTERNAL][0]
    assert status is not None, "the spec gives the internal error a status"
    return status


def error_payload(kind: ErrorKind, message: str, param: str | None = None) -> dict[str, Any]:
    """The spec's `ErrorPayload` for `kind`, as JSON data."""
    _status, type_, code = SERVER_ERRORS[kind]
    return {"type": type_, "code": code, "message": message, "param": param}


class ServerError(Exception):
    """An error the server answers with `status` and `body()`; `headers` go on the HTTP response."""

    def __init__(
        self, kind: ErrorKind, message: str, param: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param
        self.headers = headers or {}

    @property
    def status(self) -> int:
        return http_status(self.kind)

    def body(self) -> dict[str, Any]:
        return {"error": error_payload(self.kind, self.message, self.param)}
