"""Harmony completion → Open Responses: output items, `ResponseResource`, the event stream, SSE, Chat Completions.

The reference-compatible `StreamableParser` reads the completion one token at a time (text chunks are
tokenized on the way in). Each Harmony message becomes one output item:

- `analysis` without recipient → `reasoning` (`content: [reasoning_text]`, `summary: []`);
- `final` (or no channel) → assistant `message` with `output_text`, phase `final_answer`;
- `commentary` without recipient (a preamble) → `message` with phase `commentary`;
- recipient `functions.NAME` on any channel → `function_call` (the name after the `functions.` prefix,
  arguments verbatim, a fresh `call_id`), its arguments streamed as deltas;
- any other recipient (`browser.search`, `python`) → a vendor-prefixed `harmony:tool_call` item.

A completion cut mid-message (budget exhausted) ends `incomplete`; a parse error ends with an `error`
event and `response.failed`.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from .._tables import ItemKind
from .._tables import spec as _spec
from ..encoding import HarmonyEncoding
from ..errors import HarmonyError
from ..models import Role
from ..parser import StreamableParser, StreamState
from ..types import (
    AllowedToolsParam,
    CreateResponseBody,
    ErrorPayload,
    ErrorStreamingEvent,
    ExtensionItem,
    FunctionCall,
    JsonSchemaResponseFormatParam,
    Message,
    OutputTextContent,
    ReasoningBody,
    ReasoningTextContent,
    ResponseCompletedStreamingEvent,
    ResponseContentPartAddedStreamingEvent,
    ResponseContentPartDoneStreamingEvent,
    ResponseCreatedStreamingEvent,
    ResponseFailedStreamingEvent,
    ResponseFunctionCallArgumentsDeltaStreamingEvent,
    ResponseFunctionCallArgumentsDoneStreamingEvent,
    ResponseIncompleteStreamingEvent,
    ResponseInProgressStreamingEvent,
    ResponseOutputItemAddedStreamingEvent,
    ResponseOutputItemDoneStreamingEvent,
    ResponseOutputTextDeltaStreamingEvent,
    ResponseOutputTextDoneStreamingEvent,
    ResponseReasoningDeltaStreamingEvent,
    ResponseReasoningDoneStreamingEvent,
    ResponseResource,
    SpecificFunctionParam,
    StreamingEvent,
)

_FUNCTIONS_PREFIX = _spec.HEADER_FUNCTION_NAMESPACE + "."
_SPECIALS = tuple(sorted(_spec.NAMED_TOKENS, key=len, reverse=True))
_SPECIAL_OPEN = "<|"
_CONSTRAIN = _spec.SPELLING_CONSTRAIN
_CONTENT = StreamState.CONTENT
_TURN_ENDS = frozenset(_spec.STOP_TOKENS_FOR_ASSISTANT_ACTIONS)  # <|call|>, <|return|>: sampling stops
EXTENSION_TOOL_CALL = _spec.ITEM_KINDS[ItemKind.TOOL_CALL][
    "type"
]  # the vendor-prefixed item type for non-function tool calls
IdFactory = Callable[[str], str]
_PHASES: dict[str, str] = _spec.ITEM_KINDS[ItemKind.MESSAGE]["phases"]
Status = Literal["in_progress", "completed", "incomplete"]


def random_id(prefix: str) -> str:
    """`fc_…`, `msg_…`, `rs_…`, `call_…`, `resp_…` ids: the prefix and 24 random hex digits."""
    return f"{prefix}_{secrets.token_hex(12)}"


def counting_ids() -> IdFactory:
    """Deterministic ids (`msg_0001`, …), one counter per prefix: for tests and goldens."""
    counters: dict[str, itertools.count[int]] = {}

    def make(prefix: str) -> str:
        return f"{prefix}_{next(counters.setdefault(prefix, itertools.count(1))):04d}"

    return make


def tokens_from_text(chunks: Iterable[str], encoding: HarmonyEncoding) -> Iterator[int]:
    """Tokenize streamed completion text, holding back a chunk's tail that may be half a control token."""
    pending = ""
    for chunk in chunks:
        pending += chunk
        cut = pending.rfind(_SPECIAL_OPEN)
        if cut == -1 and pending.endswith(_SPECIAL_OPEN[0]):
            cut = len(pending) - 1
        if cut != -1 and any(s.startswith(pending[cut:]) for s in _SPECIALS) and pending[cut:] not in _SPECIALS:
            ready, pending = pending[:cut], pending[cut:]
        else:
            ready, pending = pending, ""
        if ready:
            yield from encoding.encode(ready, allowed_special="all")
    if pending:
        yield from encoding.encode(pending, allowed_special="all")


# Text-like items: their content part (empty when added, full when done) and the event ending their text.
_TEXT_PARTS: dict[
    str, tuple[Callable[[str], Any], type[ResponseOutputTextDoneStreamingEvent | ResponseReasoningDoneStreamingEvent]]
] = {
    "message": (lambda text: OutputTextContent(text=text, annotations=[]), ResponseOutputTextDoneStreamingEvent),
    "reasoning": (lambda text: ReasoningTextContent(text=text), ResponseReasoningDoneStreamingEvent),
}

_DELTA_EVENTS: dict[str, type[StreamingEvent]] = {
    "message": ResponseOutputTextDeltaStreamingEvent,
    "reasoning": ResponseReasoningDeltaStreamingEvent,
    "function_call": ResponseFunctionCallArgumentsDeltaStreamingEvent,
}
_DELTA_TYPE_NAMES: dict[type[StreamingEvent], str] = {
    cls: cls.model_fields["type"].default for cls in _DELTA_EVENTS.values()
}
_OPTIONAL_NONE = {
    cls: {name: None for name, f in cls.model_fields.items() if not f.is_required() and f.default is None}
    for cls in _DELTA_EVENTS.values()
}


class _DeltaFactory:
    """Builds one item's delta events without validation (the values come from the parser, already typed).

    An event is equal to `cls(**values)`: same fields, fields-set and (empty) extras. Streaming creates
    one per token, where validating would cost more than parsing the token.
    """

    __slots__ = ("cls", "template", "fields_set")

    def __init__(self, cls: type[StreamingEvent], item_id: str, output_index: int) -> None:
        self.cls = cls
        values: dict[str, Any] = {"type": _DELTA_TYPE_NAMES[cls], "sequence_number": 0, "item_id": item_id,
                                  "output_index": output_index}  # fmt: skip
        if "content_index" in cls.model_fields:
            values["content_index"] = 0
        values["delta"] = ""
        self.fields_set = frozenset(values)
        self.template = {**values, **_OPTIONAL_NONE[cls]}

    def __call__(self, sequence_number: int, delta: str) -> StreamingEvent:
        cls = self.cls
        event = cls.__new__(cls)
        values = self.template.copy()
        values["sequence_number"] = sequence_number
        values["delta"] = delta
        object.__setattr__(event, "__dict__", values)
        object.__setattr__(event, "__pydantic_fields_set__", set(self.fields_set))
        object.__setattr__(event, "__pydantic_extra__", {})
        object.__setattr__(event, "__pydantic_private__", None)
        return event


@dataclass
class _Item:
    kind: ItemKind
    id: str
    output_index: int
    channel: str | None
    recipient: str | None
    call_id: str | None = None
    name: str | None = None
    text: list[str] = field(default_factory=list)
    delta: _DeltaFactory | None = None

    def body(self, status: Status) -> Any:
        text = "".join(self.text)
        if self.kind == "reasoning":
            content: list[Any] = [ReasoningTextContent(text=text)] if status != "in_progress" else []
            return ReasoningBody(id=self.id, summary=[], content=content)
        if self.kind == "message":
            phase: Any = _PHASES["preamble"] if self.channel == _spec.CHANNEL_PREAMBLE else _PHASES["answer"]
            parts: list[Any] = [OutputTextContent(text=text, annotations=[])] if status != "in_progress" else []
            return Message(id=self.id, status=status, role="assistant", content=parts, phase=phase)
        if self.kind == "function_call":
            return FunctionCall(
                id=self.id, call_id=self.call_id or "", name=self.name or "", arguments=text, status=status
            )
        return ExtensionItem.model_validate(
            {
                "type": EXTENSION_TOOL_CALL,
                "id": self.id,
                "recipient": self.recipient,
                "channel": self.channel,
                "arguments": text,
                "status": status,
            }
        )


def _tool_choice(body: CreateResponseBody | None) -> Any:
    choice = body.tool_choice if body is not None else None
    if choice is None:
        return "auto"
    if isinstance(choice, SpecificFunctionParam):
        return {"type": "function", "name": choice.name}
    if isinstance(choice, AllowedToolsParam):
        return {
            "type": "allowed_tools",
            "tools": [{"type": "function", "name": t.name} for t in choice.tools],
            "mode": choice.mode or "auto",
        }
    return choice


def _text_field(body: CreateResponseBody | None) -> dict[str, Any]:
    fmt = body.text.format if body is not None and body.text is not None else None
    out: dict[str, Any] = {"format": {"type": "text"}}
    if isinstance(fmt, JsonSchemaResponseFormatParam):
        out["format"] = {
            "type": "json_schema",
            "name": fmt.name or "",
            "description": fmt.description,
            "schema": None,  # the spec's ResponseResource echoes no schema (`type: null`)
            "strict": bool(fmt.strict),
        }
    if body is not None and body.text is not None and body.text.verbosity is not None:
        out["verbosity"] = body.text.verbosity
    return out


def response_snapshot(
    body: CreateResponseBody | None,
    *,
    response_id: str,
    created_at: int,
    model: str,
    status: str,
    output: list[Any],
    usage: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
    incomplete_reason: str | None = None,
    completed_at: int | None = None,
) -> ResponseResource:
    """A full `ResponseResource` (all 31 keys) echoing the request's settings."""
    b = body if body is not None else CreateResponseBody()
    tools = [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters.model_dump(mode="json") if t.parameters is not None else None,
            "strict": t.strict,
        }
        for t in (b.tools or [])
    ]
    reasoning = None
    if b.reasoning is not None:
        reasoning = {"effort": b.reasoning.effort, "summary": b.reasoning.summary}
    data = {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "completed_at": completed_at,
        "status": status,
        "incomplete_details": {"reason": incomplete_reason} if incomplete_reason else None,
        "model": b.model or model,
        "previous_response_id": None,
        "instructions": b.instructions,
        "output": output,
        "error": error,
        "tools": tools,
        "tool_choice": _tool_choice(b),
        "truncation": b.truncation or "disabled",
        "parallel_tool_calls": True if b.parallel_tool_calls is None else b.parallel_tool_calls,
        "text": _text_field(b),
        "top_p": 1.0 if b.top_p is None else b.top_p,
        "presence_penalty": b.presence_penalty or 0.0,
        "frequency_penalty": b.frequency_penalty or 0.0,
        "top_logprobs": b.top_logprobs or 0,
        "temperature": 1.0 if b.temperature is None else b.temperature,
        "reasoning": reasoning,
        "usage": usage,
        "max_output_tokens": b.max_output_tokens,
        "max_tool_calls": b.max_tool_calls,
        "store": False,
        "background": False,
        "service_tier": "default",
        "metadata": dict(b.metadata) if b.metadata is not None else {},
        "safety_identifier": b.safety_identifier,
        "prompt_cache_key": b.prompt_cache_key,
    }
    return ResponseResource.model_validate(data)


class ResponseStreamer:
    """Turns completion tokens into Open Responses events; `feed(token)` and `finish()` return events.

    `input_tokens` is the prompt's length, for `usage`. Events carry one `sequence_number` counter.
    `role=None` reads a completion that starts with its own `<|start|>`; `stop_at_turn_end=False` keeps
    reading after `<|call|>`/`<|return|>` (a whole transcript; messages not by the assistant become
    `harmony:tool_call` items too, with their recipient).
    """

    def __init__(
        self,
        encoding: HarmonyEncoding,
        request: CreateResponseBody | None = None,
        *,
        model: str = "gpt-oss",
        input_tokens: int = 0,
        response_id: str | None = None,
        created_at: int | None = None,
        ids: IdFactory = random_id,
        clock: Callable[[], float] = time.time,
        role: Role | None = Role.ASSISTANT,
        stop_at_turn_end: bool = True,
    ) -> None:
        self._parser = StreamableParser(encoding, role)
        self._stop_at_turn_end = stop_at_turn_end
        self._request = request
        self._model = model
        self._ids = ids
        self._clock = clock
        self._input_tokens = input_tokens
        self._response_id = response_id or ids(_spec.RESPONSE_ID_PREFIX)
        self._created_at = int(clock()) if created_at is None else created_at
        self._seq = 0
        self._output: list[Any] = []  # finished item bodies
        self._item: _Item | None = None
        self._output_tokens = 0
        self._reasoning_tokens = 0
        self._finished = False
        self._started = False
        self._turn_over = False

    # -- helpers --------------------------------------------------------------------------------

    def _n(self) -> int:
        n = self._seq
        self._seq = n + 1
        return n

    def _usage(self) -> dict[str, Any]:
        return {
            "input_tokens": self._input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self._output_tokens,
            "output_tokens_details": {"reasoning_tokens": self._reasoning_tokens},
            "total_tokens": self._input_tokens + self._output_tokens,
        }

    def snapshot(self, status: str, **extra: Any) -> ResponseResource:
        output = list(self._output)
        if self._item is not None and status != "in_progress":
            output.append(self._item.body("incomplete"))
        return response_snapshot(
            self._request,
            response_id=self._response_id,
            created_at=self._created_at,
            model=self._model,
            status=status,
            output=output,
            **extra,
        )

    def start(self) -> list[StreamingEvent]:
        """`response.created` and `response.in_progress` (sent once, before any item)."""
        if self._started:
            return []
        self._started = True
        snap = self.snapshot("in_progress")
        return [
            ResponseCreatedStreamingEvent(sequence_number=self._n(), response=snap),
            ResponseInProgressStreamingEvent(sequence_number=self._n(), response=snap),
        ]

    def _open(self, out: list[StreamingEvent]) -> None:
        p = self._parser
        channel, recipient = p.current_channel, p.current_recipient
        if recipient is not None and recipient.startswith(_CONSTRAIN):
            recipient = None  # `<|channel|>final <|constrain|>json` is a content type, read as a recipient
        index = len(self._output)
        if recipient is not None and recipient.startswith(_FUNCTIONS_PREFIX):
            item = _Item(
                ItemKind.FUNCTION_CALL,
                self._ids(_spec.ITEM_KINDS[ItemKind.FUNCTION_CALL]["id_prefix"]),
                index,
                channel,
                recipient,
            )
            item.call_id = self._ids(_spec.ITEM_KINDS[ItemKind.FUNCTION_CALL]["call_id_prefix"])
            item.name = recipient[len(_FUNCTIONS_PREFIX) :]
        elif p.current_role not in (Role.ASSISTANT, None) or (
            recipient is not None and recipient != _spec.HEADER_BROADCAST_RECIPIENT
        ):
            item = _Item(
                ItemKind.TOOL_CALL,
                self._ids(_spec.ITEM_KINDS[ItemKind.TOOL_CALL]["id_prefix"]),
                index,
                channel,
                recipient,
            )
        elif channel == _spec.CHANNEL_REASONING:
            item = _Item(
                ItemKind.REASONING,
                self._ids(_spec.ITEM_KINDS[ItemKind.REASONING]["id_prefix"]),
                index,
                channel,
                recipient,
            )
        else:
            item = _Item(
                ItemKind.MESSAGE, self._ids(_spec.ITEM_KINDS[ItemKind.MESSAGE]["id_prefix"]), index, channel, recipient
            )
        self._item = item
        cls = _DELTA_EVENTS.get(item.kind)
        if cls is not None:
            item.delta = _DeltaFactory(cls, item.id, index)
        out.append(
            ResponseOutputItemAddedStreamingEvent(
                sequence_number=self._n(), output_index=index, item=item.body("in_progress")
            )
        )
        text_part = _TEXT_PARTS.get(item.kind)
        if text_part is None:
            return
        out.append(
            ResponseContentPartAddedStreamingEvent(
                sequence_number=self._n(), item_id=item.id, output_index=index, content_index=0, part=text_part[0]("")
            )
        )

    def _delta(self, delta: str, out: list[StreamingEvent]) -> None:
        item = self._item
        assert item is not None
        item.text.append(delta)
        make = item.delta
        if make is not None:  # extension items carry their text in output_item.done only
            n = self._seq
            self._seq = n + 1
            out.append(make(n, delta))

    def _close(self, status: Status, out: list[StreamingEvent]) -> None:
        item = self._item
        assert item is not None
        text = "".join(item.text)
        index = item.output_index
        text_part = _TEXT_PARTS.get(item.kind)
        if text_part is not None:
            make_part, done_event = text_part
            out.append(
                done_event(sequence_number=self._n(), item_id=item.id, output_index=index, content_index=0, text=text)
            )
            out.append(
                ResponseContentPartDoneStreamingEvent(
                    sequence_number=self._n(), item_id=item.id, output_index=index, content_index=0,
                    part=make_part(text),
                )
            )  # fmt: skip
        elif item.kind == "function_call":
            out.append(
                ResponseFunctionCallArgumentsDoneStreamingEvent(
                    sequence_number=self._n(), item_id=item.id, output_index=index, arguments=text
                )
            )
        body = item.body(status)
        out.append(ResponseOutputItemDoneStreamingEvent(sequence_number=self._n(), output_index=index, item=body))
        self._output.append(body)
        self._item = None

    # -- feeding --------------------------------------------------------------------------------

    def feed(self, token: int) -> list[StreamingEvent]:
        """The events one more completion token causes (empty once the response has ended)."""
        if self._finished or self._turn_over:
            return []  # after <|call|> or <|return|> the model's turn is over: later tokens are not output
        out = self.start() if not self._started else []
        p = self._parser
        before = p._state
        try:
            p.process(token)
        except HarmonyError as exc:
            return out + self._fail(str(exc))
        self._output_tokens += 1
        after = p._state
        item = self._item
        if item is not None and item.kind == "reasoning":
            self._reasoning_tokens += 1
        if after is _CONTENT:
            if before is not _CONTENT:
                self._open(out)
                if self._item is not None and self._item.kind == "reasoning":
                    self._reasoning_tokens += 1  # the token that opened the body
            else:
                delta = p.last_content_delta
                if delta:
                    self._delta(delta, out)
        elif before is _CONTENT and item is not None:  # a stop token ended the body
            self._close("completed", out)
            self._turn_over = self._stop_at_turn_end and token in _TURN_ENDS
        return out

    def _fail(self, message: str) -> list[StreamingEvent]:
        self._finished = True
        error = {"code": "model_output_invalid", "message": message}
        payload = ErrorPayload(type="server_error", code=error["code"], message=message, param=None)
        return [
            ErrorStreamingEvent(sequence_number=self._n(), error=payload),
            ResponseFailedStreamingEvent(
                sequence_number=self._n(), response=self.snapshot("failed", error=error, usage=self._usage())
            ),
        ]

    def finish(self) -> list[StreamingEvent]:
        """The closing events: a cut item and `response.incomplete`, or `response.completed`."""
        if self._finished:
            return []
        out = self.start() if not self._started else []
        self._finished = True
        now = int(self._clock())
        if self._item is not None or self._parser.state is StreamState.HEADER:
            if self._item is not None:
                self._close("incomplete", out)
            snap = self.snapshot("incomplete", usage=self._usage(), incomplete_reason="max_output_tokens")
            out.append(ResponseIncompleteStreamingEvent(sequence_number=self._n(), response=snap))
        else:
            snap = self.snapshot("completed", usage=self._usage(), completed_at=now)
            out.append(ResponseCompletedStreamingEvent(sequence_number=self._n(), response=snap))
        return out

    def fail(self, message: str) -> list[StreamingEvent]:
        """End the stream with `error` and `response.failed` (e.g. the model server went away)."""
        if self._finished:
            return []
        return (self.start() if not self._started else []) + self._fail(message)


def _token_stream(completion: Iterable[int] | Iterable[str], encoding: HarmonyEncoding) -> Iterator[int]:
    it = iter(completion)
    first = next(it, None)
    if first is None:
        return
    rest = itertools.chain([first], it)
    if isinstance(first, str):
        yield from tokens_from_text(rest, encoding)  # type: ignore[arg-type]
    else:
        yield from rest


def stream_response(
    completion: Iterable[int] | Iterable[str],
    encoding: HarmonyEncoding,
    request: CreateResponseBody | None = None,
    **options: Any,
) -> Iterator[StreamingEvent]:
    """The typed event stream for a completion given as token ids or text chunks.

    `options` go to `ResponseStreamer` (`model`, `input_tokens`, `response_id`, `created_at`, `ids`).
    """
    streamer = ResponseStreamer(encoding, request, **options)
    yield from streamer.start()
    for token in _token_stream(completion, encoding):
        yield from streamer.feed(token)
    yield from streamer.finish()


def build_response(
    completion: Iterable[int] | Iterable[str],
    encoding: HarmonyEncoding,
    request: CreateResponseBody | None = None,
    **options: Any,
) -> ResponseResource:
    """The final `ResponseResource` for a completion (the non-streaming case)."""
    last: Any = None
    for event in stream_response(completion, encoding, request, **options):
        last = event
    response: ResponseResource = last.response
    return response
