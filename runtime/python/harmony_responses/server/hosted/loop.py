"""The server's tool loop: one response in which the model calls tools the server runs itself.

A request that declares a hosted tool of a kind with a backend (`web_search` with `--web-search`, ...) gets a
`HostedRun` before it is planned (`open_hosted`): each backend checks its declared tools (a field it cannot honour
is a 400 naming it) and opens the response's session, whose namespaces the system message declares. The run rides
in the plan (`Plan.hosted`), and `structured.engine_outputs` (the hook every path iterates: streamed, whole,
background and WebSocket responses) hands the engine to `hosted_outputs`, which:

1. passes the engine's outputs on to the run as they come. The builder holds back a message to a recipient a
   session claims (`ResponseBuilder.hosted`): no item is emitted while the model writes it;
2. when the model ended such a call (`<|call|>`; an engine that stops without passing the stop token on has it fed
   for it), runs it: the kind's output item is added with its `before` events (spec/mapping/harmony_responses.json
   `hosted`), the session runs the call under the per-call timeout, and the item is done with the kind's
   `completed` (or `failed`) events. The tool's message (author the tool, to the assistant, on the call's channel)
   goes among the response's messages (what a store keeps) and the item keeps the call and that message in its
   `harmony:hosted` field, so the item sent back as input renders the same tokens;
3. continues the same completion: the engine is asked again with the prompt, what it generated (its own token ids,
   or its text encoded), the tool's message and `<|start|>assistant` (the engine's prefix cache keeps this cheap);
   the new prompt's length is added to `input_tokens`, and the budget left is what `max_output_tokens` leaves;
4. ends when the model answers or calls a client function (the response ends as it would without hosted tools),
   when the budget or the context window is spent (`incomplete`), or after the tool budget: `max_tool_calls`,
   at most `--hosted-max-calls` (a call past it is not run: its item fails and the model is told so, once).

Sessions are closed when the loop ends, whatever ended it (a client that left, a drain that cut the response).
Every call's outcome and time are counted in the metrics (`harmony_responses_hosted_calls`,
`harmony_responses_hosted_call_seconds`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..._tables import Role
from ..._tables import spec as _spec
from ...bridge import Status
from ...bridge.items import EVENT_CLASSES, HeldCall, random_id
from ...bridge.request import hosted_tools_declared
from ...models import Author, Message, SystemContent, ToolNamespaceConfig
from ...types import ItemFieldAdapter
from ..engines.base import Engine, EngineOutput, EngineRequest, Finished, FinishReason, Text, Tokens
from .base import Citation, HostedBackend, HostedCall, HostedContext, HostedKind, HostedResult, HostedSession
from .policy import FetchPolicy

if TYPE_CHECKING:
    from ..metrics import Metrics
    from ..respond import ResponseRun

log = logging.getLogger("harmony_responses.server")

__all__ = ["HostedRun", "hosted_kinds", "hosted_outputs", "open_hosted", "tool_types"]

_HOSTED_FIELD = _spec.RESPONSE_HOSTED_FIELD
_ASSISTANT = Role.ASSISTANT.value
_CALL_TEXT = next(spelling for spelling, token in _spec.NAMED_TOKENS.items() if token == _spec.TOKEN_CALL)
# The fields of OpenAI's hosted-tool events that carry the call's text (an MCP call's arguments, a python call's code).
WIRE = {"text_fields": ("delta", "arguments", "code")}
_TEXT_FIELDS = WIRE["text_fields"]


def hosted_kinds(backends: Mapping[HostedKind, HostedBackend]) -> dict[str, HostedKind]:
    """Each request tool `type` the configured backends run → its kind."""
    return {t: kind for kind in backends for t in _spec.HOSTED_KINDS[kind.value]["tool_types"]}


def tool_types(backends: Mapping[HostedKind, HostedBackend]) -> frozenset[str]:
    """The request tool types the server runs (`Capabilities.runs_tools`)."""
    return frozenset(hosted_kinds(backends))


@dataclass
class HostedRun:
    """One response's hosted tools: a session per kind, the limits, and the pages the answer may cite."""

    sessions: list[tuple[HostedKind, HostedSession]]
    max_calls: int  # hosted calls this response may make
    timeout: float  # seconds per call
    window: int  # the model's context window (a continuation must fit in it)
    metrics: Metrics | None = None
    citations: dict[int, Citation] = field(default_factory=dict)  # browser pages by cursor
    calls: int = 0  # calls made (run or refused)
    closed: bool = False

    def system(self) -> SystemContent:
        """The system message's content: the default one, with the sessions' namespaces declared."""
        system = SystemContent.new()
        for namespace in self.namespaces():
            system = system.with_tools(namespace)
        return system

    def namespaces(self) -> list[ToolNamespaceConfig]:
        return [ns for _, session in self.sessions for ns in session.namespaces()]

    def session_for(self, recipient: str) -> tuple[HostedKind, HostedSession] | None:
        return next(((k, s) for k, s in self.sessions if s.claims(recipient)), None)

    def claims(self, recipient: str) -> bool:
        return self.session_for(recipient) is not None

    def annotate(self, text: str) -> list[Any]:
        """The answer's `url_citation` annotations: one per citation of a page a hosted tool showed."""
        from .browser import citation_annotations

        return citation_annotations(text, self.citations)

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        for _, session in self.sessions:
            try:
                await session.aclose()
            except Exception:  # a backend's bug must not hide the response's own end
                log.exception("a hosted tool session failed to close")


async def open_hosted(
    raw: Mapping[str, Any],
    backends: Mapping[HostedKind, HostedBackend],
    *,
    policy: FetchPolicy,
    timeout: float,
    max_calls: int,
    window: int,
    include: Sequence[str] = (),
    previous_response_id: str | None = None,
    metrics: Metrics | None = None,
    chain: Sequence[Any] = (),
) -> HostedRun | None:
    """The hosted run for a request body (None when it declares no tool the server runs): each backend checks its
    declared tools (`RequestError` naming the field it cannot honour), then opens the response's session."""
    kinds = hosted_kinds(backends)
    declared = hosted_tools_declared(raw, frozenset(kinds))
    if not declared:
        return None
    by_kind: dict[HostedKind, list[Mapping[str, Any]]] = {}
    for i, tool in declared:
        kind = kinds[tool["type"]]
        backends[kind].check(tool, f"tools[{i}]")
        by_kind.setdefault(kind, []).append(tool)
    history = raw.get("input")
    context = HostedContext(
        policy=policy,
        timeout=timeout,
        include=frozenset(include),
        previous_response_id=previous_response_id,
        history=tuple(history) if isinstance(history, list) else (),
        chain=tuple(chain),
    )
    limit = raw.get("max_tool_calls")
    if isinstance(limit, int) and limit > 0:
        max_calls = min(max_calls, limit)
    run = HostedRun([], max_calls, timeout, window, metrics)
    try:
        for kind, tools in by_kind.items():
            run.sessions.append((kind, await backends[kind].open(tools, context)))
    except BaseException:
        await run.aclose()
        raise
    return run


def _item_event(item_type: str, status: Status) -> str | None:
    """The event the spec names for an item of `item_type` reaching `status` (`response.mcp_list_tools.completed`),
    if it names one."""
    suffix = _spec.HEADER_NAMESPACE_SEPARATOR + item_type + _spec.HEADER_NAMESPACE_SEPARATOR + status.value
    return next((name for name in EVENT_CLASSES if name.endswith(suffix)), None)


def _call_token_output(was_text: bool) -> Tokens | Text:
    return Text(_CALL_TEXT) if was_text else Tokens([_spec.TOKEN_CALL])


def _event_fields(event_type: str, item_id: str, output_index: int, text: str) -> dict[str, Any]:
    fields: dict[str, Any] = {"item_id": item_id, "output_index": output_index}
    model = EVENT_CLASSES[event_type]
    for name in _TEXT_FIELDS:
        if name in model.model_fields:
            fields[name] = text
    return fields


async def _run_call(hosted: HostedRun, session: HostedSession, call: HostedCall) -> HostedResult:
    try:
        return await asyncio.wait_for(session.call(call, timeout=hosted.timeout), hosted.timeout + 1.0)
    except TimeoutError:
        message = f"the tool did not answer within {hosted.timeout:g} s"
        return HostedResult(text=f"error: {message}", error=message)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a backend's bug: the model hears of a failure, the response goes on
        log.exception("hosted tool %s failed", call.recipient)
        message = f"the tool failed ({type(exc).__name__})"
        return HostedResult(text=f"error: {message}", error=message)


_FLUSH = Tokens([])  # an output that feeds nothing: the caller writes what the run holds (the events before a call)


async def _hosted_call(
    run: ResponseRun,
    hosted: HostedRun,
    held: HeldCall,
    reply: list[Message | None],
    session: tuple[HostedKind, HostedSession] | None = None,
) -> AsyncGenerator[EngineOutput, None]:
    """Run one held call: its item and events (yielding `_FLUSH` once its opening events are out, so the client
    sees them while the tool runs), and in `reply` the tool message the model reads next (None: the result ends
    the response, `HostedResult.stop`)."""
    builder = run.builder
    found = session or hosted.session_for(held.recipient)
    assert found is not None, "the builder holds only calls a session claims"
    kind, claimed = found
    row = _spec.HOSTED_KINDS[kind.value]
    item_id = random_id(row["id_prefix"])
    call = HostedCall(held.recipient, held.arguments, item_id, None, held.channel, builder.response_id)
    try:
        given = dict(claimed.started(call))
    except Exception:  # a backend's bug: the item goes out with what the loop knows
        log.exception("hosted tool %s could not describe its call", call.recipient)
        given = {}
    started = {"type": row["item"], "id": item_id, "status": Status.IN_PROGRESS.value, **given}
    own = started["type"] == row["item"]  # the kind's own item: its events too
    builder.hosted_item(ItemFieldAdapter.validate_python(started))
    for event in row["before"] if own else ():
        builder.hosted_event(event, **_event_fields(event, started["id"], held.output_index, held.arguments))
    yield _FLUSH
    hosted.calls += 1
    began = time.monotonic()
    if hosted.calls > hosted.max_calls:
        why = f"this response may make at most {hosted.max_calls} tool calls; answer with what you have"
        result = HostedResult(text=f"error: {why}", error=why)
    else:
        result = await _run_call(hosted, claimed, call)
    status = Status.FAILED if result.error is not None else Status.COMPLETED
    if hosted.metrics is not None:
        hosted.metrics.hosted_calls.labels(kind.value, status.value).inc()
        hosted.metrics.hosted_seconds.labels(kind.value).observe(time.monotonic() - began)
    for citation in result.citations:
        hosted.citations[citation.cursor] = citation
    author = result.author or held.recipient
    record = {
        "recipient": held.recipient,
        "arguments": held.arguments,
        "channel": held.channel,
        "content_type": held.content_type,
        "author": result.author,
        "output": result.text,
    }
    done = {**started, "status": status.value, **result.item}
    if not result.stop:
        done[_HOSTED_FIELD] = record
    for event in (row["failed" if result.error else "completed"]) if own else ():
        builder.hosted_event(event, **_event_fields(event, started["id"], held.output_index, held.arguments))
    message = None if result.stop else tool_message(author, result.text, held.channel)
    builder.hosted_done(ItemFieldAdapter.validate_python(done), message)
    reply.append(message)


def tool_message(author: str, text: str, channel: str | None) -> Message:
    """A tool's message as Harmony has it: from the tool, to the assistant, on the channel of the call."""
    message = Message.from_author_and_content(Author.new(Role.TOOL, author), text).with_recipient(_ASSISTANT)
    return message.with_channel(channel) if channel is not None else message


async def hosted_outputs(
    engine: Engine, run: ResponseRun, completion: Callable[[EngineRequest], AsyncGenerator[EngineOutput, None]]
) -> AsyncGenerator[EngineOutput, None]:
    """The engine's outputs for `run` with its hosted tools run in between (see the module docstring).

    `completion(request)` is one completion's outputs (`structured.completion_outputs`). Like every engine output
    stream here, it needs the caller to feed each output to `run` before asking for the next."""
    hosted = run.plan.hosted
    assert hosted is not None
    builder, encoding = run.builder, run.encoding
    builder.hosted = hosted.claims
    builder.annotate = hosted.annotate
    request = run.plan.engine_request
    refused = 0
    resume = [_spec.TOKEN_START, *encoding.encode(_ASSISTANT, disallowed_special=())]
    try:
        for _, session in hosted.sessions:  # items the response starts with (an MCP server's tool list)
            for item in session.items():
                typed = ItemFieldAdapter.validate_python(dict(item))
                builder.hosted_item(typed)
                index = len(builder.output)
                for status in (Status.IN_PROGRESS, Status.FAILED if item.get("error") else Status.COMPLETED):
                    event = _item_event(typed.type, status)
                    if event is not None:
                        builder.hosted_event(event, item_id=item["id"], output_index=index)
                builder.hosted_done(typed, None)
        for found in list(hosted.sessions):  # calls to run before the model's first token
            for call in found[1].pending():
                held = HeldCall(call.recipient, call.arguments, call.channel, None, len(builder.output))
                box: list[Message | None] = []
                async for flush in _hosted_call(run, hosted, held, box, found):
                    yield flush
                message = box[0]
                if message is None:
                    yield Finished(FinishReason.STOP)
                    return
                prompt = [*request.prompt[: len(request.prompt) - len(resume)], *encoding.render(message), *resume]
                builder.count_input(len(prompt) - len(request.prompt))
                request = dataclasses.replace(request, prompt=prompt)
        while True:
            ids: list[int] = []
            texts: list[str] = []
            finished: Finished | None = None
            outputs = completion(request)
            try:
                async for output in outputs:
                    if isinstance(output, Finished):
                        finished = output
                        break
                    if isinstance(output, Tokens):
                        ids += output.ids
                    else:
                        texts.append(output.text)
                    yield output
                    if run.ended or builder.held_call is not None:
                        break
            finally:
                await outputs.aclose()
            if run.ended:
                return
            open_item = builder.current_item
            if builder.held_call is None and open_item is not None and open_item.held:
                if finished is None or finished.reason is not FinishReason.STOP:
                    if finished is not None:
                        yield finished  # the budget ended the call: the response is incomplete
                    return
                closing = _call_token_output(bool(texts))  # a stop the engine did not pass on (llama.cpp, Ollama)
                if isinstance(closing, Tokens):
                    ids += closing.ids
                else:
                    texts.append(closing.text)
                yield closing
            ended = builder.held_call
            if ended is None:
                if finished is not None:
                    yield finished
                return
            if hosted.calls >= hosted.max_calls:
                refused += 1
            box = []
            async for flush in _hosted_call(run, hosted, ended, box):
                yield flush
            message = box[0]
            if message is None or refused > 1:  # an approval asked for; or told the budget is spent, it called again
                yield Finished(FinishReason.STOP)
                return
            generated = ids if not texts else encoding.encode("".join(texts), allowed_special="all")
            if not generated or generated[-1] != _spec.TOKEN_CALL:
                generated = [*generated, _spec.TOKEN_CALL]
            prompt = [*request.prompt, *generated, *encoding.render(message), *resume]
            budget = min(request.max_tokens - len(generated), hosted.window - len(prompt))
            if budget <= 0:
                yield Finished(FinishReason.LENGTH)  # nothing left for the model to read the tool's answer with
                return
            builder.count_input(len(prompt))
            builder.next_step()
            request = dataclasses.replace(request, prompt=prompt, max_tokens=budget)
    finally:
        await hosted.aclose()
