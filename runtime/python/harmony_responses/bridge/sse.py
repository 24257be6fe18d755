"""Server-sent events: the wire form of an Open Responses event stream, written and read back."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from pydantic import ValidationError

from .._tables import spec as _spec
from ..encoding import HarmonyEncoding
from ..json_input import JSONInputError, load_json
from ..types import CreateResponseBody, StreamingEvent, StreamingEventAdapter
from .items import KINDS, Completion, OpenItem, ResponseBuilder, ResponseEvents, feed_all
from .validation import explain, found

OPENAI_REASONING_EVENTS = dict(_spec.OPENAI_REASONING_EVENTS)
_FROM_OPENAI = {v: k for k, v in OPENAI_REASONING_EVENTS.items()}
DONE = _spec.SSE_DONE
DONE_FRAME = f"data: {DONE}\n\n"
ReasoningNames = Literal["spec", "openai"]
_json_string = json.encoder.encode_basestring  # a JSON string literal, non-ASCII kept as is (as pydantic writes it)


def event_json(event: StreamingEvent) -> str:
    """One event's JSON body, on one line."""
    return event.model_dump_json()


def frame(event: StreamingEvent, reasoning_names: ReasoningNames = "spec") -> str:
    """One event as SSE text: its `event:` line, its `data:` line and the blank line that ends it.

    A delta event as the bridge makes them (no optional field given, nothing extra) is written from its
    item's template, cut once from the model's own JSON (`_DeltaFrames`): the same bytes, without the
    serializer per delta.
    """
    if type(event) in _DELTA_CLASSES:
        fast = _DELTA_FRAMES.frame(event, reasoning_names)
        if fast is not None:
            return fast
    return _frame(event, reasoning_names)


def _frame(event: StreamingEvent, reasoning_names: ReasoningNames) -> str:
    body = event.model_dump_json()
    name: str = event.type
    if reasoning_names == "openai" and name in OPENAI_REASONING_EVENTS:
        renamed = OPENAI_REASONING_EVENTS[name]
        body = body.replace(json.dumps(name), json.dumps(renamed), 1)
        name = renamed
    return f"event: {name}\ndata: {body}\n\n"


def to_sse(events: Iterable[StreamingEvent], reasoning_names: ReasoningNames = "spec") -> Iterator[str]:
    """The wire form: `event: TYPE` and `data: JSON` lines, a blank line after each, then `data: [DONE]`.

    `reasoning_names="openai"` names raw reasoning events `response.reasoning_text.*` (OpenAI's hosted
    API and the gpt-oss reference server) instead of the spec's `response.reasoning.*`.
    """
    if isinstance(events, ResponseEvents) and events.fresh:
        yield from _bridge_frames(events, reasoning_names)
        return
    for event in events:
        yield frame(event, reasoning_names)
    yield DONE_FRAME


def _bridge_frames(events: ResponseEvents, reasoning_names: ReasoningNames) -> Iterator[str]:
    """`to_sse` of a `stream_response` nobody has read from: the same frames, one per event, written by the
    bridge's `SSESink` as the events happen (a delta's frame from its text), with no typed event per delta."""
    completion, encoding, request, stopped, options = events.take()
    sink = SSESink(reasoning_names)
    frames = sink.frames
    builder = ResponseBuilder(encoding, request, sink, **options)
    builder.start()
    yield from frames
    frames.clear()
    feed_token, feed_text = builder.feed_token, builder.feed_text
    for piece in completion:
        if isinstance(piece, str):
            feed_text(piece)
        else:
            delta = feed_token(piece)
            if delta is not None:  # the fast path: the delta's frame, handed back
                yield delta
                continue
        if frames:
            yield from frames
            frames.clear()
    builder.finish(stopped)
    yield from frames
    frames.clear()
    yield DONE_FRAME


class SSESink:
    """A `ResponseBuilder` sink that writes SSE text: deltas straight from their text, never as typed events."""

    __slots__ = ("frames", "_names", "_escaped")

    def __init__(self, reasoning_names: ReasoningNames) -> None:
        self.frames: list[str] = []
        self._names: ReasoningNames = reasoning_names
        self._escaped: dict[str, str] = {}  # a piece of text → its JSON string; tokens repeat

    def event(self, event: StreamingEvent) -> None:
        self.frames.append(frame(event, self._names))

    def delta(self, item: OpenItem, sequence_number: int, text: str) -> None:
        self.frames.append(self.hand_delta(item, sequence_number, text))

    def keep(self, frame: str) -> None:
        """Keep a delta frame `hand_delta` made (a caller of `ResponseBuilder.feed_token` that wants it kept)."""
        self.frames.append(frame)

    def hand_delta(self, item: OpenItem, sequence_number: int, text: str) -> str:
        parts = item.wire
        if parts is None:
            parts = item.wire = self._delta_parts(item)
        escaped = self._escaped.get(text)
        if escaped is None:
            escaped = self._escaped[text] = _json_string(text)
        return f"{parts[0]}{sequence_number}{parts[1]}{escaped}}}\n\n"

    def _delta_parts(self, item: OpenItem) -> tuple[str, str]:
        """The delta frame of `item` around its sequence number and its text, written as its model would be."""
        cls = item.spec.delta
        sample = cls(sequence_number=0, item_id=item.id, output_index=item.output_index, content_index=0, delta="")
        name: str = sample.type
        if self._names == "openai":
            name = OPENAI_REASONING_EVENTS.get(name, name)
        body = sample.model_dump_json()
        if json.dumps(sample.type) in body:
            body = body.replace(json.dumps(sample.type), json.dumps(name), 1)
        head, _, rest = body.partition(_SEQUENCE_ZERO)
        middle, _, _ = rest.rpartition(_DELTA_EMPTY)
        return f"event: {name}\ndata: {head}{_SEQUENCE_KEY}", middle + _DELTA_KEY

    def take(self) -> str:
        out = "".join(self.frames)
        self.frames.clear()
        return out


# The delta frame's template is cut from a sample event's JSON at these two places.
_SEQUENCE_KEY = '"sequence_number":'
_SEQUENCE_ZERO = _SEQUENCE_KEY + "0"
_DELTA_KEY = ',"delta":'
_DELTA_EMPTY = _DELTA_KEY + '""'

# The text delta events: what every token of a streamed body becomes.
_DELTA_CLASSES = frozenset(kind.delta for kind in KINDS.values() if kind.delta is not None)


class _DeltaFrames:
    """Delta events written from templates: per (class, item, reasoning names), the frame around the
    sequence number and the text, cut from `_frame` of a sample (so the bytes are the model's own).

    Only an event that holds exactly what the bridge gives a delta takes this path: its fields set are
    the required ones (no `logprobs`, no `obfuscation` given), nothing extra, values of their plain types.
    """

    _LIMIT = 1024  # templates kept (one per streamed item); past it, they are made again

    def __init__(self) -> None:
        self._templates: dict[tuple[Any, ...], tuple[str, str]] = {}
        self._escaped: dict[str, str] = {}
        self._required = {cls: frozenset(n for n, f in cls.model_fields.items() if f.is_required()) | {"type"}
                          for cls in _DELTA_CLASSES}  # fmt: skip

    def frame(self, event: StreamingEvent, names: ReasoningNames) -> str | None:
        cls = type(event)
        values = event.__dict__
        if event.__pydantic_extra__ or event.__pydantic_fields_set__ != self._required[cls]:
            return None
        sequence_number, text, item_id = values["sequence_number"], values["delta"], values["item_id"]
        output_index, content_index = values["output_index"], values.get("content_index", 0)
        if not (type(sequence_number) is int and type(text) is str and type(item_id) is str
                and type(output_index) is int and type(content_index) is int):  # fmt: skip
            return None
        key = (cls, item_id, output_index, content_index, names)
        parts = self._templates.get(key)
        if parts is None:
            parts = self._template(event, names)
            if parts is None:
                return None
            if len(self._templates) >= self._LIMIT:
                self._templates.clear()
            self._templates[key] = parts
        escaped = self._escaped.get(text)
        if escaped is None:
            if len(self._escaped) >= 8 * self._LIMIT:
                self._escaped.clear()
            escaped = self._escaped[text] = _json_string(text)
        return f"{parts[0]}{sequence_number}{parts[1]}{escaped}}}\n\n"

    @staticmethod
    def _template(event: StreamingEvent, names: ReasoningNames) -> tuple[str, str] | None:
        sample = event.model_copy(update={"sequence_number": 0, "delta": ""})
        whole = _frame(sample, names)
        head, found, rest = whole.partition(_SEQUENCE_ZERO)
        middle, found_delta, end = rest.rpartition(_DELTA_EMPTY)
        if not found or not found_delta or end != "}\n\n":
            return None  # not the shape the template assumes: the serializer writes this one
        return head + _SEQUENCE_KEY, middle + _DELTA_KEY


_DELTA_FRAMES = _DeltaFrames()


class SSEStreamer:
    """Completion tokens (or text) → SSE text, for servers: `start`, `feed`, `feed_text`, `finish`, `fail`.

    Each call returns the SSE text of the events it caused ("" when none); `finish` and `fail` end it
    with `data: [DONE]`. The events are those `ResponseStreamer` yields, written as `to_sse` writes
    them, but a delta's frame is made from its text without building the typed event.
    """

    def __init__(
        self,
        encoding: HarmonyEncoding,
        request: CreateResponseBody | None = None,
        *,
        reasoning_names: ReasoningNames = "spec",
        **options: Any,
    ) -> None:
        self._frames = SSESink(reasoning_names)
        self._builder = ResponseBuilder(encoding, request, self._frames, **options)
        self._feed_token = self._builder.feed_token

    @property
    def builder(self) -> ResponseBuilder:
        """The state machine behind the stream (its response id, repairs and snapshot)."""
        return self._builder

    def start(self) -> str:
        self._builder.start()
        return self._frames.take()

    def feed(self, token: int) -> str:
        frame: str | None = self._feed_token(token)
        if frame is not None:  # a delta from the fast path: no other event came with it
            return frame
        return self._frames.take()

    def feed_text(self, chunk: str) -> str:
        self._builder.feed_text(chunk)
        return self._frames.take()

    def finish(self, stopped: bool | None = None) -> str:
        done = not self._builder.finished
        self._builder.finish(stopped)
        return self._frames.take() + (DONE_FRAME if done else "")

    def fail(self, message: str, code: str = _spec.ERROR_MODEL_OUTPUT_INVALID, error_type: str | None = None) -> str:
        done = not self._builder.finished
        self._builder.fail(message, code, error_type)
        return self._frames.take() + (DONE_FRAME if done else "")


def stream_sse(
    completion: Completion,
    encoding: HarmonyEncoding,
    request: CreateResponseBody | None = None,
    *,
    reasoning_names: ReasoningNames = "spec",
    stopped: bool | None = None,
    **options: Any,
) -> Iterator[str]:
    """The SSE text for a completion given as token ids or text chunks: the same bytes as
    `to_sse(stream_response(...))`, produced without a typed event per delta. Yields no empty strings."""
    streamer = SSEStreamer(encoding, request, reasoning_names=reasoning_names, **options)
    yield streamer.start()
    for text in feed_all(completion, streamer.feed, streamer.feed_text):
        if text:
            yield text
    yield streamer.finish(stopped)


class SSEError(ValueError):
    """Malformed or cut SSE text: `line` is the 1-based line, `events` what was read before the problem."""

    def __init__(self, line: int, message: str, events: list[StreamingEvent] | None = None) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.events = events if events is not None else []


_LINE_END_RE = re.compile("\r\n|\r|\n")
_BOM = "\ufeff"


def _quoted(text: str) -> str:
    """A name or a line shown in an error: as its JSON text (the spec's `{name:json}` form)."""
    return json.dumps(text, ensure_ascii=False)


def _event(number: int, name: str | None, payload: str) -> StreamingEvent:
    """One event's `data` (on lines from `number`) as a typed event; every problem an `SSEError`."""
    try:
        raw = load_json(payload, "data")
    except JSONInputError as exc:
        raise SSEError(number, str(exc)) from None  # `data: not valid JSON`, or the path of a problem
    if not isinstance(raw, dict):
        raise SSEError(number, f"data: expected a JSON object (an event), found {found(raw)}")
    kind = raw.get("type")
    if not isinstance(kind, str):
        raise SSEError(number, f"data.type: expected a string, found {found(kind)}")
    if kind in _FROM_OPENAI:
        raw["type"] = kind = _FROM_OPENAI[kind]
    if name is not None and _FROM_OPENAI.get(name, name) != kind:
        raise SSEError(number, f"event name {_quoted(name)} differs from the body's type {_quoted(kind)}")
    try:
        return StreamingEventAdapter.validate_python(raw)
    except ValidationError as exc:
        problem = explain(exc, raw)
        raise SSEError(number, f"{problem.path('data')}: {problem.message} (event {_quoted(kind)})") from None


def parse_sse(lines: Iterable[str] | str) -> list[StreamingEvent]:
    """Read an Open Responses event stream (`to_sse` output, either naming of reasoning events) into typed events.

    Takes the text whole, as lines or as chunks holding several lines, and reads it by the WHATWG
    event-stream rules: a leading byte-order mark is skipped; lines end with CRLF, LF or CR; `:` starts a
    comment; a field without a colon has an empty value; `data` lines join with newlines; `id` and
    `retry` are accepted (this reader does not reconnect, so their values are not used); a blank line
    dispatches the event. The stream ends with `data: [DONE]`.

    Where WHATWG has a reader silently drop text, this one raises `SSEError` naming the line instead,
    with the events read so far in `.events`: an unknown field, an `event` without data, an `id` holding
    NUL or a `retry` that is not digits, a last event with no blank line after it, a stream cut before
    `[DONE]`, and anything but blank lines and comments after it. So does data that is not a JSON event
    (JSON within `json_input`'s limits, an object whose `type` names a spec event, valid against it).
    """
    text = lines if isinstance(lines, str) else "".join(lines)
    text = text.removeprefix(_BOM)
    parts = _LINE_END_RE.split(text)
    if parts[-1] == "":
        parts.pop()  # the text ends with a line end: no unterminated last line
    events: list[StreamingEvent] = []
    name: str | None = None
    data: list[str] = []
    first = 0  # the line of the pending event's first field
    data_line = 0  # the line of its first `data` field
    done = 0  # the line of `data: [DONE]` once dispatched
    number = 0
    try:
        for number, line in enumerate(parts, start=1):
            if line == "":
                if data:
                    payload = "\n".join(data)
                    if done:
                        raise SSEError(number - 1, f"an event after data: {DONE} (line {done})")
                    if payload == DONE:
                        done = first
                    else:
                        events.append(_event(data_line, name, payload))
                elif name is not None:
                    raise SSEError(first, f"event {_quoted(name)} has no data")
                name, data, first, data_line = None, [], 0, 0
                continue
            if line.startswith(":"):
                continue  # a comment
            field, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            first = first or number
            if field == "data":
                data_line = data_line or number
                data.append(value)
            elif field == "event":
                name = value or None
            elif field == "id":
                if "\0" in value:
                    raise SSEError(number, "an id holding NUL, which readers ignore")
            elif field == "retry":
                if not value.isascii() or not value.isdigit():
                    raise SSEError(number, f"retry expects a number of milliseconds, found {_quoted(value[:40])}")
            else:
                raise SSEError(number, f"not an SSE field: {_quoted(line[:40])} (fields: data, event, id, retry)")
        if first:
            raise SSEError(first, "the stream ends inside an event: no blank line after it, so it is never dispatched")
        if not done:
            raise SSEError(number, f"the stream ends before data: {DONE}: it was cut")
    except SSEError as exc:
        exc.events = events
        raise
    return events
