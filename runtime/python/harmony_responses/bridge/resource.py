"""The `ResponseResource` of a response: its state, its output, and the request's settings echoed back."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .._tables import spec as _spec
from ..types import (
    AllowedToolChoice,
    AllowedToolsParam,
    CreateResponseBody,
    Error,
    FunctionTool,
    FunctionToolChoice,
    FunctionToolParam,
    IncompleteDetails,
    InputTokensDetails,
    ItemField,
    JsonSchemaResponseFormat,
    JsonSchemaResponseFormatParam,
    OutputTokensDetails,
    Reasoning,
    ResponseResource,
    SpecificFunctionParam,
    TextField,
    TextResponseFormat,
    Usage,
)
from .tools import ToolPlan, dump_parameters, read_tools

ToolChoice = Any  # the echoed tool_choice: "auto" | "none" | "required" | FunctionToolChoice | AllowedToolChoice


def _tool_choice(body: CreateResponseBody) -> ToolChoice:
    choice = body.tool_choice
    if choice is None:
        return "auto"
    if isinstance(choice, SpecificFunctionParam):
        return FunctionToolChoice(name=choice.name)
    if isinstance(choice, AllowedToolsParam):
        return AllowedToolChoice(
            tools=[FunctionToolChoice(name=t.name) for t in choice.tools], mode=choice.mode or "auto"
        )
    return choice


def _text_field(body: CreateResponseBody) -> TextField:
    fmt = body.text.format if body.text is not None else None
    echoed: TextResponseFormat | JsonSchemaResponseFormat = TextResponseFormat()
    if isinstance(fmt, JsonSchemaResponseFormatParam):
        # The spec's ResponseResource echoes no schema (`type: null`).
        echoed = JsonSchemaResponseFormat(
            name=fmt.name or "", description=fmt.description, schema_=None, strict=bool(fmt.strict)
        )
    if body.text is not None and body.text.verbosity is not None:
        return TextField(format=echoed, verbosity=body.text.verbosity)
    return TextField(format=echoed)  # an absent verbosity stays absent


def usage(input_tokens: int, output_tokens: int, reasoning_tokens: int, cached_tokens: int = 0) -> Usage:
    return Usage(
        input_tokens=input_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=cached_tokens),
        output_tokens=output_tokens,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=reasoning_tokens),
        total_tokens=input_tokens + output_tokens,
    )


def response_snapshot(
    body: CreateResponseBody | None,
    *,
    response_id: str,
    created_at: int,
    model: str,
    status: str,
    output: list[ItemField],
    usage: Usage | None = None,
    error: Error | None = None,
    incomplete_reason: str | None = None,
    completed_at: int | None = None,
    repairs: list[dict[str, Any]] | None = None,
    stored: bool = False,
    background: bool = False,
    tools: ToolPlan | None = None,
) -> ResponseResource:
    """A full `ResponseResource` (all 31 keys) echoing the request's settings; `store` is `stored` (whether
    the caller keeps the response), `background` whether it runs in the background, `previous_response_id`
    the request's.

    `repairs`, when there are any, go into a vendor-prefixed field (`RESPONSE_REPAIRS_FIELD` of the
    spec): what lenient parsing changed in the model's output, so that no repair is silent. `tools` is the
    request's `ToolPlan` when the caller has it (its schemas dumped once), else it is read from `body`.
    """
    b = body if body is not None else CreateResponseBody()
    schemas = (tools if tools is not None else read_tools(b)).schemas
    functions = [t for t in (b.tools or []) if isinstance(t, FunctionToolParam)]  # namespace tools are not echoed
    names = Counter(t.name for t in functions)
    echoed = [  # a name declared twice (a request refused for it) echoes each declaration's own schema
        FunctionTool(
            name=t.name,
            description=t.description,
            parameters=schemas[t.name] if names[t.name] == 1 else dump_parameters(t),
            strict=t.strict,
        )
        for t in functions
    ]
    reasoning = Reasoning(effort=b.reasoning.effort, summary=b.reasoning.summary) if b.reasoning is not None else None
    extra: dict[str, Any] = {_spec.RESPONSE_REPAIRS_FIELD: repairs} if repairs else {}
    given = b.model_extra or {}
    labels = {key: given[key] for key in _spec.LABEL_FIELDS if key in given}  # the labels the response has no field for
    if labels:
        extra[_spec.RESPONSE_LABELS_FIELD] = labels
    if given.get(_spec.RESPONSE_UNAVAILABLE_TOOLS_FIELD):
        extra[_spec.RESPONSE_UNAVAILABLE_TOOLS_FIELD] = given[_spec.RESPONSE_UNAVAILABLE_TOOLS_FIELD]
    return ResponseResource(
        id=response_id,
        created_at=created_at,
        completed_at=completed_at,
        status=status,
        incomplete_details=IncompleteDetails(reason=incomplete_reason) if incomplete_reason else None,
        model=b.model or model,
        previous_response_id=b.previous_response_id,
        instructions=b.instructions,
        output=output,
        error=error,
        tools=echoed,
        tool_choice=_tool_choice(b),
        truncation=b.truncation or "disabled",
        parallel_tool_calls=True if b.parallel_tool_calls is None else b.parallel_tool_calls,
        text=_text_field(b),
        top_p=1.0 if b.top_p is None else b.top_p,
        presence_penalty=b.presence_penalty or 0.0,
        frequency_penalty=b.frequency_penalty or 0.0,
        top_logprobs=b.top_logprobs or 0,
        temperature=1.0 if b.temperature is None else b.temperature,
        reasoning=reasoning,
        usage=usage,
        max_output_tokens=b.max_output_tokens,
        max_tool_calls=b.max_tool_calls,
        store=stored,
        background=background,
        service_tier="default",
        metadata=dict(b.metadata) if b.metadata is not None else {},
        safety_identifier=b.safety_identifier,
        prompt_cache_key=b.prompt_cache_key,
        **extra,
    )
