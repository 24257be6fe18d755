"""The event API for servers: parse Harmony completions from token ids or from text, strictly or leniently.

- `events`: what the parser reports (`MessageStart`, `ContentDelta`, `MessageEnd`, `Recovered`) and its error;
- `lexer`: token ids, text or bytes → control terminals and text;
- `header`: a message header's words → the grammar's terminals, and the lenient repairs of headers;
- `stripped`: text whose control tokens a detokenizer stripped, split into messages as it streams;
- `parser`: `HarmonyStreamParser`, which follows the whole stream with the grammar's LALR tables.
"""

from __future__ import annotations

from .events import (
    RECOVERY_RULES,
    ContentDelta,
    Event,
    HarmonyParseError,
    MessageEnd,
    MessageStart,
    Mode,
    ParsedMessage,
    Recovered,
    messages_of,
)
from .parser import HarmonyStreamParser, Region, parse_text, parse_tokens

__all__ = [
    "RECOVERY_RULES",
    "ContentDelta",
    "Event",
    "HarmonyParseError",
    "HarmonyStreamParser",
    "MessageEnd",
    "MessageStart",
    "Mode",
    "ParsedMessage",
    "Recovered",
    "Region",
    "messages_of",
    "parse_text",
    "parse_tokens",
]
