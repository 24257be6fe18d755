"""`--media placeholder`: image and file inputs become a short text marker, since gpt-oss reads text only.

With `--media reject` (the default) the request goes to the bridge unchanged and its 400 names the
content part. With `placeholder`, every `input_image`, `input_file` or `input_video` part of a user message or a
function call output is replaced by an `input_text` part holding the marker below, so clients that
always attach media still get an answer (and the model is told something was left out).
"""

from __future__ import annotations

from typing import Any

from ..types import (
    CreateResponseBody,
    FunctionCallOutputItemParam,
    InputFileContentParam,
    InputImageContentParamAutoParam,
    InputTextContentParam,
    InputVideoContent,
    UserMessageItemParam,
)

# The markers are the server's wording, not Harmony facts.
IMAGE_MARKER = "[image omitted: this model reads text only]"
FILE_MARKER = "[file omitted: this model reads text only]"
NAMED_FILE_MARKER = "[file {name!r} omitted: this model reads text only]"
VIDEO_MARKER = "[video omitted: this model reads text only]"
AUDIO_MARKER = "[audio omitted: this model reads text only]"  # Chat Completions' input_audio parts
_SEPARATOR = "\n"  # between a marker and text it would otherwise touch


def _marker(part: Any) -> Any:
    if isinstance(part, InputImageContentParamAutoParam):
        return InputTextContentParam(text=IMAGE_MARKER)
    if isinstance(part, InputFileContentParam):
        text = NAMED_FILE_MARKER.format(name=part.filename) if part.filename else FILE_MARKER
        return InputTextContentParam(text=text)
    if isinstance(part, InputVideoContent):
        return InputTextContentParam(text=VIDEO_MARKER)
    return part


def _parts(content: Any) -> tuple[Any, bool]:
    """The parts with each media part replaced by its marker, the marker set apart from the text around it (a
    newline where the neighbouring text does not already end or start with white space), so that it reads as a
    note of its own, never glued to a word."""
    if isinstance(content, str):
        return content, False
    parts = [_marker(p) for p in content]
    placed = [a is not b for a, b in zip(parts, content, strict=True)]
    texts = [getattr(p, "text", None) for p in parts]
    for i, is_marker in enumerate(placed):
        if not is_marker:
            continue
        before = getattr(parts[i - 1], "text", None) if i > 0 else None  # as already set apart
        after = texts[i + 1] if i + 1 < len(texts) else None
        text = parts[i].text
        if before and not before[-1].isspace():
            text = _SEPARATOR + text
        if after and not after[0].isspace():
            text = text + _SEPARATOR
        parts[i] = InputTextContentParam(text=text)
    return parts, any(placed)


def with_media_placeholders(body: CreateResponseBody) -> CreateResponseBody:
    """`body` with every image and file input part replaced by its text marker (the same object if none)."""
    if body.input is None or isinstance(body.input, str):
        return body
    items = []
    changed = False
    for item in body.input:
        if isinstance(item, UserMessageItemParam):
            content, hit = _parts(item.content)
            if hit:
                item = item.model_copy(update={"content": content})
        elif isinstance(item, FunctionCallOutputItemParam):
            content, hit = _parts(item.output)
            if hit:
                item = item.model_copy(update={"output": content})
        else:
            hit = False
        changed = changed or hit
        items.append(item)
    return body.model_copy(update={"input": items}) if changed else body
