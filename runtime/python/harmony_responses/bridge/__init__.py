"""Open Responses on top of Harmony, by responsibility.

- `request`: an Open Responses request → a Harmony conversation (and the 400s it can raise);
- `items`: the completion → output items and the ordered event stream (the item/event state machine);
- `sse`: the event stream's wire form, written and read back;
- `chat`: the Chat Completions shapes of a response and of its event stream.
"""

from __future__ import annotations

from .chat import chat_completion_chunks, to_chat_completion
from .items import (
    ResponseStreamer,
    build_response,
    counting_ids,
    random_id,
    response_snapshot,
    stream_response,
    tokens_from_text,
)
from .request import RequestError, ToolPolicy, parse_request, request_to_conversation, tool_policy
from .sse import DONE, OPENAI_REASONING_EVENTS, SSEError, event_json, parse_sse, to_sse

__all__ = [
    "DONE",
    "OPENAI_REASONING_EVENTS",
    "RequestError",
    "ResponseStreamer",
    "SSEError",
    "ToolPolicy",
    "build_response",
    "chat_completion_chunks",
    "counting_ids",
    "event_json",
    "parse_request",
    "parse_sse",
    "random_id",
    "request_to_conversation",
    "response_snapshot",
    "stream_response",
    "to_chat_completion",
    "to_sse",
    "tokens_from_text",
    "tool_policy",
]
