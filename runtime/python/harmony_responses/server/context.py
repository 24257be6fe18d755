"""The prompt against the model's context window: `truncation: "auto"` drops the oldest turns, `disabled` refuses.

A prompt fits when its tokens plus `reserve` (the room its output needs) are at most the window
(`--context-window`). A *turn* starts at a user message and runs to the next one; messages before the
first user message are a turn of their own. `auto` keeps the system and developer messages and the
last turn (the one the model answers, with any call and output that follow its user message) and
drops whole turns from the oldest on, as few as fit; `disabled` (the default) gives the spec's 400,
`context_length_exceeded`. Dropping turns never makes a prompt longer (the chain-of-thought rule only
hides more analysis when earlier answers go), so the fewest turns to drop are found by bisection,
rendering the prompt a handful of times, and only when the whole one does not fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._tables import spec as _spec
from ..bridge import ConversationParts, RequestError
from ..encoding import HarmonyEncoding
from ..models import Conversation, Message, Role


@dataclass(frozen=True)
class Fitted:
    """The prompt that fits, and how many turns and messages `auto` dropped to make it fit."""

    prompt: list[int]
    dropped_turns: int = 0
    dropped_messages: int = 0


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """Where each turn of `messages` starts: 0, then every user message after the first message."""
    return [0] + [i for i, m in enumerate(messages) if i > 0 and m.author.role == Role.USER]


Known = Sequence[Sequence[int] | None]


def fit(
    parts: ConversationParts,
    encoding: HarmonyEncoding,
    *,
    window: int,
    reserve: int,
    auto: bool,
    history_rendered: Known | None = None,
) -> Fitted:
    """The rendered prompt of `parts`, made to fit `window` with `reserve` tokens to spare, or `RequestError`.

    `history_rendered`, beside `parts.history`, holds the token ids of history messages already rendered
    (None where unknown): they are used instead of encoding those messages again.
    """
    body = [*parts.history, *parts.turn]
    if history_rendered is None or len(history_rendered) != len(parts.history):
        history_rendered = [None] * len(parts.history)
    known: Known = [*history_rendered, *([None] * len(parts.turn))]
    head: Known = [None] * len(parts.head)

    def render(start: int) -> list[int]:
        """The prompt without the first `start` messages after the head."""
        conversation = Conversation.from_messages([*parts.head, *body[start:]])
        return encoding.render_conversation_for_completion(
            conversation, Role.ASSISTANT, rendered=[*head, *known[start:]]
        )

    prompt = render(0)
    if len(prompt) + reserve <= window:
        return Fitted(prompt)
    if not auto:
        raise RequestError.of(
            _spec.REQUEST_ERROR_CONTEXT_LENGTH_EXCEEDED, "input", tokens=len(prompt), reserve=reserve, window=window
        )
    starts = turn_starts(body)
    last = len(starts) - 1  # dropping this many turns leaves the last one only
    shortest = render(starts[last])
    if last == 0 or len(shortest) + reserve > window:
        raise RequestError.of(
            _spec.REQUEST_ERROR_CONTEXT_LENGTH_EXCEEDED_TRUNCATED,
            "input",
            tokens=len(shortest),
            reserve=reserve,
            window=window,
        )
    low, high, best = 1, last, shortest  # dropping `high` turns fits (`best` is that prompt): find the fewest
    while low < high:
        middle = (low + high) // 2
        candidate = render(starts[middle])
        if len(candidate) + reserve <= window:
            high, best = middle, candidate
        else:
            low = middle + 1
    return Fitted(best, dropped_turns=high, dropped_messages=starts[high])
