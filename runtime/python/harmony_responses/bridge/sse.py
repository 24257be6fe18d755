"""Server-sent events: the wire form of an Open Responses event stream, written and read back."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Literal

from .._tables import spec as _spec
from ..types import (
    ResponseFunctionCallArgumentsDeltaStreamingEvent,
    ResponseOutputTextDeltaStreamingEvent,
    ResponseReasoningDeltaStreamingEvent,
    StreamingEvent,
    StreamingEventAdapter,
)

OPENAI_REASONING_EVENTS = dict(_spec.OPENAI_REASONING_EVENTS)
_FROM_OPENAI = {v: k for k, v in OPENAI_REASONING_EVENTS.items()}
DONE = _spec.SSE_DONE
_q = json.encoder.encode_basestring


_DELTA_TYPES = frozenset(
    (
        ResponseOutputTextDeltaStreamingEvent,
        ResponseReasoningDeltaStreamingEvent,
        ResponseFunctionCallArgumentsDeltaStreamingEvent,
    )
)


def event_json(event: StreamingEvent) -> str:
    """One event's JSON body, on one line (delta events, the bulk of a stream, by a fast path)."""
    if type(event) in _DELTA_TYPES and not event.__pydantic_extra__:
        fields_set = event.__pydantic_fields_set__
        d = event.__dict__
        if "logprobs" in fields_set or "obfuscation" in fields_set:
            return event.model_dump_json()
        content = ',"content_index":' + str(d["content_index"]) if "content_index" in d else ""
        return "".join(
            (
                '{"type":"', d["type"], '","sequence_number":', str(d["sequence_number"]), ',"item_id":',
                _q(d["item_id"]), ',"output_index":', str(d["output_index"]), content, ',"delta":', _q(d["delta"]),
                "}",
            )
        )  # fmt: skip
    return event.model_dump_json()


def to_sse(events: Iterable[StreamingEvent], reasoning_names: Literal["spec", "openai"] = "spec") -> Iterator[str]:
    """The wire form: `event: TYPE` and `data: JSON` lines, a blank line after each, then `data: [DONE]`.

    `reasoning_names="openai"` names raw reasoning events `response.reasoning_text.*` (OpenAI's hosted
    API and the gpt-oss reference server) instead of the spec's `response.reasoning.*`.
    """
    rename = OPENAI_REASONING_EVENTS if reasoning_names == "openai" else {}
    for event in events:
        body = event_json(event)
        name: str = event.type
        if name in rename:
            name = rename[name]
            body = body.replace(json.dumps(event.type), json.dumps(name), 1)
        yield f"event: {name}\ndata: {body}\n\n"
    yield f"data: {DONE}\n\n"


class SSEError(ValueError):
    """Malformed SSE text: names the line."""


def parse_sse(lines: Iterable[str]) -> list[StreamingEvent]:
    """Read `to_sse` output back (either naming of reasoning events) into typed events.

    Accepts the text as lines or as chunks holding several lines; stops at `data: [DONE]`.
    """
    events: list[StreamingEvent] = []
    name: str | None = None
    data: list[str] = []
    text = "".join(lines).replace("\r\n", "\n")
    for number, line in enumerate(text.split("\n"), start=1):
        if line == "":
            if data:
                payload = "\n".join(data)
                if payload == DONE:
                    return events
                try:
                    raw = json.loads(payload)
                except json.JSONDecodeError as exc:
                    raise SSEError(f"line {number - 1}: data is not JSON: {exc.msg}") from exc
                if raw.get("type") in _FROM_OPENAI:
                    raw["type"] = _FROM_OPENAI[raw["type"]]
                if name is not None and _FROM_OPENAI.get(name, name) != raw.get("type"):
                    raise SSEError(
                        f"line {number}: event name {name!r} differs from the body's type {raw.get('type')!r}"
                    )
                events.append(StreamingEventAdapter.validate_python(raw))
            name, data = None, []
        elif line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))
        elif line.startswith(":"):
            continue
        else:
            raise SSEError(f"line {number}: not an SSE field: {line[:40]!r}")
    return events
