"""harmony_responses: OpenAI's Harmony format and the Open Responses protocol, in pure Python.

The names below are a drop-in for openai-harmony's Python API.
"""

from __future__ import annotations

from importlib.metadata import version as _version

from .encoding import HarmonyEncoding, HarmonyEncodingName, load_harmony_encoding
from .errors import HarmonyError
from .models import (
    Author,
    ChannelConfig,
    Content,
    Conversation,
    DeveloperContent,
    Message,
    ReasoningEffort,
    RenderConversationConfig,
    RenderOptions,
    Role,
    SystemContent,
    TextContent,
    ToolDescription,
    ToolNamespaceConfig,
)
from .parser import StreamableParser, StreamState
from .safety import Leak, detect_leak, escape_control_tokens, escape_control_tokens_json, unescape_control_tokens
from .stream import (
    ContentDelta,
    Event,
    HarmonyParseError,
    HarmonyStreamParser,
    MessageEnd,
    MessageStart,
    ParsedMessage,
    Recovered,
    parse_text,
    parse_tokens,
)
from .tool_namespace import render_tool_namespace, schema_to_typescript

__version__ = _version("harmony-responses")

__all__ = [
    "Author",
    "ChannelConfig",
    "Content",
    "ContentDelta",
    "Conversation",
    "DeveloperContent",
    "Event",
    "HarmonyEncoding",
    "HarmonyEncodingName",
    "HarmonyError",
    "HarmonyParseError",
    "HarmonyStreamParser",
    "Leak",
    "Message",
    "MessageEnd",
    "MessageStart",
    "ParsedMessage",
    "ReasoningEffort",
    "Recovered",
    "RenderConversationConfig",
    "RenderOptions",
    "Role",
    "StreamState",
    "StreamableParser",
    "SystemContent",
    "TextContent",
    "ToolDescription",
    "ToolNamespaceConfig",
    "detect_leak",
    "escape_control_tokens",
    "escape_control_tokens_json",
    "load_harmony_encoding",
    "parse_text",
    "parse_tokens",
    "render_tool_namespace",
    "schema_to_typescript",
    "unescape_control_tokens",
]
