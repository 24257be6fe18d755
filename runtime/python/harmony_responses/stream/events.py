"""What the event parser reports: messages as they start, grow and end, repairs, and strict-mode errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .._tables import Role, Terminator
from .._tables import grammar as _grammar
from .._tables import spec as _spec
from ..errors import HarmonyError
from ..models import Author, Message, TextContent
from ..texts import fill

Mode = Literal["strict", "lenient"]
RECOVERY_RULES: dict[str, str] = dict(_spec.RECOVERY_RULES)
"""Every repair lenient mode makes, by the `rule` its `Recovered` event carries."""


def described(rule: str, values: Mapping[str, object], text: str | None = None) -> tuple[str, str]:
    """A repair's detail and the text it sets aside, as the spec's `REPAIRS` table says for `rule`: its detail text
    filled with `values`, and `text`, or else the value the rule sets aside (none: "")."""
    row = _spec.REPAIRS[rule]
    if text is None:
        aside = row["sets_aside"]
        text = str(values[aside]) if aside is not None else ""
    return fill(row["detail"], values), text


class HarmonyParseError(HarmonyError):
    """The input leaves the Harmony grammar (strict mode): what came, what was expected, and where.

    `position` counts tokens or characters, as the input was given (`unit` says which).
    """

    def __init__(self, message: str, position: int, unit: str) -> None:
        self.position = position
        self.unit = unit
        super().__init__(fill(_spec.PARSE_ERR_AT, {"message": message, "unit": unit, "position": position}))


@dataclass(frozen=True, slots=True)
class ParsedMessage:
    """A parsed message: author, header fields, the whole text and how it ended."""

    role: Role
    name: str | None
    channel: str | None
    recipient: str | None
    content_type: str | None
    content: str
    terminator: Terminator

    def to_message(self) -> Message:
        return Message(
            author=Author(role=self.role, name=self.name),
            content=[TextContent(text=self.content)],
            channel=self.channel,
            recipient=self.recipient,
            content_type=self.content_type,
        )

    def to_dict(self) -> dict[str, Any]:
        """The reference's JSON form of the message, plus how it ended (keyed as the grammar names it)."""
        out = self.to_message().to_dict()
        out["role"] = self.role.value
        out[_grammar.RULE_TERMINATOR] = self.terminator.value
        return out


@dataclass(frozen=True, slots=True)
class MessageStart:
    """A header is complete: the body follows."""

    index: int
    role: Role
    name: str | None
    channel: str | None
    recipient: str | None
    content_type: str | None
    type: str = _spec.PARSE_EVENT_START


@dataclass(frozen=True, slots=True)
class ContentDelta:
    """Body text, in input order; the deltas of a message concatenate to its content."""

    index: int
    text: str
    type: str = _spec.PARSE_EVENT_DELTA


@dataclass(frozen=True, slots=True)
class MessageEnd:
    """A message is complete."""

    index: int
    message: ParsedMessage
    terminator: Terminator
    type: str = _spec.PARSE_EVENT_END


@dataclass(frozen=True, slots=True)
class Recovered:
    """Lenient mode repaired the input: which rule (see RECOVERY_RULES), where, and any text set aside."""

    rule: str
    detail: str
    position: int
    text: str = ""
    type: str = _spec.PARSE_EVENT_RECOVERED


Event = MessageStart | ContentDelta | MessageEnd | Recovered


def messages_of(events: list[Event]) -> list[ParsedMessage]:
    """The messages that ended among `events`, in order."""
    return [e.message for e in events if isinstance(e, MessageEnd)]
