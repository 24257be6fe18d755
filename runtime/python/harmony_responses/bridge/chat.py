"""Chat Completions: an Open Responses response or event stream in the `chat.completion` shapes.

`content` is the turn's visible text: its preambles and its answer, one message item each, joined with a new
line (as vLLM does), so that `"Let me look that up."` and `"The answer is 42."` do not run together;
`reasoning_content` its reasoning. A function call is a `tool_calls` entry only once it is complete: a call the
token budget cut (its item `incomplete`, as the response is, `finish_reason` `length`) is no call to run and
is kept in the vendor field `harmony:partial_tool_calls`. Streaming, a call's chunks are held until its item
is done and then sent in the order they came, so a client never sees a call it should not run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .._tables import Role
from .._tables import spec as _spec
from ..types import (
    FunctionCall,
    Message,
    OutputTextContent,
    ReasoningBody,
    ReasoningTextContent,
    ResponseCompletedStreamingEvent,
    ResponseCreatedStreamingEvent,
    ResponseFailedStreamingEvent,
    ResponseFunctionCallArgumentsDeltaStreamingEvent,
    ResponseIncompleteStreamingEvent,
    ResponseOutputItemAddedStreamingEvent,
    ResponseOutputItemDoneStreamingEvent,
    ResponseOutputTextDeltaStreamingEvent,
    ResponseReasoningDeltaStreamingEvent,
    ResponseResource,
    StreamingEvent,
    Usage,
)
from .items import Status


def _chat_id(response_id: str) -> str:
    prefix = _spec.RESPONSE_ID_PREFIX + "_"
    return _spec.CHAT_ID_PREFIX + "_" + response_id.removeprefix(prefix)


_INCOMPLETE = Status.INCOMPLETE.value
_SEPARATOR = _spec.CHAT_VISIBLE_SEPARATOR  # between the visible parts of a turn in `content`
_PARTIAL_CALLS = _spec.CHAT_PARTIAL_CALLS_FIELD  # calls the budget cut: not to be run


def _finish_reason(incomplete: bool, has_calls: bool) -> str:
    if incomplete:
        return _spec.CHAT_FINISH_REASONS["incomplete"]
    return _spec.CHAT_FINISH_REASONS["tool_calls"] if has_calls else _spec.CHAT_FINISH_REASONS["stop"]


def to_chat_completion(response: ResponseResource) -> dict[str, Any]:
    """The response as a Chat Completions object: `content`, `reasoning_content`, `tool_calls`, `finish_reason`."""
    content: list[str] = []  # one text per message item
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    partial: list[dict[str, Any]] = []
    for item in response.output:
        if isinstance(item, Message):
            text = "".join(p.text for p in item.content if isinstance(p, OutputTextContent))
            if text:
                content.append(text)
        elif isinstance(item, ReasoningBody):
            reasoning += [p.text for p in item.content or [] if isinstance(p, ReasoningTextContent)]
        elif isinstance(item, FunctionCall):
            call = {
                "id": item.call_id,
                "type": "function",
                "function": {"name": item.name, "arguments": item.arguments},
            }
            (partial if item.status == _INCOMPLETE else calls).append(call)
    finish = _finish_reason(response.status == _INCOMPLETE, bool(calls))
    message: dict[str, Any] = {
        "role": Role.ASSISTANT.value,
        "content": _SEPARATOR.join(content) or None,  # empty text is no content
        "reasoning_content": "".join(reasoning) or None,
    }
    if calls:
        message["tool_calls"] = calls
    if partial:
        message[_PARTIAL_CALLS] = partial
    return {
        "id": _chat_id(response.id),
        "object": _spec.CHAT_OBJECT,
        "created": response.created_at,
        "model": response.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _usage(response.usage) if response.usage is not None else None,
    }


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "completion_tokens_details": {"reasoning_tokens": usage.output_tokens_details.reasoning_tokens},
    }


class ChatChunks:
    """Open Responses events → `chat.completion.chunk` objects, as they come (`feed` may be called per event).

    A role chunk first, `content` / `reasoning_content` / `tool_calls` deltas, a finish chunk (`stop`,
    `tool_calls`, `length`) or, for a failed response, an `error` object (Chat Completions has no failed
    finish reason); with `include_usage`, `close()` gives a last chunk with `usage` and no choices. A message
    item's text that follows another's starts with the new line that separates them in `content`; a function
    call's chunks are held until its item is done (a call the budget cut comes as `harmony:partial_tool_calls`).
    """

    def __init__(self, include_usage: bool = False) -> None:
        self.include_usage = include_usage
        self._head: dict[str, Any] = {}
        self._calls: dict[str, int] = {}  # item id → the index of a complete call among `tool_calls`
        self._held: dict[str, list[str]] = {}  # item id → the argument deltas of a call not done yet
        self._shown = False  # some message item's text was sent
        self._separate = False  # a message item opened after text was sent: its text starts with the separator
        self._usage: dict[str, Any] | None = None

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**self._head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def feed(self, events: Iterable[StreamingEvent]) -> list[dict[str, Any]]:
        out = []
        for event in events:
            if isinstance(event, ResponseOutputTextDeltaStreamingEvent):
                text = event.delta
                if text and self._separate:
                    text, self._separate = _SEPARATOR + text, False
                self._shown = self._shown or bool(text)
                out.append(self._chunk({"content": text}))
            elif isinstance(event, ResponseReasoningDeltaStreamingEvent):
                out.append(self._chunk({"reasoning_content": event.delta}))
            elif isinstance(event, ResponseFunctionCallArgumentsDeltaStreamingEvent):
                self._held[event.item_id].append(event.delta)
            elif isinstance(event, ResponseCreatedStreamingEvent):
                r = event.response
                self._head = {
                    "id": _chat_id(r.id),
                    "object": _spec.CHAT_CHUNK_OBJECT,
                    "created": r.created_at,
                    "model": r.model,
                }
                out.append(self._chunk({"role": Role.ASSISTANT.value, "content": ""}))
            elif isinstance(event, ResponseOutputItemAddedStreamingEvent):
                if isinstance(event.item, FunctionCall):
                    self._held[event.item.id] = []
                elif isinstance(event.item, Message) and self._shown:
                    self._separate = True
            elif isinstance(event, ResponseOutputItemDoneStreamingEvent) and isinstance(event.item, FunctionCall):
                out += self._call_done(event.item)
            elif isinstance(event, (ResponseCompletedStreamingEvent, ResponseIncompleteStreamingEvent)):
                done = event.response
                out.append(self._chunk({}, _finish_reason(done.status == _INCOMPLETE, bool(self._calls))))
                if done.usage is not None:
                    self._usage = _usage(done.usage)
            elif isinstance(event, ResponseFailedStreamingEvent):
                error = event.response.error
                out.append({**self._head, "error": error.model_dump(mode="json") if error is not None else None})
        return out

    def _call_done(self, call: FunctionCall) -> list[dict[str, Any]]:
        """A call's held chunks: as `tool_calls` deltas when it is complete, else as a partial call."""
        deltas = self._held.pop(call.id, [])
        if call.status == _INCOMPLETE:
            function = {"name": call.name, "arguments": call.arguments}
            return [self._chunk({_PARTIAL_CALLS: [{"id": call.call_id, "type": "function", "function": function}]})]
        index = self._calls[call.id] = len(self._calls)
        function = {"name": call.name, "arguments": ""}
        out = [
            self._chunk(
                {"tool_calls": [{"index": index, "id": call.call_id, "type": "function", "function": function}]}
            )
        ]
        for delta in deltas:
            out.append(self._chunk({"tool_calls": [{"index": index, "function": {"arguments": delta}}]}))
        return out

    def close(self) -> list[dict[str, Any]]:
        """The usage chunk (`choices: []`), when it was asked for and the response finished."""
        if self.include_usage and self._usage is not None:
            return [{**self._head, "choices": [], "usage": self._usage}]
        return []


def chat_completion_chunks(events: Iterable[StreamingEvent], include_usage: bool = False) -> Iterator[dict[str, Any]]:
    """The event stream as Chat Completions streaming chunks (`chat.completion.chunk`)."""
    chunks = ChatChunks(include_usage)
    for event in events:
        yield from chunks.feed((event,))
    yield from chunks.close()
