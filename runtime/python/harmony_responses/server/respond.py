"""Every call the server makes into the bridge, in one place: request → plan → events → wire.

`plan_request` turns a validated `CreateResponseBody` into a `Plan`: the prompt token ids, what the
engine is asked for (budget, sampling, stop tokens, a JSON constraint) and the tool policy.
`ResponseRun` feeds the engine's outputs to the bridge's `ResponseStreamer` and adds what the server
knows and the streamer cannot: a stop the engine reported without its token (llama.cpp's and Ollama's
silent `<|call|>`), a budget that ran out between messages, a tool choice the model did not follow,
and engine failures with the server's error codes.

A `tool_choice` that names one function (or `required` with one allowed function) is enforced by
starting the completion with that call's header (the "prefill"), so every engine calls it; the engine
is also asked to constrain the arguments to the function's JSON Schema where it can. `required` with
several functions cannot be enforced that way: the result is checked, and a response without an
allowed call ends with the `tool_choice_violated` error instead of claiming success.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._tables import spec as _spec
from ..bridge import (
    RequestError,
    ResponseStreamer,
    ToolPolicy,
    parse_request,
    request_to_conversation,
    to_chat_completion,
    to_sse,
    tool_policy,
)
from ..encoding import HarmonyEncoding
from ..models import Role
from ..types import (
    CreateResponseBody,
    Error,
    ErrorPayload,
    ErrorStreamingEvent,
    FunctionCall,
    IncompleteDetails,
    ReasoningBody,
    ResponseCompletedStreamingEvent,
    ResponseFailedStreamingEvent,
    ResponseFunctionCallArgumentsDeltaStreamingEvent,
    ResponseIncompleteStreamingEvent,
    ResponseOutputItemAddedStreamingEvent,
    ResponseOutputItemDoneStreamingEvent,
    ResponseOutputTextDeltaStreamingEvent,
    ResponseReasoningDeltaStreamingEvent,
    ResponseResource,
    StreamingEvent,
)
from ..types import Message as OutputMessage
from .calls import call_header
from .engines.base import EngineRequest, Finished, FinishReason, Sampling, Text, Tokens, ToolSpec
from .errors import ErrorKind, error_payload
from .media import with_media_placeholders
from .settings import MediaPolicy, ReasoningEvents

_TURN_ENDS = frozenset(_spec.STOP_TOKENS_FOR_ASSISTANT_ACTIONS)
_SPECIALS = tuple(sorted(_spec.NAMED_TOKENS, key=len, reverse=True))
_SPECIAL_OPEN = os.path.commonprefix(list(_SPECIALS))  # what every control-token spelling starts with
_INCOMPLETE_REASON = "max_output_tokens"  # the bridge writes the same reason; a spec/mapping fact not in spec/ yet


def parse_body(raw: Mapping[str, Any]) -> CreateResponseBody:
    """The bridge's validation of a request body (`RequestError` names the bad field)."""
    return parse_request(raw)


def refuse_unhonoured(body: CreateResponseBody) -> None:
    """A 400 for settings this server cannot honour, rather than answering as if it had."""
    if body.background:
        raise RequestError("unsupported_parameter", "background responses are not supported here", "background")
    if body.top_logprobs:
        raise RequestError("unsupported_parameter", "log probabilities are not returned by this server", "top_logprobs")
    for i, name in enumerate(body.include or []):
        raise RequestError("unsupported_parameter", f"include value {name!r} is not supported here", f"include[{i}]")


@dataclass(frozen=True)
class Plan:
    """One request, ready to run: what the engine gets and what the streamer needs."""

    body: CreateResponseBody
    input_tokens: int  # the rendered prompt's length (the prefill is output)
    prefill: list[int]  # forced start of the completion: a named function's call header, or nothing
    policy: ToolPolicy
    engine_request: EngineRequest


def plan_request(
    body: CreateResponseBody,
    encoding: HarmonyEncoding,
    *,
    media: MediaPolicy,
    budget: int,
    seed: int | None = None,
) -> Plan:
    """The plan for a request; `RequestError` for what the model cannot take."""
    refuse_unhonoured(body)
    if media is MediaPolicy.PLACEHOLDER:
        body = with_media_placeholders(body)
    conversation = request_to_conversation(body)
    policy = tool_policy(body)
    prompt = encoding.render_conversation_for_completion(conversation, Role.ASSISTANT)
    schemas = {
        t.name: (t.parameters.model_dump(mode="json") if t.parameters is not None else None) for t in body.tools or []
    }
    tools = tuple(ToolSpec(name, schemas.get(name)) for name in policy.allowed)
    prefill: list[int] = []
    json_schema: Mapping[str, Any] | None = None
    if policy.mode == "required" and len(policy.allowed) == 1:
        forced = policy.allowed[0]
        prefill = call_header(encoding, forced)
        json_schema = schemas.get(forced) or {"type": "object"}
    if budget <= len(prefill):
        raise RequestError(
            "invalid_value", f"a budget of {budget} tokens leaves no room for the forced call", "max_output_tokens"
        )
    sampling = Sampling(
        temperature=1.0 if body.temperature is None else body.temperature,
        top_p=1.0 if body.top_p is None else body.top_p,
        presence_penalty=body.presence_penalty or 0.0,
        frequency_penalty=body.frequency_penalty or 0.0,
        seed=seed,
    )
    request = EngineRequest(
        prompt=prompt + prefill,
        max_tokens=budget - len(prefill),
        stop_token_ids=tuple(encoding.stop_tokens_for_assistant_actions()),
        sampling=sampling,
        json_schema=json_schema,
        tools=tools,
    )
    return Plan(body=body, input_tokens=len(prompt), prefill=prefill, policy=policy, engine_request=request)


class TextTokens:
    """Streamed completion text → token ids, holding back a tail that may be half a control token.

    For engines that return text only; the bridge's `ResponseStreamer.feed_text` replaces it when it lands.
    """

    def __init__(self, encoding: HarmonyEncoding) -> None:
        self._encoding = encoding
        self._pending = ""

    def feed(self, chunk: str) -> list[int]:
        pending = self._pending + chunk
        cut = pending.rfind(_SPECIAL_OPEN)
        if cut == -1 and pending.endswith(_SPECIAL_OPEN[0]):
            cut = len(pending) - 1
        if cut != -1 and pending[cut:] not in _SPECIALS and any(s.startswith(pending[cut:]) for s in _SPECIALS):
            ready, self._pending = pending[:cut], pending[cut:]
        else:
            ready, self._pending = pending, ""
        return self._encoding.encode(ready, allowed_special="all") if ready else []

    def close(self) -> list[int]:
        rest, self._pending = self._pending, ""
        return self._encoding.encode(rest, allowed_special="all") if rest else []


_WATCHED = (ResponseOutputItemAddedStreamingEvent, ResponseOutputItemDoneStreamingEvent, ResponseFailedStreamingEvent)
_QUIET = frozenset(
    (
        ResponseOutputTextDeltaStreamingEvent,
        ResponseReasoningDeltaStreamingEvent,
        ResponseFunctionCallArgumentsDeltaStreamingEvent,
    )
)
_TERMINAL = (ResponseCompletedStreamingEvent, ResponseIncompleteStreamingEvent, ResponseFailedStreamingEvent)


class ResponseRun:
    """The events of one response, fed from an engine; `terminal` is the last event once it ended."""

    def __init__(self, plan: Plan, encoding: HarmonyEncoding, *, model: str) -> None:
        self.plan = plan
        self._streamer = ResponseStreamer(encoding, plan.body, model=model, input_tokens=plan.input_tokens)
        self._text: TextTokens | None = None
        self._encoding = encoding
        self._last = -1  # the last token fed
        self._open = False  # an output item is open (added, not done)
        self._open_call = False  # ... and it is a function call
        self.calls: list[str] = []  # names of the function calls completed so far
        self.terminal: StreamingEvent | None = None
        self.failure: ErrorKind | None = None
        self.output_tokens = 0

    @property
    def ended(self) -> bool:
        return self.terminal is not None

    def _watch(self, events: list[StreamingEvent]) -> list[StreamingEvent]:
        for event in events:
            if type(event) in _QUIET:
                continue  # a delta (nearly every event): nothing to note
            if isinstance(event, _WATCHED):
                if isinstance(event, ResponseOutputItemAddedStreamingEvent):
                    self._open = True
                    self._open_call = not isinstance(event.item, (OutputMessage, ReasoningBody))  # a call of any tool
                elif isinstance(event, ResponseOutputItemDoneStreamingEvent):
                    self._open = self._open_call = False
                    if isinstance(event.item, FunctionCall):
                        self.calls.append(event.item.name)
                elif self.failure is None:
                    self.failure = ErrorKind.MODEL_OUTPUT_INVALID  # the streamer could not read the output
            if isinstance(event, _TERMINAL):
                self.terminal = event
        return events

    def _feed_ids(self, ids: Sequence[int]) -> list[StreamingEvent]:
        feed = self._streamer.feed
        if len(ids) == 1:  # engines stream one token per chunk most of the time
            token = ids[0]
            out = feed(token)
        else:
            out = []
            for token in ids:
                out += feed(token)
            if not ids:
                return out
        self._last = token
        self.output_tokens += len(ids)
        return self._watch(out) if out else out

    def start(self) -> list[StreamingEvent]:
        """`response.created`, `response.in_progress`, and the forced call's opening events."""
        return self._watch(self._streamer.start()) + self._feed_ids(self.plan.prefill)

    def feed(self, output: Tokens | Text) -> list[StreamingEvent]:
        """The events one engine output causes."""
        if isinstance(output, Tokens):
            return self._feed_ids(output.ids)
        if self._text is None:
            self._text = TextTokens(self._encoding)
        return self._feed_ids(self._text.feed(output.text))

    def _violation(self, finished: Finished) -> str | None:
        policy = self.plan.policy
        for name in self.calls:
            if name not in policy.allowed:
                allowed = f"only {list(policy.allowed)}" if policy.allowed else "no function"
                return f"the model called {name!r}, but tool_choice allows {allowed}"
        if policy.mode == "required" and not self.calls and finished.reason is FinishReason.STOP:
            return f"tool_choice requires a call to one of {list(policy.allowed)}, but the model answered without one"
        return None

    def finish(self, finished: Finished) -> list[StreamingEvent]:
        """The closing events for the engine's end of the completion."""
        if self.ended:
            return []
        out: list[StreamingEvent] = []
        if self._text is not None:
            out += self._feed_ids(self._text.close())
        if self.ended:
            return out
        if finished.reason is FinishReason.STOP and self._last not in _TURN_ENDS and self._open:
            # The engine stopped on <|call|> or <|return|> without sending it: close the message as the model did.
            out += self._feed_ids([_spec.TOKEN_CALL if self._open_call else _spec.TOKEN_END_DONE_SAMPLING])
            if self.ended:
                return out
        problem = self._violation(finished)
        if problem is not None:
            return out + self.fail(ErrorKind.TOOL_CHOICE_VIOLATED, problem)
        events = self._watch(self._streamer.finish())
        last = events[-1] if events else None
        if (
            isinstance(last, ResponseCompletedStreamingEvent)
            and finished.reason is FinishReason.LENGTH
            and self._last not in _TURN_ENDS
        ):
            # The budget ran out between two messages: the streamer saw no cut item, but the turn is not over.
            response = last.response.model_copy(
                update={
                    "status": "incomplete",
                    "completed_at": None,
                    "incomplete_details": IncompleteDetails(reason=_INCOMPLETE_REASON),
                }
            )
            events[-1] = ResponseIncompleteStreamingEvent(sequence_number=last.sequence_number, response=response)
            self.terminal = events[-1]
        return out + events

    def fail(self, kind: ErrorKind, message: str) -> list[StreamingEvent]:
        """`error` then `response.failed`, carrying the server's error code for `kind`."""
        if self.ended:
            return []
        self.failure = kind
        payload = error_payload(kind, message)
        out: list[StreamingEvent] = []
        for event in self._streamer.fail(message):
            if isinstance(event, ErrorStreamingEvent):
                event = event.model_copy(update={"error": ErrorPayload.model_validate(payload)})
            elif isinstance(event, ResponseFailedStreamingEvent):
                response = event.response.model_copy(
                    update={"error": Error(code=payload["code"], message=payload["message"])}
                )
                event = event.model_copy(update={"response": response})
            out.append(event)
        return self._watch(out)

    def response(self) -> ResponseResource | None:
        """The final `ResponseResource`, once the run ended."""
        terminal = self.terminal
        if isinstance(terminal, _TERMINAL):
            return terminal.response
        return None


# -- the wire ----------------------------------------------------------------------------------------


def sse_frames(events: Sequence[StreamingEvent], names: ReasoningEvents) -> bytes:
    """The SSE frames of `events` (the stream's closing `[DONE]` is `DONE_FRAME`, written once at the end)."""
    frames = to_sse(events, reasoning_names="openai" if names is ReasoningEvents.OPENAI else "spec")
    return "".join(itertools.islice(frames, len(events))).encode()  # one frame per event; [DONE] is not taken


DONE_FRAME: bytes = "".join(to_sse([])).encode()


def chat_completion(response: ResponseResource) -> dict[str, Any]:
    """The response in the Chat Completions shape."""
    return to_chat_completion(response)


__all__ = [
    "DONE_FRAME",
    "Plan",
    "RequestError",
    "ResponseRun",
    "TextTokens",
    "chat_completion",
    "parse_body",
    "plan_request",
    "refuse_unhonoured",
    "sse_frames",
]
