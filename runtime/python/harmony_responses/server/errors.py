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
    STORE_FAILED = auto()
    INTERNAL = auto()


# The server's error contract, kept in one table (not Harmony facts, so not in spec/): status, type, code.
SERVER_ERRORS: dict[ErrorKind, tuple[int, str, str]] = {
    ErrorKind.BAD_REQUEST: (400, _spec.REQUEST_ERROR_TYPE, _spec.REQUEST_ERRORS[_spec.REQUEST_ERROR_INVALID]["code"]),
    ErrorKind.UNAUTHORIZED: (401, "authentication_error", "invalid_api_key"),
    ErrorKind.NOT_FOUND: (404, "not_found_error", "not_found"),
    ErrorKind.METHOD_NOT_ALLOWED: (405, "invalid_request_error", "method_not_allowed"),
    ErrorKind.BODY_TOO_LARGE: (413, "invalid_request_error", "request_too_large"),
    ErrorKind.TOO_MANY_REQUESTS: (429, "rate_limit_error", "concurrency_limit_reached"),
    ErrorKind.ENGINE_REJECTED: (400, "invalid_request_error", "engine_rejected_request"),
    ErrorKind.ENGINE_FAILED: (502, "server_error", "engine_failed"),
    ErrorKind.ENGINE_TIMEOUT: (504, "server_error", "engine_timeout"),
    ErrorKind.TOOL_CHOICE_VIOLATED: (502, "server_error", "tool_choice_violated"),
    ErrorKind.MODEL_OUTPUT_INVALID: (502, "server_error", _spec.ERROR_MODEL_OUTPUT_INVALID),
    # Never sent as an HTTP status: the error a stored response carries when its client left mid-stream.
    ErrorKind.CLIENT_DISCONNECTED: (499, "server_error", "client_disconnected"),
    ErrorKind.STORE_FAILED: (503, "server_error", "store_unavailable"),
    ErrorKind.INTERNAL: (500, "server_error", "internal_error"),
}


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
        return SERVER_ERRORS[self.kind][0]

    def body(self) -> dict[str, Any]:
        return {"error": error_payload(self.kind, self.message, self.param)}
