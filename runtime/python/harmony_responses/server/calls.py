"""A function call's header in the model's order.

gpt-oss writes `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>`.

The renderer puts a recipient before the channel (`assistant to=functions.NAME<|channel|>commentary`);
the model writes it after the channel. A completion the server starts for the model (a forced call) and
the demo engine's calls use the model's order.
"""

from __future__ import annotations

from .._tables import spec as _spec
from ..bridge.tools import recipient
from ..encoding import HarmonyEncoding

FUNCTIONS_PREFIX = _spec.HEADER_FUNCTION_NAMESPACE + _spec.HEADER_NAMESPACE_SEPARATOR


def call_header(encoding: HarmonyEncoding, name: str) -> list[int]:
    """The tokens after `<|start|>assistant` that open a call to `functions.NAME` (a qualified `NS.NAME`: a
    namespace tool's function, to `NS.NAME`), up to and with `<|message|>`."""
    words = (
        _spec.CHANNEL_TOOL_CALLS
        + _spec.HEADER_PART_SEPARATOR
        + _spec.HEADER_RECIPIENT_KEYWORD
        + recipient(name)
        + _spec.HEADER_PART_SEPARATOR
    )
    return [
        _spec.TOKEN_CHANNEL,
        *encoding.encode(words, disallowed_special=()),
        _spec.TOKEN_CONSTRAIN,
        *encoding.encode(_spec.CONTENT_TYPE_FUNCTION_ARGUMENTS, disallowed_special=()),
        _spec.TOKEN_MESSAGE,
    ]
