"""An oracle for issue 17's promise: text on a channel the format does not know, or that the model addresses to
itself, never reaches an end user (Chat `content`, a `message` output item).

It reads the completion's text on its own, without the parser: a message is the text between a header's
`<|message|>` (or its misspelling `<message|>`) and the next control token; its header is the text before, back to
the previous message's end. A body is hidden when its header's channel word names no known channel
(`<|channel|>thinking`), or when the header addresses the assistant (`to=assistant`), is written by the assistant
(no tool's name first) and is not on the answer channel.
"""

from __future__ import annotations

import re
from typing import Any

CHANNELS = ("analysis", "commentary", "final")
ANSWER = "final"
_STOPS = ("<|end|>", "<|call|>", "<|return|>", "<|start|>")
_MARKER_RE = re.compile(r"<\|message\|>|<message\|>")
_CHANNEL_RE = re.compile(r"<\|channel\|>\s*([^\s<]*)")
_AUTHOR_RE = re.compile(r"<\|start\|>\s*([^\s<]*)")
_BUILTIN = ("browser", "python", "container", "functions")


def _known(word: str) -> bool:
    core = re.sub(r"^[\W_]+|[\W_]+$", "", word).lower()
    return any(core.startswith(channel) for channel in CHANNELS)


def _bodies(completion: str) -> list[tuple[str, bool]]:
    """Each message body of the completion, as written (stripped), and whether it is hidden."""
    out = []
    previous_end = 0
    for match in _MARKER_RE.finditer(completion):
        if match.start() < previous_end:
            continue
        header = completion[previous_end : match.start()]
        for stop in _STOPS[:3]:
            header = header.rsplit(stop, 1)[-1]
        ends = [completion.find(s, match.end()) for s in _STOPS]
        end = min((e for e in ends if e >= 0), default=len(completion))
        body = completion[match.end() : end].strip()
        previous_end = end
        channels = _CHANNEL_RE.findall(header)
        channel = channels[-1] if channels else None
        author = _AUTHOR_RE.findall(header)
        by_tool = bool(author) and ("." in author[-1] or author[-1] in _BUILTIN)
        unknown = channel is not None and channel != "" and not _known(channel)
        to_self = "to=assistant" in header and not by_tool and channel != ANSWER
        if body:
            out.append((body, unknown or to_self))
    return out


def hidden_bodies(completion: str) -> list[str]:
    """The bodies of the completion's hidden messages, as written (stripped)."""
    return [body for body, hidden in _bodies(completion) if hidden]


def _shown(body: str, texts: list[str]) -> bool:
    return any(body == text.strip() or (len(body) >= 8 and body in text) for text in texts)


def assert_hidden_text_not_shown(completion: str, response: dict[str, Any], chat: dict[str, Any]) -> None:
    """No hidden body is a `message` item's text or in the Chat `content`."""
    messages = [
        "".join(part.get("text", "") for part in item.get("content") or [])
        for item in response["output"]
        if item["type"] == "message"
    ]
    content = chat["choices"][0]["message"]["content"] or ""
    # a hidden body that a visible one also holds (`A` on commentary, then `A` on `thinking`) can be told from it
    # by no text: such a body proves nothing either way
    visible = [body for body, hidden in _bodies(completion) if not hidden]
    for body in hidden_bodies(completion):
        if any(body in text for text in visible):
            continue
        assert not _shown(body, messages), (body, completion, messages)
        assert not _shown(body, [content, *content.split("\n")]), (body, completion, content)
