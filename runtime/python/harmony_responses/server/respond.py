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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._tables import spec as _spec
from ..bridge import (
    Capabilities,
    CompactionReader,
    ConversationParts,
    KnownCalls,
    RequestError,
    ResponseBuilder,
    Status,
    ToolPolicy,
    Verbatim,
    conversation_parts,
    parse_request,
    to_chat_completion,
    tool_policy,
)
from ..bridge.items import Sink
from ..encoding import HarmonyEncoding
from ..models import Message
from ..types import (
    CreateResponseBody,
    FunctionCall,
    ResponseResource,
)
from .calls import call_header
from .context import fit
from .engines.base import EngineRequest, Finished, FinishReason, Sampling, Text, Tokens, ToolSpec
from .errors import ErrorKind, error_payload
from .media import with_media_placeholders
from .settings import MediaPolicy

# What this server honours beyond the prompt (the rest of a request that asks for more is refused).
SERVER_CAPABILITIES = Capabilities(
    store=True, sampling=True, max_output_tokens=True, truncation=True, extra_fields=frozenset()
)
DEFAULT_CONTEXT_WINDOW = 131072  # gpt-oss's (`--context-window`)
_TRUNCATION_AUTO = "auto"  # the `truncation` value that lets the oldest turns go (the schema's TruncationEnum)


def parse_body(raw: Mapping[str, Any], capabilities: Capabilities = SERVER_CAPABILITIES) -> CreateResponseBody:
    """The bridge's validation of a request body (`RequestError` names the bad field, or a field not honoured),
    and the sampling fields held to the ranges the engines accept, so a value outside is the client's 400 rather
    than the engine's failure."""
    body = parse_request(raw, capabilities)
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
    policy: ToolPolicy
    engine_request: EngineRequest
    parts: ConversationParts  # head, stored history and this request's input, as Harmony messages
    dropped_turns: int = 0  # the oldest turns `truncation: "auto"` left out of the prompt


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
) -> Plan:
    """The plan for a request; `RequestError` for what the model cannot take.

    `history` and `calls` (`KnownCalls.to_json()`) are the stored turns a `previous_response_id` continues,
    and beside them `history_rendered` the token ids of those already rendered; `compaction` opens compaction items.
    The prompt must leave `reserve` tokens of the `window` for the output (the request's own budget when
    it sets one, else a single token); the engine's budget is `budget`, cut to what the window leaves.
    """
    if media is MediaPolicy.PLACEHOLDER:
        body = with_media_placeholders(body)
    known = KnownCalls.from_json(calls or {})
    parts = conversation_parts(body, history=history, calls=known, compaction=compaction)
    policy = tool_policy(body)
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
    )
    return Plan(
        body=body,
        input_tokens=len(prompt),
        prefill=prefill,
        policy=policy,
        engine_request=request,
        parts=parts,
        dropped_turns=fitted.dropped_turns,
    )


class ResponseRun:
    """One response, fed from an engine: the bridge's `ResponseBuilder`, and what the server knows besides.

    The events go to `sink` (the wire's: SSE text, or typed events). On top of the builder, a run knows
    what the engine said of the end (a stop whose token it did not send, as llama.cpp and Ollama do; a
    budget that ran out), the tool choice the model had to follow, and engine failures with the server's
    error codes.
    """

    def __init__(self, plan: Plan, encoding: HarmonyEncoding, sink: Sink, *, model: str, stored: bool = False) -> None:
        self.plan = plan
        self.sink = sink
        self.builder = ResponseBuilder(
            encoding, plan.body, sink, model=model, input_tokens=plan.input_tokens, stored=stored
        )
        self.failure: ErrorKind | None = None
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
        self.builder.start()
        self._feed_ids(self.plan.prefill)
        self._check()

    def feed(self, output: Tokens | Text) -> None:
        """One engine output: token ids, or text."""
        if type(output) is Tokens:
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
        calls = [item.name for item in self.builder.output if isinstance(item, FunctionCall)]
        open_item = self.builder.current_item
        if finished.reason is FinishReason.STOP and open_item is not None and open_item.name is not None:
            calls.append(open_item.name)  # a call the engine ended without sending its <|call|>
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
    """The response in the Chat Completions shape."""
    return to_chat_completion(response)


__all__ = [
    "SERVER_CAPABILITIES",
    "Plan",
    "RequestError",
    "ResponseRun",
    "chat_completion",
    "parse_body",
    "plan_request",
]
