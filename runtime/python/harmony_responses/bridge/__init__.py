"""Open Responses on top of Harmony, by responsibility.

- `request`: an Open Responses request → a Harmony conversation (and the 400s it can raise);
- `items`: the completion → output items and the ordered event stream (the item/event state machine);
- `sse`: the event stream's wire form, written and read back;
- `chat`: the Chat Completions shapes of a response and of its event stream.
"""

from __future__ import annotations

from .chat import ChatChunks, chat_completion_chunks, to_chat_completion
from .items import (
    EventSink,
    ResponseBuilder,
    ResponseStreamer,
    Status,
    build_response,
    counting_ids,
    random_id,
    stream_response,
    tokens_from_text,
)
from .request import (
    NOTHING_MORE,
    Capabilities,
    CompactionReader,
    ConversationParts,
    HostedTools,
    ItemMessages,
    KnownCalls,
    ReasoningReader,
    RequestError,
    ToolCall,
    Verbatim,
    check_supported,
    conversation_parts,
    items_to_messages,
    parse_request,
    plan_tools,
    request_to_conversation,
    split_tools,
    tool_policy,
    unavailable_tools,
)
from .resource import response_snapshot
from .sse import (
    DONE,
    DONE_FRAME,
    OPENAI_REASONING_EVENTS,
    SSEError,
    SSESink,
    SSEStreamer,
    event_json,
    frame,
    parse_sse,
    stream_sse,
    to_sse,
)
from .tools import ToolPlan, ToolPolicy

__all__ = [
    "ChatChunks",
    "DONE",
    "EventSink",
    "ItemMessages",
    "KnownCalls",
    "NOTHING_MORE",
    "Capabilities",
    "CompactionReader",
    "ReasoningReader",
    "ConversationParts",
    "HostedTools",
    "OPENAI_REASONING_EVENTS",
    "RequestError",
    "ResponseBuilder",
    "ResponseStreamer",
    "SSEError",
    "SSESink",
    "DONE_FRAME",
    "SSEStreamer",
    "Status",
    "ToolCall",
    "ToolPlan",
    "ToolPolicy",
    "Verbatim",
    "build_response",
    "chat_completion_chunks",
    "check_supported",
    "conversation_parts",
    "counting_ids",
    "event_json",
    "frame",
    "items_to_messages",
    "parse_request",
    "plan_tools",
    "parse_sse",
    "random_id",
    "request_to_conversation",
    "response_snapshot",
    "stream_response",
    "stream_sse",
    "to_chat_completion",
    "to_sse",
    "tokens_from_text",
    "split_tools",
    "tool_policy",
    "unavailable_tools",
]
