"""The Open Responses event stream as Chat Completions `chat.completion.chunk` objects, written as it comes.

The bridge's `chat_completion_chunks` reads a whole iterable of events; a server writes each engine
output's chunks before the next exists, so this keeps the same shapes with the state on an object:
a role chunk first, `content` / `reasoning_content` / `tool_calls` deltas, a finish chunk (`stop`,
`tool_calls`, `length`) or an `error` chunk, and with `stream_options.include_usage` a last chunk
with `usage` and no choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._tables import spec as _spec
from ..types import (
    FunctionCall,
    ResponseCompletedStreamingEvent,
    ResponseCreatedStreamingEvent,
    ResponseFailedStreamingEvent,
    ResponseFunctionCallArgumentsDeltaStreamingEvent,
    ResponseIncompleteStreamingEvent,
    ResponseOutputItemAddedStreamingEvent,
    ResponseOutputTextDeltaStreamingEvent,
    ResponseReasoningDeltaStreamingEvent,
    StreamingEvent,
)


class ChatChunks:
    """Open Responses events → `chat.completion.chunk` objects, as they come."""

    def __init__(self, include_usage: bool) -> None:
        self.include_usage = include_usage
        self._head: dict[str, Any] = {}
        self._calls: dict[str, int] = {}
        self._usage: dict[str, Any] | None = None

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**self._head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def feed(self, events: Sequence[StreamingEvent]) -> list[dict[str, Any]]:
        out = []
        for event in events:
            if isinstance(event, ResponseOutputTextDeltaStreamingEvent):
                out.append(self._chunk({"content": event.delta}))
            elif isinstance(event, ResponseReasoningDeltaStreamingEvent):
                out.append(self._chunk({"reasoning_content": event.delta}))
            elif isinstance(event, ResponseFunctionCallArgumentsDeltaStreamingEvent):
                index = self._calls[event.item_id]
                out.append(self._chunk({"tool_calls": [{"index": index, "function": {"arguments": event.delta}}]}))
            elif isinstance(event, ResponseCreatedStreamingEvent):
                r = event.response
                self._head = {
                    "id": _spec.MAP_CHAT_ID_PREFIX + "_" + r.id.removeprefix(_spec.MAP_RESPONSE_ID_PREFIX + "_"),
                    "object": _spec.MAP_CHAT_CHUNK_OBJECT,
                    "created": r.created_at,
                    "model": r.model,
                }
                out.append(self._chunk({"role": "assistant", "content": ""}))
            elif isinstance(event, ResponseOutputItemAddedStreamingEvent) and isinstance(event.item, FunctionCall):
                call = event.item
                index = self._calls[call.id] = len(self._calls)
                function = {"name": call.name, "arguments": ""}
                delta = {"tool_calls": [{"index": index, "id": call.call_id, "type": "function", "function": function}]}
                out.append(self._chunk(delta))
            elif isinstance(event, (ResponseCompletedStreamingEvent, ResponseIncompleteStreamingEvent)):
                done = event.response
                if done.status == "incomplete":
                    finish = _spec.MAP_CHAT_FINISH_REASONS_INCOMPLETE
                elif self._calls:
                    finish = _spec.MAP_CHAT_FINISH_REASONS_TOOL_CALLS
                else:
                    finish = _spec.MAP_CHAT_FINISH_REASONS_STOP
                out.append(self._chunk({}, finish))
                if done.usage is not None:
                    u = done.usage
                    self._usage = {
                        "prompt_tokens": u.input_tokens,
                        "completion_tokens": u.output_tokens,
                        "total_tokens": u.total_tokens,
                        "completion_tokens_details": {"reasoning_tokens": u.output_tokens_details.reasoning_tokens},
                    }
            elif isinstance(event, ResponseFailedStreamingEvent):
                error = event.response.error
                out.append({**self._head, "error": error.model_dump(mode="json") if error is not None else None})
        return out

    def close(self) -> list[dict[str, Any]]:
        """The usage chunk (`choices: []`), when the request asked for it and the response finished."""
        if self.include_usage and self._usage is not None:
            return [{**self._head, "choices": [], "usage": self._usage}]
        return []
