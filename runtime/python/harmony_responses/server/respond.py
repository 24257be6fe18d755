"""Every call the server makes into the bridge, in one place: request → plan → events → wire.

`plan_request` turns a validated `CreateResponseBody` into a `Plan`: the prompt token ids (after the
stored turns it continues, fitted to the context window), what the engine is asked for (budget,
sampling, stop tokens, a JSON constraint) and the tool policy.
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

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._tables import ItemKind
from .._tables import spec as _spec
from ..bridge import (
    Capabilities,
    CompactionReader,
    ConversationParts,
    HostedTools,
    KnownCalls,
    ReasoningReader,
    RequestError,
    ResponseBuilder,
    Status,
    ToolPolicy,
    Verbatim,
    conversation_parts,
    parse_request,
    to_chat_completion,
    unavailable_tools,
)
from ..bridge.encrypted import ReasoningSealer
from ..bridge.items import Sink
from ..bridge.tools import NAMESPACE_FIELD, ToolPlan, qualified
from ..encoding import HarmonyEncoding
from ..models import Message
from ..types import (
    CreateResponseBody,
    FunctionCall,
    LogProb,
    OutputTextContent,
    ResponseResource,
    TopLogProb,
)
from ..types import Message as OutputMessage
from .calls import call_header
from .context import fit
from .engines.base import (
    EngineInfo,
    EngineRequest,
    Finished,
    FinishReason,
    Sampling,
    Text,
    TokenLogprob,
    Tokens,
    ToolSpec,
)
from .errors import ErrorKind, error_payload
from .hosted.loop import HostedRun
from .media import with_media_placeholders
from .settings import MediaPolicy
from .structured import AnswerFormat, answer_format

if TYPE_CHECKING:
    from .state import ServerState
    from .stored import Prior

# What this server honours beyond the prompt (the rest of a request that asks for more is refused).
SERVER_CAPABILITIES = Capabilities(
    store=True,
    background=True,
    sampling=True,
    max_output_tokens=True,
    truncation=True,
    encrypted_reasoning=True,
    extra_fields=frozenset(),
)
ENCRYPTED_REASONING = "reasoning.encrypted_content"  # the `include` value that seals reasoning items
DEFAULT_CONTEXT_WINDOW = 131072  # gpt-oss's (`--context-window`)
_TRUNCATION_AUTO = "auto"  # the `truncation` value that lets the oldest turns go (the schema's TruncationEnum)


# The `include` value that asks for the answer's log probabilities (the one the `logprobs` capability honours).
LOGPROBS_INCLUDE = next(value for value, flag in _spec.INCLUDES.items() if flag == "logprobs")


def capabilities_for(info: EngineInfo) -> Capabilities:
    """What the server honours in front of this engine: log probabilities only where the engine returns them."""
    return dataclasses.replace(SERVER_CAPABILITIES, logprobs=True) if info.logprobs else SERVER_CAPABILITIES


def wanted_logprobs(body: CreateResponseBody) -> int | None:
    """How many top tokens to return beside each token's log probability, or None when none are asked for."""
    if LOGPROBS_INCLUDE in (body.include or []) or body.top_logprobs:
        return body.top_logprobs or 0
    return None


log = logging.getLogger("harmony_responses.server")
_UNAVAILABLE_LOGGED: set[str] = set()  # the hosted tool types this process has said it cannot run


def parse_body(
    raw: Mapping[str, Any],
    capabilities: Capabilities = SERVER_CAPABILITIES,
    *,
    hosted_tools: HostedTools = HostedTools.OMIT,
) -> CreateResponseBody:
    """The bridge's validation of a request body (`RequestError` names the bad field, or a field not honoured),
    and the sampling fields held to the ranges the engines accept, so a value outside is the client's 400 rather
    than the engine's failure. `hosted_tools` says what becomes of declared tools the server cannot run (left
    out and listed in the response, or refused); each such tool type is logged once per process."""
    body = parse_request(raw, dataclasses.replace(capabilities, hosted_tools=hosted_tools))
    for tool in unavailable_tools(body):
        if tool["type"] not in _UNAVAILABLE_LOGGED:
            _UNAVAILABLE_LOGGED.add(tool["type"])
            log.warning(
                "requests declare %s tools, which this server cannot run: they are not offered to the model "
                "(listed in each response's %s; --hosted-tools reject refuses such requests)",
                tool["type"],
                _spec.RESPONSE_UNAVAILABLE_TOOLS_FIELD,
            )
    for field, (low, high) in _spec.SAMPLING_RANGES.items():
        value = getattr(body, field)
        if value is not None and not low <= value <= high:
            raise RequestError.of(_spec.REQUEST_ERROR_OUT_OF_RANGE, field, low=low, high=high, found=value)
    check_tool_schemas(body)
    return body


def check_tool_schemas(body: CreateResponseBody) -> None:
    """Every function tool's `parameters` held to the JSON Schema meta-schema it names (2020-12 by default), as
    OpenAI's API does: a schema that is not one (`"type": "objetc"`) is the client's 400 naming the place
    (`tools[0].parameters.type`), not a prompt that shows `any` and a call nothing can check."""
    import jsonschema  # the server extra brings it

    for i, tool in enumerate(body.tools or []):
        parameters = getattr(tool, "parameters", None)
        if parameters is None:
            continue
        schema = parameters.model_extra or {}
        checker = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        error = jsonschema.exceptions.best_match(checker(checker.META_SCHEMA).iter_errors(schema))
        if error is not None:
            where = f"tools[{i}].parameters" + "".join(
                f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path
            )
            raise RequestError.of(
                _spec.REQUEST_ERROR_INVALID_TOOL_SCHEMA, where, name=Verbatim(tool.name), reason=Verbatim(error.message)
            )


@dataclass(frozen=True)
class Plan:
    """One request, ready to run: what the engine gets and what the streamer needs."""

    body: CreateResponseBody
    input_tokens: int  # the rendered prompt's length (the prefill is output)
    prefill: list[int]  # forced start of the completion: a named function's call header, or nothing
    tools: ToolPlan  # the request's tools read once: names, policy, dumped schemas, strict set, namespaces
    engine_request: EngineRequest
    parts: ConversationParts  # head, stored history and this request's input, as Harmony messages
    dropped_turns: int = 0  # the oldest turns `truncation: "auto"` left out of the prompt
    answer: AnswerFormat | None = None  # the JSON Schema the answer must follow (`text.format`), see `structured`
    hosted: HostedRun | None = None  # the hosted tools the server runs for this response (`hosted.loop`)

    @property
    def policy(self) -> ToolPolicy:
        """What `tool_choice` asks of the sampler."""
        return self.tools.policy


def plan_request(
    body: CreateResponseBody,
    encoding: HarmonyEncoding,
    *,
    media: MediaPolicy,
    budget: int,
    seed: int | None = None,
    reserve: int | None = None,
    history: Sequence[Message] = (),
    calls: Mapping[str, Any] | None = None,
    history_rendered: Sequence[Sequence[int] | None] | None = None,
    compaction: CompactionReader | None = None,
    window: int = DEFAULT_CONTEXT_WINDOW,
    reasoning: ReasoningReader | None = None,
    hosted: HostedRun | None = None,
) -> Plan:
    """The plan for a request; `RequestError` for what the model cannot take.

    `history` and `calls` (`KnownCalls.to_json()`) are the stored turns a `previous_response_id` continues,
    and beside them `history_rendered` the token ids of those already rendered; `compaction` opens compaction items,
    `reasoning` reasoning items sealed in `encrypted_content`; `hosted` the hosted tools the server runs (their
    namespaces are declared in the system message, as Harmony declares built-in tools).
    The prompt must leave `reserve` tokens of the `window` for the output (the request's own budget when
    it sets one, else a single token); the engine's budget is `budget`, cut to what the window leaves.
    """
    if media is MediaPolicy.PLACEHOLDER:
        body = with_media_placeholders(body)
    known = KnownCalls.from_json(calls or {})
    system = hosted.system() if hosted is not None else None
    parts = conversation_parts(
        body, history=history, calls=known, compaction=compaction, reasoning=reasoning, system=system, checked=True
    )
    planned = parts.tools  # read once: the prompt's tool sections, the engine's tools, the response builder
    policy, schemas = planned.policy, planned.schemas
    tools = tuple(ToolSpec(name, schemas.get(name)) for name in policy.allowed)
    prefill: list[int] = []
    json_schema: Mapping[str, Any] | None = None
    if policy.mode == "required" and len(policy.allowed) == 1:
        forced = policy.allowed[0]
        prefill = call_header(encoding, forced)
        json_schema = schemas.get(forced) or {"type": "object"}
    if budget <= len(prefill):
        raise RequestError.of(_spec.REQUEST_ERROR_BUDGET_TOO_SMALL, "max_output_tokens", budget=budget)
    auto = body.truncation == _TRUNCATION_AUTO
    fitted = fit(
        parts,
        encoding,
        window=window,
        reserve=len(prefill) + (reserve or 1),
        auto=auto,
        history_rendered=history_rendered,
    )
    prompt = fitted.prompt
    sampling = Sampling(
        temperature=1.0 if body.temperature is None else body.temperature,
        top_p=1.0 if body.top_p is None else body.top_p,
        presence_penalty=body.presence_penalty or 0.0,
        frequency_penalty=body.frequency_penalty or 0.0,
        seed=seed,
    )
    request = EngineRequest(
        prompt=prompt + prefill,
        max_tokens=min(budget, window - len(prompt)) - len(prefill),
        stop_token_ids=tuple(encoding.stop_tokens_for_assistant_actions()),
        sampling=sampling,
        json_schema=json_schema,
        tools=tools,
        top_logprobs=wanted_logprobs(body),
    )
    return Plan(
        body=body,
        input_tokens=len(prompt),
        prefill=prefill,
        tools=planned,
        engine_request=request,
        parts=parts,
        dropped_turns=fitted.dropped_turns,
        answer=None if prefill else answer_format(body),  # a forced call leaves no answer to constrain
        hosted=hosted,
    )


def plan_for(
    state: ServerState,
    body: CreateResponseBody,
    prior: Prior,
    hosted: HostedRun | None = None,
    *,
    seed: int | None = None,
    max_output_tokens: int | None = None,
) -> Plan:
    """The plan of a request on this server, the one plan step of HTTP and WebSocket Responses and of Chat
    Completions (its body mapped onto a Responses one): the request's own budget (else the server's default)
    after the stored turns `prior` holds, in the server's context window, with its compaction and sealed-reasoning
    readers, and the hosted tools the server runs for it (`hosted`). Chat gives what its mapped body has no field
    for: its `seed`, and its budget (`max_completion_tokens` or `max_tokens`) as `max_output_tokens`."""
    settings = state.settings
    asked = body.max_output_tokens if max_output_tokens is None else max_output_tokens
    return plan_request(
        body,
        state.encoding,
        media=settings.media,
        budget=asked or settings.default_max_output_tokens,
        seed=seed,
        reserve=asked,
        history=prior.messages,
        calls=prior.calls,
        history_rendered=prior.rendered,
        compaction=state.seal.reader(),
        window=settings.context_window,
        reasoning=state.reasoning.reader(),
        hosted=hosted,
    )


class ResponseRun:
    """One response, fed from an engine: the bridge's `ResponseBuilder`, and what the server knows besides.

    The events go to `sink` (the wire's: SSE text, or typed events). On top of the builder, a run knows
    what the engine said of the end (a stop whose token it did not send, as llama.cpp and Ollama do; a
    budget that ran out), the tool choice the model had to follow, and engine failures with the server's
    error codes. `seal` seals reasoning items when the request includes `reasoning.encrypted_content`.
    """

    def __init__(
        self,
        plan: Plan,
        encoding: HarmonyEncoding,
        sink: Sink,
        *,
        model: str,
        stored: bool = False,
        seal: ReasoningSealer | None = None,
        background: bool = False,
    ) -> None:
        self.plan = plan
        self.encoding = encoding
        self.sink = sink
        included = ENCRYPTED_REASONING in (plan.body.include or [])
        self.builder = ResponseBuilder(
            encoding,
            plan.body,
            sink,
            model=model,
            input_tokens=plan.input_tokens,
            stored=stored,
            seal_reasoning=seal if included else None,
            background=background,
            tool_plan=plan.tools,
        )
        self.failure: ErrorKind | None = None
        self.started = False
        self._feed_token = self.builder.feed_token
        self._keep = sink.keep

    @property
    def ended(self) -> bool:
        return self.builder.finished

    @property
    def output_tokens(self) -> int:
        return self.builder.output_tokens

    def _feed_ids(self, ids: Sequence[int]) -> None:
        feed, keep = self._feed_token, self._keep
        for token in ids:
            delta = feed(token)
            if delta is not None:  # the builder's fast path hands a delta back: keep it in the wire's sink
                keep(delta)

    def start(self) -> None:
        """`response.created`, `response.in_progress`, and the forced call's opening events."""
        self.started = True
        self.builder.start()
        self._feed_ids(self.plan.prefill)
        self._check()

    def _feed_logprobs(self, ids: Sequence[int], logprobs: Sequence[TokenLogprob]) -> None:
        """Token ids with their log probabilities: those of the message's text tokens go on its content part."""
        builder, keep, top = self.builder, self._keep, self.plan.engine_request.top_logprobs or 0
        by_position = len(logprobs) == len(ids)
        pending = list(logprobs)
        for i, token in enumerate(ids):
            delta = builder.feed_token(token)
            if delta is not None:
                keep(delta)
            found = logprobs[i] if by_position else next((p for p in pending if p.token == token), None)
            if found is not None and not by_position:
                pending = pending[pending.index(found) + 1 :]
            item = builder.current_item
            if item is None or item.spec.kind is not ItemKind.MESSAGE:
                continue
            if item.logprobs is None:
                item.logprobs = []
            if found is not None and not self.encoding.is_special_token(token):
                item.logprobs.append(self._logprob(found, top))

    def _logprob(self, found: TokenLogprob, top: int) -> LogProb:
        def shown(token: int) -> tuple[str, list[int]]:
            data = self.encoding.decode_bytes([token])
            return data.decode("utf-8", "replace"), list(data)

        token, data = shown(found.token)
        tops = [TopLogProb(token=t, logprob=lp, bytes=b) for t, b, lp in ((*shown(i), lp) for i, lp in found.top[:top])]
        return LogProb(token=token, logprob=found.logprob, bytes=data, top_logprobs=tops)

    def feed(self, output: Tokens | Text) -> None:
        """One engine output: token ids, or text."""
        if type(output) is Tokens:
            if output.logprobs is not None and self.plan.engine_request.top_logprobs is not None:
                self._feed_logprobs(output.ids, output.logprobs)
            else:
                self._feed_ids(output.ids)
        else:
            self.builder.feed_text(output.text)  # type: ignore[union-attr]
        if self.builder.finished:
            self._check()

    def _check(self) -> None:
        if self.builder.status is Status.FAILED and self.failure is None:
            self.failure = ErrorKind.MODEL_OUTPUT_INVALID  # strict parsing found no Harmony

    def _violation(self, finished: Finished) -> str | None:
        """How the completion breaks the request's tool choice, if it does (a stop closes an open call)."""
        policy = self.plan.policy
        calls = [
            qualified(item.name, (item.model_extra or {}).get(NAMESPACE_FIELD))
            for item in self.builder.output
            if isinstance(item, FunctionCall)
        ]
        open_item = self.builder.current_item
        if finished.reason is FinishReason.STOP and open_item is not None and open_item.name is not None:
            calls.append(qualified(open_item.name, open_item.namespace))  # a call ended without its <|call|>
        for name in calls:
            if name not in policy.allowed:
                allowed = f"only {list(policy.allowed)}" if policy.allowed else "no function"
                return f"the model called {name!r}, but tool_choice allows {allowed}"
        if policy.mode == "required" and not calls and finished.reason is FinishReason.STOP:
            return f"tool_choice requires a call to one of {list(policy.allowed)}, but the model answered without one"
        return None

    def finish(self, finished: Finished) -> None:
        """The engine's end of the completion: a stop (its token sent or not) or a budget that ran out."""
        if self.ended:
            return
        problem = self._violation(finished)
        if problem is not None:
            self.fail(ErrorKind.TOOL_CHOICE_VIOLATED, problem)
            return
        self.builder.finish(stopped=finished.reason is FinishReason.STOP)
        self._check()

    def fail(self, kind: ErrorKind, message: str) -> None:
        """`error` then `response.failed`, carrying the server's error code for `kind`."""
        if self.ended:
            return
        self.failure = kind
        payload = error_payload(kind, message)
        self.builder.fail(message, payload["code"], payload["type"])

    def response(self) -> ResponseResource | None:
        """The final `ResponseResource`, once the run ended."""
        return self.builder.final


def chat_completion(response: ResponseResource) -> dict[str, Any]:
    """The response in the Chat Completions shape (with the answer's log probabilities, when it has them)."""
    completion = to_chat_completion(response)
    logprobs = answer_logprobs(response.output)
    if logprobs is not None:
        completion["choices"][0]["logprobs"] = chat_logprobs(logprobs)
    return completion


def answer_logprobs(items: Sequence[Any]) -> list[LogProb] | None:
    """The log probabilities of the messages' output_text parts, in order; None when no part has them."""
    found: list[LogProb] | None = None
    for item in items:
        if not isinstance(item, OutputMessage):
            continue
        for part in item.content:
            if isinstance(part, OutputTextContent) and part.logprobs is not None:
                found = (found or []) + list(part.logprobs)
    return found


def chat_logprobs(logprobs: Sequence[LogProb]) -> dict[str, Any]:
    """Chat Completions' `choices[].logprobs`: the same entries under `content` (Chat has no refusal here)."""
    return {"content": [p.model_dump(mode="json") for p in logprobs], "refusal": None}


__all__ = [
    "SERVER_CAPABILITIES",
    "Plan",
    "LOGPROBS_INCLUDE",
    "RequestError",
    "ResponseRun",
    "capabilities_for",
    "chat_completion",
    "parse_body",
    "plan_for",
    "plan_request",
]
