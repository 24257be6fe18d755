"""The engine interface: a prompt of token ids and sampling settings in, an async stream of outputs back.

An engine yields `Tokens` (completion token ids) or `Text` (completion text, for engines that return no
ids), then exactly one `Finished`; it raises an `EngineError` when the inference server fails. Closing the
stream (`aclose`, or cancelling the task that iterates it) stops the engine's request: HTTP adapters
close the connection, which the inference servers take as an abort.
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal


class FinishReason(Enum):
    """Why the engine stopped."""

    STOP = "stop"  # a stop token (or the model's end of turn)
    LENGTH = "length"  # the token budget ran out


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampler settings, always explicit: engines' own defaults differ (llama.cpp's are not neutral)."""

    temperature: float = 1.0
    top_p: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A function the prompt declares: its name and JSON Schema parameters."""

    name: str
    parameters: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class EngineRequest:
    """One completion to run.

    `json_schema`, when set, asks the engine to constrain the whole completion to JSON matching it
    (the server sets it when the prompt already ends with a header whose body must be JSON: a forced
    function call's, or the answer's of a structured output, see `server.structured`). `stop_text` holds
    strings the engine may stop at (a hint: the server cuts the stream itself where an engine has no such
    option, or leaves the stop string out of the ids it returns).
    """

    prompt: list[int]
    max_tokens: int
    stop_token_ids: tuple[int, ...]
    sampling: Sampling = field(default_factory=Sampling)
    json_schema: Mapping[str, Any] | None = None
    tools: tuple[ToolSpec, ...] = ()
    stop_text: tuple[str, ...] = ()
    top_logprobs: int | None = None  # None: no log probabilities; N: each token's, with the N most likely beside it


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """A generated token's log probability, and the most likely tokens at its place (`(id, logprob)`, best first)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(slots=True)
class Tokens:
    """Completion token ids, in order; with `logprobs` (one per id) when the request asked for them."""

    ids: list[int]
    logprobs: list[TokenLogprob] | None = None


@dataclass(slots=True)
class Text:
    """Completion text (control tokens spelled out), from engines that return no ids."""

    text: str


@dataclass(frozen=True, slots=True)
class Finished:
    """The end of a completion; `stop_token` is the stop token the engine names, when it names one."""

    reason: FinishReason
    stop_token: int | None = None


EngineOutput = Tokens | Text | Finished


class EngineError(Exception):
    """The inference server failed; `status` is its HTTP status when it answered with one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


class EngineRejected(EngineError):
    """The engine refused the request as malformed (its 4xx): most often a prompt longer than its context."""


class EngineUnavailable(EngineError):
    """The engine cannot be reached, answered 5xx, broke the stream, or ended it without finishing."""


class EngineTimeout(EngineError):
    """The engine did not connect, start, or continue within the timeout."""


@dataclass(frozen=True)
class EngineInfo:
    """What an engine is and can do, for `/health`, `/v1/models` and tool-choice enforcement."""

    kind: str
    target: str
    output: Literal["tokens", "text"]
    json_constraint: bool  # can constrain a completion to a JSON Schema
    logprobs: bool = False  # returns each token's log probability and the most likely tokens beside it


class Engine(ABC):
    """Base of every adapter: `generate` hands out the adapter's stream and keeps count of the running ones."""

    info: EngineInfo

    def __init__(self) -> None:
        self._streams: weakref.WeakSet[AsyncGenerator[EngineOutput, None]] = weakref.WeakSet()

    @property
    def active(self) -> int:
        """Generations started and not yet finished or closed."""
        return sum(1 for stream in list(self._streams) if getattr(stream, "ag_frame", None) is not None)

    def generate(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        """The outputs of one completion; close the iterator (`aclose`) to abort it.

        The adapter's own generator, not a wrapper: streaming costs no extra layer per output.
        """
        stream = self.produce(request)
        self._streams.add(stream)
        return stream

    @abstractmethod
    def produce(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        """The adapter's stream: outputs, then one `Finished`; `EngineError` on failure."""

    async def aclose(self) -> None:  # noqa: B027 - adapters without connections have nothing to release
        """Release connections (called once, at shutdown)."""

    async def check_ready(self) -> str | None:
        """None when the engine can take requests, else why not (for `/ready`; never the engine's address)."""
        return None


class EngineMalformed(EngineUnavailable):
    """The engine answered with output of the wrong shape (valid JSON, but not what its wire format says)."""


SHAPE_ERRORS = (TypeError, AttributeError, KeyError, IndexError, ValueError)
"""What reading a chunk of the wrong shape raises in an adapter (turned into `EngineMalformed`)."""


def malformed(what: str, value: Any = None) -> EngineMalformed:
    """The error for engine output of the wrong shape: what was wrong, and a short excerpt of it."""
    excerpt = "" if value is None else f": {value!r:.120}"
    return EngineMalformed(f"the engine sent output of the wrong shape ({what}){excerpt}")


def token_ids(value: Any, field: str) -> list[int]:
    """`value` when it is a list of token ids, else `EngineMalformed` naming `field`."""
    if type(value) is list:
        for i in value:  # a loop, not all() over a generator: this runs for every chunk of every stream
            if type(i) is not int or i < 0:
                break
        else:
            return value
    raise malformed(f"{field} must be a list of token ids", value)
