"""Harmony completion → Open Responses output items and their ordered events: the item/event state machine.

`ResponseBuilder` reads the completion with the grammar-driven `HarmonyStreamParser`: lenient by default
(a server never fails a turn on a glitch the parser can repair), strict on request, with the function
names of the request for the repairs that need them. Each message becomes one output item, of the kind
the spec's `ITEM_KINDS` table names:

- a recipient in the function namespace → `function_call` (the name after the namespace, the arguments
  verbatim, a fresh call id), its arguments streamed as deltas; empty arguments become `{}`, and a strict
  tool's arguments are checked against its `parameters` schema (`arguments`; a violation is reported on
  the item and listed among the repairs, never a failure and never a change);
- a recipient in a namespace the spec's table names (the built-in tools: `browser.search`, `python`,
  `container.exec`) → that vendor-prefixed extension item; any other recipient, or a message not by the
  assistant → the generic vendor-prefixed tool-call item. Extension items carry `id`, `type`, `status`,
  `recipient`, `arguments`, `channel` and `content_type`;
- the reasoning channel, or a channel the format does not know (hidden text is never shown) → `reasoning`
  (`content: [reasoning_text]`, `summary: []`);
- anything else → an assistant `message` with `output_text`, its phase by the channel's purpose.

An item keeps the header the model wrote where its kind alone would not render it back so, in the vendor-prefixed
fields the spec names (`harmony:channel`, `harmony:content_type`; null: none): a `function_call` written on another
channel than the tool-calls one or with another content type than the constrained function-arguments type; a
`message` written on another channel than its phase's (the answer with no header at all: null), or with a content
type; a `reasoning` item written with a content type.

Events follow the spec's order (`EVENT_ORDER`). A completion cut mid-message (the budget ran out) ends
`incomplete`; in strict mode a parse error ends with an `error` event and `response.failed`. Every repair
lenient parsing makes is passed to `on_repair` when it happens and listed on the final response in the
vendor-prefixed field named by the spec (`harmony:repairs`), so none is silent.

Where events go is the sink's business: `ResponseStreamer` collects typed events (`stream_response`,
`build_response`); `bridge.sse.SSEStreamer` writes SSE text without building a typed event per delta.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from .._tables import ItemKind, Role
from .._tables import spec as _spec
from .._types_base import SpecModel
from ..encoding import HarmonyEncoding
from ..models import Message as HarmonyMessage
from ..stream import (
    ContentDelta,
    Event,
    HarmonyParseError,
    HarmonyStreamParser,
    MessageEnd,
    MessageStart,
    ParsedMessage,
    Recovered,
    Region,
)
from ..texts import fill
from ..types import (
    CreateResponseBody,
    Error,
    ErrorPayload,
    ExtensionItem,
    FunctionCall,
    ItemField,
    Message,
    OutputTextContent,
    ReasoningBody,
    ReasoningTextContent,
    ResponseResource,
    StreamingEvent,
    Usage,
)
from .arguments import check_arguments
from .resource import response_snapshot, usage
from .tools import NAMESPACE_FIELD, ToolPlan, qualified, read_tools

IdFactory = Callable[[str], str]
RepairHook = Callable[[Recovered], None]
_FUNCTIONS_PREFIX = _spec.HEADER_FUNCTION_NAMESPACE + _spec.HEADER_NAMESPACE_SEPARATOR
_SEPARATOR = _spec.HEADER_NAMESPACE_SEPARATOR
_VALIDATION_FIELD = _spec.RESPONSE_VALIDATION_FIELD
_CHANNEL_FIELD = _spec.RESPONSE_CHANNEL_FIELD  # where an item keeps the header the model wrote, when it must
_CONTENT_TYPE_FIELD = _spec.RESPONSE_CONTENT_TYPE_FIELD
_ANSWER_CHANNEL = _spec.CHANNEL_ANSWER  # the channel of the answer (what a structured output constrains)
_CALL_CHANNEL = _spec.CHANNEL_TOOL_CALLS  # the header a function call is rendered back with, unless it says otherwise
_CALL_CONTENT_TYPE = _spec.SPELLING_CONSTRAIN + _spec.CONTENT_TYPE_FUNCTION_ARGUMENTS
_EMPTY_ARGUMENTS = "{}"  # JSON's empty object: what a call without arguments passes
_SPELLING_OPEN = _spec.SPELLING_OPEN
_SPECIALS = tuple(sorted(_spec.NAMED_TOKENS, key=len, reverse=True))
_ASSISTANT: Any = Role.ASSISTANT.value  # typed as the models' role literal
_SERVER_ERROR = _spec.ERRORS[_spec.ERROR_MODEL_OUTPUT_INVALID]["type"]  # the type of an error in the output


class Status(str, Enum):
    """An item's or a response's status."""

    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    INCOMPLETE = "incomplete"
    FAILED = "failed"

    __hash__ = str.__hash__


def random_id(prefix: str) -> str:
    """`fc_…`, `msg_…`, `rs_…`, `call_…`, `resp_…` ids: the prefix and 24 random hex digits."""
    return f"{prefix}_{secrets.token_hex(12)}"


def counting_ids() -> IdFactory:
    """Deterministic ids (`msg_0001`, …), one counter per prefix: for tests and goldens."""
    counters: dict[str, itertools.count[int]] = {}

    def make(prefix: str) -> str:
        return f"{prefix}_{next(counters.setdefault(prefix, itertools.count(1))):04d}"

    return make


def tokens_from_text(chunks: Iterable[str], encoding: HarmonyEncoding) -> Iterator[int]:
    """Tokenize streamed completion text, holding back a chunk's tail that may be half a control token."""
    pending = ""
    for chunk in chunks:
        pending += chunk
        cut = pending.rfind(_SPELLING_OPEN)
        if cut == -1 and pending.endswith(_SPELLING_OPEN[0]):
            cut = len(pending) - 1
        if cut != -1 and any(s.startswith(pending[cut:]) for s in _SPECIALS) and pending[cut:] not in _SPECIALS:
            ready, pending = pending[:cut], pending[cut:]
        else:
            ready, pending = pending, ""
        if ready:
            yield from encoding.encode(ready, allowed_special="all")
    if pending:
        yield from encoding.encode(pending, allowed_special="all")


# -- the item kinds, from the spec's table ------------------------------------------------------------


def _by_type(classes: Iterable[Any]) -> dict[str, Any]:
    """Model classes by the `type` their instances carry on the wire."""
    out = {}
    for cls in classes:
        tag = cls.model_fields["type"].default if "type" in getattr(cls, "model_fields", {}) else None
        if isinstance(tag, str):
            out[tag] = cls
    return out


def _union_members(alias: Any) -> tuple[Any, ...]:
    """The models of a generated union alias (`TypeAliasType` of an `Annotated` union)."""
    value = getattr(alias, "__value__", alias)
    while typing.get_origin(value) is typing.Annotated:
        value = typing.get_args(value)[0]
    members = []
    for member in typing.get_args(value):
        while typing.get_origin(member) is typing.Annotated:
            member = typing.get_args(member)[0]
        members.append(member)
    return tuple(members)


EVENT_CLASSES: dict[str, Any] = _by_type(_union_members(StreamingEvent))
"""Every streaming event's model, by the event's type (the spec picks them by name, so they are typed `Any`)."""
_PART_CLASSES = _by_type((OutputTextContent, ReasoningTextContent))


Emitted = tuple[tuple[Any, tuple[str, ...]], ...]  # events to send: each one's model and the fields it is given


def _emitted(types: Iterable[str]) -> Emitted:
    """Each event type's model, and those of its fields the builder gives (the model's, in order)."""
    classes = [EVENT_CLASSES[name] for name in types]
    return tuple((cls, tuple(key for key in cls.model_fields if key in _GIVEN)) for cls in classes)


# what the builder knows of an item when it sends its events (`ResponseBuilder._emit`)
_GIVEN = frozenset({"item_id", "output_index", "content_index", "item", "part", "text", "arguments", "logprobs"})


@dataclass(frozen=True)
class KindSpec:
    """One kind of output item, as the spec's `ITEM_KINDS` describes it, with its events from `EVENT_ORDER`:
    those before the repeated one (its deltas) when it opens, the first alone when none repeats, the rest when it
    ends."""

    kind: ItemKind
    type: str
    id_prefix: str
    call_id_prefix: str | None
    part: Callable[[str], Any] | None  # text → the content part, for items that stream text
    delta: Any  # the event class of a piece of text or of arguments, or None
    opening: Emitted  # the events the item opens with
    closing: Emitted  # the events it ends with

    @property
    def streams_text(self) -> bool:
        return self.part is not None


def _part_maker(cls: Any) -> Callable[[str], Any]:
    if cls is OutputTextContent:
        return lambda text: OutputTextContent(text=text, annotations=[])
    return lambda text: cls(text=text)


def _kind_spec(kind: ItemKind) -> KindSpec:
    row, order = _spec.ITEM_KINDS[kind], _spec.EVENT_ORDER[kind]
    at = next((i for i, name in enumerate(order) if name.endswith(_spec.EVENT_REPEATS)), None)
    return KindSpec(
        kind=kind,
        type=row["type"],
        id_prefix=row["id_prefix"],
        call_id_prefix=row["call_id_prefix"],
        part=_part_maker(_PART_CLASSES[row["text"]["part"]]) if row["text"] else None,
        delta=None if at is None else EVENT_CLASSES[order[at].removesuffix(_spec.EVENT_REPEATS)],
        opening=_emitted(order[: 1 if at is None else at]),
        closing=_emitted(order[1 if at is None else at + 1 :]),
    )


KINDS: dict[ItemKind, KindSpec] = {kind: _kind_spec(kind) for kind in ItemKind}
_REASONING_CHANNEL = _spec.CHANNEL_BY_PURPOSE[_spec.ITEM_KINDS[ItemKind.REASONING]["channel_purpose"]]
_KNOWN_CHANNELS = frozenset(_spec.CHANNELS)
_KIND_OF_NAMESPACE: dict[str, ItemKind] = {
    row["namespace"]: ItemKind(kind) for kind, row in _spec.ITEM_KINDS.items() if row["namespace"]
}
_PHASE_OF_CHANNEL: dict[str, Any] = {
    _spec.CHANNEL_BY_PURPOSE[purpose]: phase for purpose, phase in _spec.ITEM_KINDS[ItemKind.MESSAGE]["phases"].items()
}
_DEFAULT_PHASE = _PHASE_OF_CHANNEL[_spec.CHANNEL_ANSWER]
_ADDED = EVENT_CLASSES[_spec.STREAM_ITEM_ADDED]  # a hosted call's item: its events are the caller's
_ITEM_DONE = EVENT_CLASSES[_spec.STREAM_ITEM_DONE]
_CREATED, _IN_PROGRESS = (EVENT_CLASSES[name] for name in _spec.STREAM_OPENING)
_CLOSING = {Status(status): EVENT_CLASSES[name] for status, name in _spec.STREAM_CLOSING.items()}
_ERROR_EVENT = EVENT_CLASSES[_spec.STREAM_ERROR]


def kind_of(start: MessageStart, namespaces: frozenset[str] = frozenset()) -> ItemKind:
    """The kind of item a message becomes, by its recipient, author and channel; a call to a tool of one of the
    request's namespace tools (`namespaces`) is a function call."""
    recipient = start.recipient
    if recipient is not None and recipient.startswith(_FUNCTIONS_PREFIX):
        return ItemKind.FUNCTION_CALL
    if recipient is not None and start.role is Role.ASSISTANT and recipient.split(_SEPARATOR, 1)[0] in namespaces:
        return ItemKind.FUNCTION_CALL
    if start.role is not Role.ASSISTANT:
        return ItemKind.TOOL_CALL
    if recipient is not None and recipient != _spec.HEADER_BROADCAST_RECIPIENT:
        return _KIND_OF_NAMESPACE.get(recipient.split(_SEPARATOR, 1)[0], ItemKind.TOOL_CALL)
    channel = start.channel
    if channel == _REASONING_CHANNEL or (channel is not None and channel not in _KNOWN_CHANNELS):
        return ItemKind.REASONING  # a channel the format does not know is hidden, as reasoning is
    return ItemKind.MESSAGE


@dataclass
class OpenItem:
    """An output item being streamed."""

    spec: KindSpec
    id: str
    output_index: int
    channel: str | None
    recipient: str | None
    content_type: str | None = None
    call_id: str | None = None
    name: str | None = None
    namespace: str | None = None  # a namespace tool's call: the namespace (`name` is the tool's own name)
    validation: dict[str, Any] | None = None  # what checking a call's arguments or an answer found, when they broke it
    logprobs: list[Any] | None = None  # a message's tokens' `LogProb`s, when the request asked for them (the caller's)
    wire: Any = None  # whatever the sink keeps for this item (the SSE sink: its delta frame's pieces)
    held: bool = False  # a call the caller runs itself (a hosted tool): no events until the caller says (`held_call`)
    annotations: list[Any] | None = None  # an answer's annotations (citations), set when it ends
    reasoning: bool = field(init=False)
    streams: bool = field(init=False)

    def __post_init__(self) -> None:
        self.reasoning = self.spec.kind is ItemKind.REASONING
        self.streams = self.spec.delta is not None  # its text or arguments go out as deltas

    def part(self, text: str) -> Any:
        """The item's content part holding `text` (a message's with its tokens' log probabilities, when kept)."""
        if self.logprobs is not None:
            return OutputTextContent(text=text, annotations=list(self.annotations or []), logprobs=self.logprobs)
        if self.annotations:
            return OutputTextContent(text=text, annotations=list(self.annotations))
        assert self.spec.part is not None
        return self.spec.part(text)

    def body(self, status: Status, text: str = "") -> ItemField:
        """The item as the spec's model: empty while in progress, with its whole `text` when it ends."""
        kind = self.spec.kind
        state: Any = status.value  # typed as the models' status literals
        done = status is not Status.IN_PROGRESS
        extra: dict[str, Any] = {}
        if kind is ItemKind.REASONING:
            reasoning: list[Any] = [ReasoningTextContent(text=text)] if done else []
            if self.content_type is not None:
                extra[_CONTENT_TYPE_FIELD] = self.content_type
            return ReasoningBody(id=self.id, summary=[], content=reasoning, **extra)
        if kind is ItemKind.MESSAGE:
            parts: list[Any] = [self.part(text)] if done else []
            phase = _PHASE_OF_CHANNEL.get(self.channel or "", _DEFAULT_PHASE)
            if self.channel not in _PHASE_OF_CHANNEL:  # its phase would render it on another channel (or none)
                extra[_CHANNEL_FIELD] = self.channel
            if self.content_type is not None:
                extra[_CONTENT_TYPE_FIELD] = self.content_type
            if self.validation is not None and done:
                extra[_VALIDATION_FIELD] = self.validation
            return Message(id=self.id, status=state, role=_ASSISTANT, content=parts, phase=phase, **extra)
        if kind is ItemKind.FUNCTION_CALL:
            if self.channel != _CALL_CHANNEL:
                extra[_CHANNEL_FIELD] = self.channel
            if self.content_type != _CALL_CONTENT_TYPE:
                extra[_CONTENT_TYPE_FIELD] = self.content_type
            if self.validation is not None and done:
                extra[_VALIDATION_FIELD] = self.validation
            if self.namespace is not None:
                extra[NAMESPACE_FIELD] = self.namespace
            return FunctionCall(
                id=self.id, call_id=self.call_id or "", name=self.name or "", arguments=text, status=state, **extra
            )
        # A vendor-prefixed item: every key besides `type` is an extra field.
        extension: ExtensionItem = _EXTENSION(
            type=self.spec.type,
            id=self.id,
            status=state,
            recipient=self.recipient,
            arguments=text,
            channel=self.channel,
            content_type=self.content_type,
        )
        return extension


_EXTENSION: Any = ExtensionItem


class Sink(Protocol):
    """Where a builder's events go."""

    def event(self, event: StreamingEvent) -> None: ...

    def delta(self, item: OpenItem, sequence_number: int, text: str) -> None:
        """Keep a delta, after the events kept before it."""

    def hand_delta(self, item: OpenItem, sequence_number: int, text: str) -> Any:
        """Make a delta and return it instead of keeping it (nothing is kept when this is called)."""

    def keep(self, delta: Any) -> None:
        """Keep a delta `hand_delta` made (for a caller of `feed_token` that does not send it itself)."""


@dataclass(frozen=True)
class HeldCall:
    """A call the model ended to a recipient the caller runs itself (`ResponseBuilder.hosted`): no item was emitted for
    it; the caller runs it, emits its item (`hosted_item`, `hosted_event`, `hosted_done`) and continues the turn."""

    recipient: str
    arguments: str
    channel: str | None
    content_type: str | None
    output_index: int  # where its item goes in the output


def _calls_allowed(request: CreateResponseBody | None) -> int | None:
    """How many tool calls the request lets one response make (None: no limit)."""
    if request is None:
        return None
    limits = [n for n in (1 if request.parallel_tool_calls is False else None, request.max_tool_calls) if n]
    return min(limits) if limits else None


class ResponseBuilder:
    """Completion tokens or text → the response's events, sent to `sink` in the spec's order.

    `request` is the request the completion answers (its settings are echoed; its function names
    feed the parser's repairs, its strict tools' schemas check their calls). `input_tokens` is the
    prompt's length, for `usage`. `role=None` reads a completion that starts with its own `<|start|>`;
    by default the completion is read as one turn (several calls, each an item, when the engine did not
    stop at `<|call|>`, up to the request's `max_tool_calls`, and one with `parallel_tool_calls: false`;
    a tool result the model wrote itself cut and reported; nothing after `<|return|>`), and
    `stop_at_turn_end=False` reads a whole transcript. `strict=True` fails the response on the first
    deviation from the grammar instead of repairing it. `stored=True` says the caller keeps the response
    (echoed as `store: true`); `messages()` gives what the model wrote as Harmony messages, for a store.
    `seal_reasoning` seals each ended reasoning item's text, channel and content type into its
    `encrypted_content` (`include: ["reasoning.encrypted_content"]`, see `bridge.encrypted`); `background=True`
    echoes `background: true`. `tool_plan` is the request's tools as a server planned them (`bridge.plan_tools`),
    read here instead of the request's tools.
    """

    def __init__(
        self,
        encoding: HarmonyEncoding,
        request: CreateResponseBody | None,
        sink: Sink,
        *,
        model: str = "gpt-oss",
        input_tokens: int = 0,
        response_id: str | None = None,
        created_at: int | None = None,
        ids: IdFactory = random_id,
        clock: Callable[[], float] = time.time,
        role: Role | None = Role.ASSISTANT,
        stop_at_turn_end: bool = True,
        strict: bool = False,
        tools: Iterable[str] | None = None,
        on_repair: RepairHook | None = None,
        stored: bool = False,
        seal_reasoning: Callable[[str, str | None, str | None], str] | None = None,
        background: bool = False,
        tool_plan: ToolPlan | None = None,
    ) -> None:
        self._seal_reasoning = seal_reasoning
        self._background = background
        plan = tool_plan if tool_plan is not None else read_tools(request)
        self._tool_plan = plan
        names = tools if tools is not None else plan.functions
        self._schemas = plan.strict
        self._namespaces = plan.namespaces
        self._parser_options: tuple[Any, ...] = (
            encoding,
            role,
            "strict" if strict else "lenient",
            names,
            stop_at_turn_end,
            _calls_allowed(request),
        )
        self._parser = self._new_parser()
        self._tokens_before = 0  # tokens read by the parsers of the turn's earlier steps (`next_step`)
        self._feed_body_token = self._parser.feed_body_token
        self._encoding = encoding
        self._sink = sink
        self._request = request
        self._model = model
        self._ids = ids
        self._clock = clock
        self._on_repair = on_repair
        self._input_tokens = input_tokens
        self.answer_check: Callable[[str], dict[str, Any] | None] | None = None
        """Checks a finished answer's text (a structured output's schema): what it returns, when not None, is the
        answer message's validation field (set by the caller; the bridge sets none)."""
        self.hosted: Callable[[str], bool] | None = None
        """Whether a recipient is a tool the caller runs itself (a hosted tool): such a call emits no item when the
        model writes it; once ended it is `held_call` for the caller (set by the caller; the bridge sets none)."""
        self.annotate: Callable[[str], list[Any]] | None = None
        """The annotations of a finished answer's text (citations of pages a hosted tool showed; set by the caller)."""
        self.held_call: HeldCall | None = None
        self.response_id = response_id or ids(_spec.RESPONSE_ID_PREFIX)
        self._created_at = int(clock()) if created_at is None else created_at
        self._seq = 0
        self._output: list[ItemField] = []  # finished items
        self._item: OpenItem | None = None
        self._repairs: list[Recovered] = []
        self._messages: list[ParsedMessage | HarmonyMessage] = []  # the messages ended so far (tool messages: given)
        self._stored = stored
        self._reasoning_tokens = 0  # of the reasoning items closed so far
        self._reasoning_from = 0  # the token that opened the reasoning item being read
        self._text: list[str] = []  # completion text, when it came as text (for usage)
        self._started = False
        self._finished = False
        self._final: ResponseResource | None = None
        self._status = Status.IN_PROGRESS

    def _new_parser(self) -> HarmonyStreamParser:
        encoding, role, mode, names, stop_at_turn_end, calls = self._parser_options
        return HarmonyStreamParser(encoding, role, mode, names, stop_at_turn_end=stop_at_turn_end, max_tool_calls=calls)

    def _tokens_read(self) -> int:
        return self._tokens_before + self._parser.tokens_read

    # -- state ---------------------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def final(self) -> ResponseResource | None:
        """The response its closing event carried (completed, incomplete or failed), once it ended."""
        return self._final

    @property
    def status(self) -> Status:
        return self._status

    @property
    def current_item(self) -> OpenItem | None:
        """The item whose body is being read, if any."""
        return self._item

    @property
    def output(self) -> list[ItemField]:
        """The items finished so far, in order."""
        return list(self._output)

    @property
    def output_tokens(self) -> int:
        """Tokens of the completion read so far (for text input: counted when asked)."""
        return self.usage().output_tokens if self._text else self._tokens_read()

    @property
    def repairs(self) -> list[Recovered]:
        return list(self._repairs)

    def messages(self) -> list[HarmonyMessage]:
        """The Harmony messages of the completion that have ended, as parsed (analysis included): what a
        store keeps so the next turn renders them. `finish` ends an open message (cut by the budget: its
        text so far); after `fail`, a message the engine broke off is not among them."""
        return [m.to_message() if isinstance(m, ParsedMessage) else m for m in self._messages]

    def next_sequence_number(self) -> int:
        n = self._seq
        self._seq = n + 1
        return n

    def snapshot(self, status: Status, **extra: Any) -> ResponseResource:
        """The response as it stands (an open item is included as `incomplete` unless in progress)."""
        output = list(self._output)
        if self._item is not None and status is not Status.IN_PROGRESS:
            text = self._parser.current_content
            output.append(self._sealed(self._item, self._item.body(Status.INCOMPLETE, text), text))
        repairs = [_repair_dict(r) for r in self._repairs] if status is not Status.IN_PROGRESS else None
        return response_snapshot(
            self._request,
            response_id=self.response_id,
            created_at=self._created_at,
            model=self._model,
            status=status.value,
            output=output,
            repairs=repairs,
            stored=self._stored,
            background=self._background,
            tools=self._tool_plan,
            **extra,
        )

    def count_input(self, tokens: int) -> None:
        """More prompt tokens for `usage` (a second engine request continuing the completion)."""
        self._input_tokens += tokens

    def usage(self) -> Usage:
        output_tokens, reasoning_tokens = self._tokens_read(), self._reasoning_tokens
        if self._item is not None and self._item.reasoning and not self._text:
            reasoning_tokens += output_tokens - self._reasoning_from
        if self._text:  # the completion came as text: count its tokens now
            output_tokens = len(self._encoding.encode("".join(self._text), allowed_special="all"))
        return usage(self._input_tokens, output_tokens, reasoning_tokens)

    # -- input ---------------------------------------------------------------------------------------

    def start(self) -> None:
        """`response.created` and `response.in_progress` (sent once, before anything else)."""
        if self._started:
            return
        self._started = True
        snap = self.snapshot(Status.IN_PROGRESS)
        self._sink.event(_CREATED(sequence_number=self.next_sequence_number(), response=snap))
        self._sink.event(_IN_PROGRESS(sequence_number=self.next_sequence_number(), response=snap))

    def feed_token(self, token: int) -> Any:
        """One more completion token. When it is plain text continuing a streamed body (the fast path), its
        delta is made by the sink's `hand_delta` and returned; otherwise the events go to the sink, and
        the result is None."""
        item = self._item  # set only while an item's body is streaming
        if item is not None:
            text = self._feed_body_token(token)
            if text is not None:  # the fast path: plain text continuing the body
                if item.streams:
                    n = self._seq
                    self._seq = n + 1
                    return self._sink.hand_delta(item, n, text)
                return None
        elif self._finished:
            return None
        elif not self._started:
            self.start()
        try:
            events = self._parser.feed_tokens((token,))
        except HarmonyParseError as exc:
            self._fail_parse(exc)
            return
        self._handle(events)
        return None

    def feed_text(self, chunk: str) -> None:
        """A chunk of completion text, control tokens spelled out (for engines that return no ids)."""
        if self._finished:
            return
        if not self._started:
            self.start()
        self._text.append(chunk)
        try:
            events = self._parser.feed_text(chunk)
        except HarmonyParseError as exc:
            self._fail_parse(exc)
            return
        self._handle(events)

    def finish(self, stopped: bool | None = None) -> None:
        """The end of the completion: a cut item and `response.incomplete`, or `response.completed`.

        `stopped` is what the engine said: True, it stopped on a stop token (which it may not have passed
        on, as llama.cpp and Ollama do not): an open message is complete; False, the budget ran out: the
        response is incomplete; None (not known): for token ids, incomplete when the completion ends inside
        a message (engines keep the stop token among the ids). For text, engines leave the stop token's text
        out, so text ending inside a message is no sign of a cut by itself: it is taken as stopped, unless it
        ends where no stop token can end it (inside a header or reasoning, right after a header, or inside a
        call's JSON arguments).
        """
        if self._finished:
            return
        if not self._started:
            self.start()
        region = self._parser.region
        cut = region is Region.BODY or region is Region.HEADER or region is Region.STRIPPED  # inside a message
        cut = cut and (self._tokens_read() > 0 or any(self._text))  # an empty completion is not cut
        if stopped is None:
            stopped = not cut or (bool(self._text) and self._stop_token_may_end_it())
        try:
            events = self._parser.close()
        except HarmonyParseError:  # strict mode, a header cut short: that is the budget's doing, not a failure
            events = []
        self._handle(events, eos_status=Status.COMPLETED if stopped else Status.INCOMPLETE)
        self._finished = True
        if self._item is not None:
            self._close(Status.COMPLETED if stopped else Status.INCOMPLETE, self._parser.current_content)
        if not stopped:
            extra: dict[str, Any] = {"incomplete_reason": _spec.RESPONSE_INCOMPLETE_REASON}
            self._close_response(Status.INCOMPLETE, extra)
        else:
            self._close_response(Status.COMPLETED, {"completed_at": int(self._clock())})

    def _close_response(self, status: Status, extra: dict[str, Any]) -> None:
        self._status = status
        self._final = snap = self.snapshot(status, usage=self.usage(), **extra)
        self._sink.event(_CLOSING[status](sequence_number=self.next_sequence_number(), response=snap))

    def _stop_token_may_end_it(self) -> bool:
        """Whether text that ends inside a message may end there because the engine left out a stop token.

        Not inside reasoning: it ends at `<|end|>`, which is no stop token of the assistant's actions (the ones
        engines sample with), and the turn goes on to a preamble, a call or the answer (a preamble may end a
        turn: models do stop there). Nor in a message cut right after its header, nor inside a header, nor
        inside a call's JSON arguments (the model closes them before `<|call|>`)."""
        item = self._item
        if item is None:  # a header, or text with no control token at all (read as the answer)
            return not self._parser.seen_control
        text = self._parser.current_content.strip()
        if not text:
            return False
        if item.spec.streams_text:
            return not item.reasoning
        if text[0] not in "{[":
            return True
        try:
            json.loads(text)
        except ValueError:
            return False  # cut inside the JSON
        return True

    def fail(self, message: str, code: str = _spec.ERROR_MODEL_OUTPUT_INVALID, error_type: str | None = None) -> None:
        """End with `error` and `response.failed` (the engine went away, or the output is not Harmony).

        `code` and `error_type` are the error's on the wire; `error_type` defaults to the spec's for `code`.
        """
        if self._finished:
            return
        if not self._started:
            self.start()
        self._finished = True
        if error_type is None:
            error_type = _spec.ERRORS[code]["type"] if code in _spec.ERRORS else _SERVER_ERROR
        payload = ErrorPayload(type=error_type, code=code, message=message, param=None)
        self._sink.event(_ERROR_EVENT(sequence_number=self.next_sequence_number(), error=payload))
        self._close_response(Status.FAILED, {"error": Error(code=code, message=message)})

    # -- parser events → item events ----------------------------------------------------------------

    def _fail_parse(self, exc: HarmonyParseError) -> None:
        template = _spec.ERRORS[_spec.ERROR_MODEL_OUTPUT_INVALID]["message"]
        self.fail(fill(template, detail=exc))

    def _handle(self, events: list[Event], eos_status: Status = Status.INCOMPLETE) -> OpenItem | None:
        opened = None
        for event in events:
            if isinstance(event, ContentDelta):
                item = self._item
                if item is not None and item.streams:
                    self._sink.delta(item, self.next_sequence_number(), event.text)
            elif isinstance(event, MessageStart):
                opened = self._open(event)
            elif isinstance(event, MessageEnd):
                self._messages.append(event.message)
                ended_by_stream = event.terminator.value == _spec.PARSE_EOS_TERMINATOR
                self._close(eos_status if ended_by_stream else Status.COMPLETED, event.message.content)
            else:
                self._repairs.append(event)
                if self._on_repair is not None:
                    self._on_repair(event)
        return opened

    def _open(self, start: MessageStart) -> OpenItem:
        spec = KINDS[kind_of(start, self._namespaces)]
        item = OpenItem(
            spec, self._ids(spec.id_prefix), len(self._output), start.channel, start.recipient, start.content_type
        )
        if spec.kind is ItemKind.FUNCTION_CALL:
            item.call_id = self._ids(spec.call_id_prefix or spec.id_prefix)
            to = start.recipient or ""
            if to.startswith(_FUNCTIONS_PREFIX):
                item.name = to[len(_FUNCTIONS_PREFIX) :]
            else:
                item.namespace, _, item.name = to.partition(_SEPARATOR)
        self._item = item
        self._reasoning_from = self._tokens_read() - 1
        hosted = self.hosted
        if hosted is not None and start.role is Role.ASSISTANT and start.recipient and hosted(start.recipient):
            item.held = True  # the caller emits its item once it has run it
            item.streams = False
            return item
        self._added(item)
        return item

    def _added(self, item: OpenItem) -> None:
        part = item.spec.part
        body = item.body(Status.IN_PROGRESS)
        self._emit(item.spec.opening, item, item=body, part=part("") if part is not None else None)

    def _emit(self, events: Emitted, open_item: OpenItem, **values: Any) -> None:
        """Send `events` in order, each given the fields of its model that `values` hold (None: not given), and
        the item's place."""
        values["item_id"], values["output_index"], values["content_index"] = open_item.id, open_item.output_index, 0
        event, get = self._sink.event, values.get
        for cls, fields in events:
            given = {key: value for key in fields if (value := get(key)) is not None}
            event(cls(sequence_number=self.next_sequence_number(), **given))

    def _close(self, status: Status, text: str) -> None:
        item = self._item
        assert item is not None
        spec, index = item.spec, item.output_index
        if item.held:
            if status is Status.COMPLETED:
                self.held_call = HeldCall(item.recipient or "", text, item.channel, item.content_type, index)
                self._item = None
                return
            self._added(item)  # cut short: never run, it ends as the call item the model's message makes
        if spec.kind is ItemKind.FUNCTION_CALL and status is Status.COMPLETED:
            text = self._check_arguments(item, text)
        elif spec.kind is ItemKind.FUNCTION_CALL and status is Status.INCOMPLETE:
            self._repair(
                _spec.RECOVERY_CALL_CUT_BY_BUDGET, fill(_spec.PARSE_DETAIL_CALL_CUT_BY_BUDGET, {"name": item.name})
            )
        elif spec.kind is ItemKind.MESSAGE and item.channel == _ANSWER_CHANNEL:
            if self.answer_check is not None:
                item.validation = self.answer_check(text)
            if self.annotate is not None:
                item.annotations = self.annotate(text)
        if item.reasoning:
            if self._text:  # text input: count the tokens it stands for: <|message|>, the text, the stop
                self._reasoning_tokens += (
                    len(self._encoding.encode(text, disallowed_special=())) + 1 + (status is Status.COMPLETED)
                )
            else:  # from the token that opened the body to the one that closed it
                self._reasoning_tokens += self._tokens_read() - self._reasoning_from
        body = self._sealed(item, item.body(status, text), text)
        part = item.part(text) if spec.part is not None else None
        self._emit(spec.closing, item, item=body, part=part, text=text, arguments=text, logprobs=item.logprobs)
        self._output.append(body)
        self._item = None

    def _sealed(self, item: OpenItem, body: ItemField, text: str) -> ItemField:
        """A reasoning item's body with its `encrypted_content`, when the request included it."""
        if not item.reasoning or self._seal_reasoning is None:
            return body
        return body.model_copy(
            update={"encrypted_content": self._seal_reasoning(text, item.channel, item.content_type)}
        )

    def _check_arguments(self, item: OpenItem, text: str) -> str:
        """A finished call's arguments: `{}` for empty ones (one more delta), and a strict tool's check."""
        name = item.name or ""
        if not text.strip():
            if item.streams:
                self._sink.delta(item, self.next_sequence_number(), _EMPTY_ARGUMENTS)
            text += _EMPTY_ARGUMENTS
            self._repair(_spec.RECOVERY_EMPTY_ARGUMENTS, fill(_spec.PARSE_DETAIL_EMPTY_ARGUMENTS, {"name": name}))
        schema = self._schemas.get(qualified(name, item.namespace))
        if schema is not None:
            found = check_arguments(text, schema)
            if found.valid is not True:
                item.validation = found.to_dict()
                error = found.errors[0]["message"] if found.errors else ""
                detail = fill(_spec.PARSE_DETAIL_ARGUMENTS_INVALID, {"name": name, "item": item.id, "error": error})
                self._repair(_spec.RECOVERY_ARGUMENTS_INVALID, detail)
        return text

    # -- calls the caller runs (hosted tools) ------------------------------------------------------------

    def hosted_item(self, item: ItemField) -> None:
        """`response.output_item.added` for the item of a call the caller runs (at `held_call.output_index`); the
        response's opening events first, when this item opens it (a hosted session's first items)."""
        self.start()
        self._sink.event(_ADDED(sequence_number=self.next_sequence_number(), output_index=len(self._output), item=item))

    def hosted_event(self, event_type: str, **fields: Any) -> None:
        """One event of such an item's (`response.web_search_call.searching`...), its sequence number added."""
        self._sink.event(EVENT_CLASSES[event_type](sequence_number=self.next_sequence_number(), **fields))

    def hosted_done(self, item: ItemField, tool_message: HarmonyMessage | None) -> None:
        """`response.output_item.done` for such an item, and the tool's message after the call among `messages()`
        (None: none)."""
        self._sink.event(
            _ITEM_DONE(sequence_number=self.next_sequence_number(), output_index=len(self._output), item=item)
        )
        self._output.append(item)
        if tool_message is not None:
            self._messages.append(tool_message)
        self.held_call = None

    def next_step(self) -> None:
        """The turn goes on after a tool's message: what comes next is a new completion of the assistant's."""
        self._tokens_before += self._parser.tokens_read
        self._parser = self._new_parser()
        self._feed_body_token = self._parser.feed_body_token

    def _repair(self, rule: str, detail: str) -> None:
        repair = Recovered(rule, detail, self._tokens_read())
        self._repairs.append(repair)
        if self._on_repair is not None:
            self._on_repair(repair)


def _repair_dict(repair: Recovered) -> dict[str, Any]:
    return {"rule": repair.rule, "detail": repair.detail, "position": repair.position, "text": repair.text}


# -- typed events -------------------------------------------------------------------------------------


def _delta_event(cls: Any, item: OpenItem) -> Callable[[int, str], StreamingEvent]:
    """Builds `item`'s delta events without validating them again (the values are the parser's, typed).

    Each event is what `cls.model_construct` would make (the same field values, fields set and extra),
    put together from one sample's state: building a typed event per delta is the typed path's main cost.
    """
    content = {"content_index": 0} if "content_index" in cls.model_fields else {}
    base = {"item_id": item.id, "output_index": item.output_index, **content}
    fields = frozenset({"type", "sequence_number", "delta", *base})
    kind = cls.model_fields["type"].default
    sample = cls.model_construct(set(fields), type=kind, sequence_number=0, delta="", **base)
    state: dict[str, Any] = sample.__dict__
    private = sample.__pydantic_private__
    new, put = object.__new__, object.__setattr__
    if private is not None:  # a model with private attributes: each event gets its own, as model_construct gives

        def construct(sequence_number: int, delta: str) -> StreamingEvent:
            made: StreamingEvent = cls.model_construct(
                set(fields), type=kind, sequence_number=sequence_number, delta=delta, **base
            )
            return made

        return construct

    def make(sequence_number: int, delta: str) -> StreamingEvent:
        values = state.copy()  # every field, in the model's order, as model_construct fills them
        values["sequence_number"] = sequence_number
        values["delta"] = delta
        event: StreamingEvent = new(cls)
        put(event, "__dict__", values)
        put(event, "__pydantic_fields_set__", set(fields))
        put(event, "__pydantic_extra__", {})
        put(event, "__pydantic_private__", private)
        return event

    return make


class EventSink:
    """A sink that keeps typed events until they are taken."""

    def __init__(self) -> None:
        self.events: list[StreamingEvent] = []

    def event(self, event: StreamingEvent) -> None:
        self.events.append(event)

    def keep(self, event: StreamingEvent) -> None:
        """Keep a delta `hand_delta` made (a caller of `ResponseBuilder.feed_token` that wants it kept)."""
        self.events.append(event)

    def delta(self, item: OpenItem, sequence_number: int, text: str) -> None:
        self.events.append(self.hand_delta(item, sequence_number, text))

    def hand_delta(self, item: OpenItem, sequence_number: int, text: str) -> StreamingEvent:
        make = item.wire
        if make is None:
            make = item.wire = _delta_event(item.spec.delta, item)
        event: StreamingEvent = make(sequence_number, text)
        return event

    def take(self) -> list[StreamingEvent]:
        events, self.events = self.events, []
        return events


class NullSink:
    """A sink that keeps nothing: for a caller that wants only the final response (`ResponseBuilder.final`)."""

    def event(self, event: StreamingEvent) -> None:
        pass

    def delta(self, item: OpenItem, sequence_number: int, text: str) -> None:
        pass

    def hand_delta(self, item: OpenItem, sequence_number: int, text: str) -> None:
        return None

    def keep(self, delta: object) -> None:
        pass


class ResponseStreamer:
    """Completion tokens (or text) → typed Open Responses events: `feed`, `feed_text`, `finish`, `fail`.

    Each call returns the events it caused, in order; the options are `ResponseBuilder`'s.
    """

    def __init__(self, encoding: HarmonyEncoding, request: CreateResponseBody | None = None, **options: Any) -> None:
        self._sink = EventSink()
        self._builder = ResponseBuilder(encoding, request, self._sink, **options)

    @property
    def response_id(self) -> str:
        return self._builder.response_id

    @property
    def repairs(self) -> list[Recovered]:
        return self._builder.repairs

    def snapshot(self, status: Status) -> ResponseResource:
        return self._builder.snapshot(status)

    def start(self) -> list[StreamingEvent]:
        self._builder.start()
        return self._sink.take()

    def feed(self, token: int) -> list[StreamingEvent]:
        delta = self._builder.feed_token(token)
        return [delta] if delta is not None else self._sink.take()

    def feed_text(self, chunk: str) -> list[StreamingEvent]:
        self._builder.feed_text(chunk)
        return self._sink.take()

    def finish(self, stopped: bool | None = None) -> list[StreamingEvent]:
        self._builder.finish(stopped)
        return self._sink.take()

    def fail(
        self, message: str, code: str = _spec.ERROR_MODEL_OUTPUT_INVALID, error_type: str | None = None
    ) -> list[StreamingEvent]:
        self._builder.fail(message, code, error_type)
        return self._sink.take()


Completion = Iterable[int] | Iterable[str]


def feed_all(
    completion: Completion, feed_token: Callable[[int], Any], feed_text: Callable[[str], Any]
) -> Iterator[Any]:
    """Feed a completion given as token ids or as text chunks (decided by its first element)."""
    for piece in completion:
        yield feed_text(piece) if isinstance(piece, str) else feed_token(piece)


def stream_response(
    completion: Completion,
    encoding: HarmonyEncoding,
    request: CreateResponseBody | None = None,
    *,
    stopped: bool | None = None,
    **options: Any,
) -> ResponseEvents:
    """The typed event stream for a completion given as token ids or text chunks.

    `stopped` is the engine's finish reason (see `ResponseBuilder.finish`); `options` go to
    `ResponseBuilder` (`model`, `input_tokens`, `response_id`, `created_at`, `ids`, `strict`, `on_repair`, ...).
    Nothing runs before the first event is asked for.
    """
    return ResponseEvents(completion, encoding, request, stopped, options)


class ResponseEvents(Iterator[StreamingEvent]):
    """What `stream_response` returns: an iterator of the typed events, made as they are asked for.

    `to_sse` given one that has not started writes its frames straight from the bridge (the same frames,
    one per event, as framing each typed event gives; see `sse.to_sse`), so the events nobody looks at
    are never built; `take` hands over what that needs and leaves this iterator empty.
    """

    def __init__(
        self,
        completion: Completion,
        encoding: HarmonyEncoding,
        request: CreateResponseBody | None,
        stopped: bool | None,
        options: dict[str, Any],
    ) -> None:
        self._run: tuple[Completion, HarmonyEncoding, CreateResponseBody | None, bool | None, dict[str, Any]] | None
        self._run = (completion, encoding, request, stopped, options)
        self._events: Iterator[StreamingEvent] | None = None

    @property
    def fresh(self) -> bool:
        """No event asked for yet (and not taken)."""
        return self._events is None

    def take(self) -> tuple[Completion, HarmonyEncoding, CreateResponseBody | None, bool | None, dict[str, Any]]:
        """The stream's inputs, for a caller that runs it another way; this iterator then yields nothing."""
        assert self._run is not None and self._events is None
        run, self._run, self._events = self._run, None, iter(())
        return run

    def __iter__(self) -> ResponseEvents:
        return self

    def __next__(self) -> StreamingEvent:
        events = self._events
        if events is None:
            assert self._run is not None
            events = self._events = _typed_events(*self._run)
        return next(events)

    def close(self) -> None:
        """Stop the stream (as a generator's `close`)."""
        events, self._events = self._events, iter(())
        close = getattr(events, "close", None)
        if close is not None:
            close()


def _typed_events(
    completion: Completion,
    encoding: HarmonyEncoding,
    request: CreateResponseBody | None,
    stopped: bool | None,
    options: dict[str, Any],
) -> Iterator[StreamingEvent]:
    streamer = ResponseStreamer(encoding, request, **options)
    yield from streamer.start()
    feed_token, feed_text, take = streamer._builder.feed_token, streamer.feed_text, streamer._sink.take
    for piece in completion:  # ResponseStreamer.feed inlined: this loop runs once per token
        if isinstance(piece, str):
            yield from feed_text(piece)
            continue
        delta = feed_token(piece)
        if delta is not None:
            yield delta
        else:
            yield from take()
    yield from streamer.finish(stopped)


def build_response(
    completion: Completion,
    encoding: HarmonyEncoding,
    request: CreateResponseBody | None = None,
    *,
    stopped: bool | None = None,
    **options: Any,
) -> ResponseResource:
    """The final `ResponseResource` for a completion (the non-streaming case)."""
    last: Any = None
    for event in stream_response(completion, encoding, request, stopped=stopped, **options):
        last = event
    response: ResponseResource = last.response
    return response


__all__ = [
    "EVENT_CLASSES",
    "EventSink",
    "HeldCall",
    "NullSink",
    "KINDS",
    "IdFactory",
    "KindSpec",
    "OpenItem",
    "RepairHook",
    "ResponseBuilder",
    "ResponseEvents",
    "ResponseStreamer",
    "Sink",
    "SpecModel",
    "Status",
    "build_response",
    "counting_ids",
    "feed_all",
    "kind_of",
    "random_id",
    "stream_response",
    "tokens_from_text",
]
