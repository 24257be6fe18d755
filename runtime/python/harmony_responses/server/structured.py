"""Structured outputs that hold: the model reasons freely, then its answer is decoded under the JSON Schema.

A request whose `text.format` is a `json_schema` (Chat's `response_format`: `json_schema`, or `json_object`
as a schema accepting any object) gets an `AnswerFormat` in its plan. Constraining the whole completion
would constrain the reasoning and the Harmony headers too, so the answer is constrained alone, in two
engine requests that stream as one response:

1. the plan's request, with the answer's header (`<|channel|>final<|message|>`) as a stop string where the
   engine keeps a stop string's ids (vLLM, SGLang). Its outputs pass on to the run as they come, cut at
   each `<|message|>`; once the run has opened the answer's message (its header complete, its body not
   begun), the first request is closed (an engine without the stop string is aborted there, and what it
   generated beyond is never passed on). A completion that ends before any answer (a tool call, the
   budget) ends the response as it would without a format;
2. the same token prefix continued: the prompt, the ids passed on (for a text engine, that text
   encoded), with `json_schema` set, so the engine decodes the answer under the schema and stops at its end.
   The engine's prefix cache makes this second prompt cheap; its length is added to the response's
   `input_tokens`, its output ids to the same answer's, and its finish reason ends the response.

An engine that cannot constrain (`EngineInfo.json_constraint` false: `replay`) runs the plan's request as it
is. Either way the finished answer is checked (`AnswerFormat.check`: parsed as JSON, and with `strict: true`
validated against the schema with `jsonschema`); an answer that fails keeps its text and carries what failed in
the message's `harmony:validation` field (`{"valid": false, "errors": [{"path", "message"}]}`), the response
still `completed`, so a client's `parse` helper raises its own validation error on the text, as it would for
any model that broke the format. docs/structured-outputs.md says what each engine is sent.

`engine_outputs(engine, run)` is the hook every caller iterates in place of `engine.generate`; it needs the
caller to feed each output to `run` before it asks for the next one, which every caller does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._tables import ItemKind
from .._tables import spec as _spec
from ..bridge.arguments import check_arguments
from ..types import CreateResponseBody, JsonSchemaResponseFormatParam
from .engines.base import Engine, EngineOutput, EngineRequest, Finished, FinishReason, Text, Tokens

if TYPE_CHECKING:
    from .respond import ResponseRun

_MESSAGE = _spec.TOKEN_MESSAGE
_MESSAGE_TEXT = _spec.SPELLING_MESSAGE
# The answer's header as the model writes it after `<|start|>assistant`: the stop string of the first request.
ANSWER_HEADER = _spec.SPELLING_CHANNEL + _spec.CHANNEL_ANSWER + _spec.SPELLING_MESSAGE
_ANY_JSON: dict[str, Any] = {}  # the schema a non-strict answer is checked against: any JSON value


@dataclass(frozen=True)
class AnswerFormat:
    """The JSON Schema the answer must follow: the request's `text.format` (`name`, `schema`, `strict`)."""

    name: str
    schema: Mapping[str, Any]
    strict: bool

    def check(self, text: str) -> dict[str, Any] | None:
        """What is wrong with a finished answer (the `harmony:validation` value), or None when it holds:
        JSON, and with `strict`, valid under the schema."""
        found = check_arguments(text, dict(self.schema) if self.strict else _ANY_JSON)
        return None if found.valid is True else found.to_dict()


def answer_format(body: CreateResponseBody) -> AnswerFormat | None:
    """The request's structured output, if its `text.format` asks for one."""
    fmt = body.text.format if body.text is not None else None
    if not isinstance(fmt, JsonSchemaResponseFormatParam) or fmt.schema_ is None:
        return None
    return AnswerFormat(fmt.name or "", dict(fmt.schema_), bool(fmt.strict))


def engine_outputs(engine: Engine, run: ResponseRun) -> AsyncGenerator[EngineOutput, None]:
    """The engine's outputs for `run`: `engine.generate` itself, or both steps of a structured output; with hosted
    tools, the server's tool loop around them (`hosted.loop`)."""
    plan = run.plan
    if plan.answer is not None:
        run.builder.answer_check = plan.answer.check
    if plan.hosted is not None:
        from .hosted.loop import hosted_outputs

        return hosted_outputs(engine, run, lambda request: completion_outputs(engine, run, request))
    return completion_outputs(engine, run, plan.engine_request)


def completion_outputs(engine: Engine, run: ResponseRun, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
    """The engine's outputs for one completion of `run` (`request`: the plan's, or a continuation's)."""
    answer = run.plan.answer
    if answer is None or not engine.info.json_constraint:
        return engine.generate(request)
    return _two_steps(engine, run, answer, request)


def _in_answer(run: ResponseRun) -> bool:
    """Whether the run has just opened the answer's message (its header read, nothing of its body yet)."""
    item = run.builder.current_item
    return (
        item is not None
        and item.spec.kind is ItemKind.MESSAGE
        and item.channel == _spec.CHANNEL_ANSWER
        and item.recipient is None
    )


def _token_pieces(output: Tokens) -> list[Tokens]:
    """The ids cut after each `<|message|>` (their log probabilities with them), so the run can be asked after
    each header whether to stop."""
    ids, logprobs = output.ids, output.logprobs
    cuts = [i + 1 for i, token in enumerate(ids) if token == _MESSAGE and i + 1 < len(ids)]
    if not cuts:
        return [output]
    bounds = [0, *cuts, len(ids)]
    aligned = logprobs is not None and len(logprobs) == len(ids)
    return [
        Tokens(ids[a:b], logprobs[a:b] if aligned and logprobs is not None else None if a else logprobs)
        for a, b in zip(bounds, bounds[1:], strict=False)
    ]


class _TextPieces:
    """Text cut after each `<|message|>` spelling; a chunk's end that may begin one is held for the next chunk."""

    def __init__(self) -> None:
        self.held = ""

    def feed(self, text: str) -> list[str]:
        text = self.held + text
        self.held = ""
        pieces = []
        while True:
            at = text.find(_MESSAGE_TEXT)
            if at < 0:
                break
            pieces.append(text[: at + len(_MESSAGE_TEXT)])
            text = text[at + len(_MESSAGE_TEXT) :]
        for keep in range(min(len(text), len(_MESSAGE_TEXT) - 1), 0, -1):
            if _MESSAGE_TEXT.startswith(text[-keep:]):
                self.held, text = text[-keep:], text[:-keep]
                break
        if text:
            pieces.append(text)
        return pieces


async def _two_steps(
    engine: Engine, run: ResponseRun, answer: AnswerFormat, request: EngineRequest
) -> AsyncGenerator[EngineOutput, None]:
    first = engine.generate(dataclasses.replace(request, stop_text=(*request.stop_text, ANSWER_HEADER)))
    ids: list[int] = []  # what the first request gave and the run was fed, as ids
    texts: list[str] = []  # ... as text, from an engine that returns text
    cut = _TextPieces()
    try:
        reached = False
        async for output in first:
            if isinstance(output, Finished):
                if cut.held:
                    yield Text(cut.held)
                yield output  # no answer came (a call, the budget): the response ends as it would unformatted
                return
            if isinstance(output, Tokens):
                for piece in _token_pieces(output):
                    yield piece
                    ids += piece.ids
                    if _in_answer(run):
                        reached = True
                        break
            else:
                for text in cut.feed(output.text):
                    yield Text(text)
                    texts.append(text)
                    if _in_answer(run):
                        reached = True
                        break
            if reached or run.ended:
                break
    finally:
        await first.aclose()  # stops the engine's first request if it is still generating
    if not reached:
        return  # the run ended (the caller stops reading) or the engine stopped without finishing
    if texts:
        ids = run.encoding.encode("".join(texts), allowed_special="all")
    budget = request.max_tokens - len(ids)
    if budget <= 0:
        yield Finished(FinishReason.LENGTH)
        return
    second = dataclasses.replace(
        request, prompt=[*request.prompt, *ids], max_tokens=budget, json_schema=answer.schema, stop_text=()
    )
    run.builder.count_input(len(second.prompt))
    outputs = engine.generate(second)
    try:
        async for output in outputs:
            yield output
    finally:
        await outputs.aclose()


__all__ = ["ANSWER_HEADER", "AnswerFormat", "answer_format", "completion_outputs", "engine_outputs"]
