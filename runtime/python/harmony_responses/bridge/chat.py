"""Chat Completions: an Open Responses response or event stream in the `chat.completion` shapes."""

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
    ResponseOutputTextDeltaStreamingEvent,
    ResponseReasoningDeltaStreamingEvent,
    ResponseResource,
    StreamingEvent,
)


def _chat_id(response_id: str) -> str:
    prefix = _spec.RESPONSE_ID_PREFIX + "_"
    return _spec.CHAT_ID_PREFIX + "_" + response_id.removeprefix(prefix)


def _finish_reason(incomplete: bool, has_calls: bool) -> str:
    if incomplete:
        return _spec.CHAT_FINISH_REASONS["incomplete"]
    return _spec.CHAT_FINISH_REASONS["tool_calls"] if has_calls else _spec.CHAT_FINISH_REASONS["stop"]


def to_chat_completion(response: ResponseResource) -> dict[str, Any]:
    """The response as a Chat Completions object: `content`, `reasoning_content`, `tool_calls`, `finish_reason`."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in response.output:
        if isinstance(item, Message):
            content += [p.text for p in item.content if isinstance(p, OutputTextContent)]
        elif isinstance(item, ReasoningBody):
            reasoning += [p.text for p in item.content or [] if isinstance(p, ReasoningTextContent)]
        elif isinstance(item, FunctionCall):
            calls.append(
                {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": item.arguments}}
            )
    finish = _finish_reason(response.status == "incomplete", bool(calls))
    message: dict[str, Any] = {
        "role": Role.ASSISTANT.value,
        "content": "".join(content) if content else None,
        "reasoning_content": "".join(reasoning) if reasoning else None,
    }
    if calls:
        message["tool_calls"] = calls
    usage = response.usage
    return {
        "id": _chat_id(response.id),
        "object": _spec.CHAT_OBJECT,
        "created": response.created_at,
        "model": response.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "completion_tokens_details": {"reasoning_tokens": usage.output_tokens_details.reasoning_tokens},
        }
        if usage is not None
        else None,
    }


def chat_completion_chunks(events: Iterable[StreamingEvent]) -> Iterator[dict[str, Any]]:
    """The event stream as Chat Completions streaming chunks (`chat.completion.chunk`)."""
    head: dict[str, Any] = {}
    calls: dict[str, int] = {}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    for event in events:
        if isinstance(event, ResponseCreatedStreamingEvent):
            r = event.response
            head = {
                "id": _chat_id(r.id),
                "object": _spec.CHAT_CHUNK_OBJECT,
                "created": r.created_at,
                "model": r.model,
            }
            yield chunk({"role": Role.ASSISTANT.value, "content": ""})
        elif isinstance(event, ResponseOutputTextDeltaStreamingEvent):
            yield chunk({"content": event.delta})
        elif isinstance(event, ResponseReasoningDeltaStreamingEvent):
            yield chunk({"reasoning_content": event.delta})
        elif isinstance(event, ResponseOutputItemAddedStreamingEvent) and isinstance(event.item, FunctionCall):
            calls[event.item.id] = len(calls)
            call = event.item
            yield chunk(
                {
                    "tool_calls": [
                        {
                            "index": calls[call.id],
                            "id": call.call_id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
        elif isinstance(event, ResponseFunctionCallArgumentsDeltaStreamingEvent):
            yield chunk({"tool_calls": [{"index": calls[event.item_id], "function": {"arguments": event.delta}}]})
        elif isinstance(event, (ResponseCompletedStreamingEvent, ResponseIncompleteStreamingEvent)):
            done = event.response
            finish = _finish_reason(done.status == "incomplete", bool(calls))
            yield chunk({}, finish)
        elif isinstance(event, ResponseFailedStreamingEvent):
            # Chat Completions has no failed finish reason: streams end with an error object instead.
            error = event.response.error
            yield {**head, "error": error.model_dump(mode="json") if error is not None else None}
