"""Typed reads of the values tests look into, each checked, so that mypy knows the type without a `type: ignore`.

`final_response`: the response a stream's terminal event carries. `first_output_text`: the text of an Open Responses
output message. `harmony_text`: the text of a Harmony message. Each raises `AssertionError` naming what it found
when the value is not what the test expects.
"""

from __future__ import annotations

from collections.abc import Sequence

from harmony_responses import Message, TextContent
from harmony_responses.types import (
    ItemField,
    OutputTextContent,
    ResponseCompletedStreamingEvent,
    ResponseFailedStreamingEvent,
    ResponseIncompleteStreamingEvent,
    ResponseResource,
    StreamingEvent,
)
from harmony_responses.types import Message as OutputMessage

TERMINAL_EVENTS = (ResponseCompletedStreamingEvent, ResponseIncompleteStreamingEvent, ResponseFailedStreamingEvent)


def final_response(events: Sequence[StreamingEvent]) -> ResponseResource:
    """The response of the stream's last event, which must be terminal (completed, incomplete or failed)."""
    last = events[-1]
    assert isinstance(last, TERMINAL_EVENTS), f"the stream ends with {last.type}, not with a terminal event"
    return last.response


def first_output_text(item: ItemField) -> str:
    """The text of an output message's first content part (an `output_text` part)."""
    assert isinstance(item, OutputMessage), f"a {item.type} item, not a message"
    part = item.content[0]
    assert isinstance(part, OutputTextContent), f"a {part.type} part, not output_text"
    return part.text


def harmony_text(message: Message) -> str:
    """The text of a Harmony message's first content part (a `TextContent`)."""
    part = message.content[0]
    assert isinstance(part, TextContent), f"{type(part).__name__}, not TextContent"
    return part.text
