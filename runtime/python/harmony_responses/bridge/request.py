"""Open Responses request → Harmony conversation, for gpt-oss.

`request_to_conversation(body)` maps a `CreateResponseBody` onto the messages the model is trained on:
`instructions` and `system`/`developer` input messages become the developer message's instructions,
function tools its `functions` namespace, `reasoning.effort` the system message's reasoning line,
`text.format` (json_schema) a `# Response Formats` section closing the developer message; user and
assistant messages, function calls, their outputs and reasoning items become messages in order.
Whatever the model cannot take raises `RequestError`, a 400-style error that names the offending
parameter; nothing is dropped silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from .._tables import ItemKind
from .._tables import spec as _spec
from ..models import (
    Author,
    Content,
    Conversation,
    DeveloperContent,
    Message,
    ReasoningEffort,
    Role,
    SystemContent,
    TextContent,
    ToolDescription,
)
from ..types import (
    AllowedToolsParam,
    AssistantMessageItemParam,
    CompactionSummaryItemParam,
    CreateResponseBody,
    DeveloperMessageItemParam,
    ErrorPayload,
    ExtensionItem,
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    FunctionToolParam,
    ItemParam,
    ItemReferenceParam,
    JsonSchemaResponseFormatParam,
    ReasoningItemParam,
    SpecificFunctionParam,
    SystemMessageItemParam,
    UserMessageItemParam,
)

_FUNCTIONS_PREFIX = _spec.HEADER_FUNCTION_NAMESPACE + "."
_CONSTRAIN = _spec.SPELLING_CONSTRAIN
_JSON_CONTENT_TYPE = _CONSTRAIN + _spec.CONTENT_TYPE_FUNCTION_ARGUMENTS
_EFFORTS = {e.value.lower(): e for e in ReasoningEffort}
_OUTPUT_TEXT = _spec.ITEM_KINDS[ItemKind.MESSAGE]["text"]["part"]
# An assistant message's phase → the channel it was written on.
_CHANNEL_OF_PHASE = {
    phase: _spec.CHANNEL_BY_PURPOSE[purpose] for purpose, phase in _spec.ITEM_KINDS[ItemKind.MESSAGE]["phases"].items()
}


class RequestError(ValueError):
    """A request the model cannot serve: an HTTP 400 with an Open Responses error body.

    `param` names the request field (`input[2].content[0]`, `tools[1]`, `reasoning.effort`).
    """

    status = 400
    type = "invalid_request_error"

    def __init__(self, code: str, message: str, param: str | None = None) -> None:
        super().__init__(f"{param}: {message}" if param else message)
        self.code = code
        self.message = message
        self.param = param

    def to_payload(self) -> ErrorPayload:
        """The error as the spec's `ErrorPayload` (the `error` of an error event or response body)."""
        return ErrorPayload(type=self.type, code=self.code, message=self.message, param=self.param)

    def to_body(self) -> dict[str, Any]:
        """The HTTP 400 JSON body: `{"error": {...}}`."""
        return {"error": self.to_payload().model_dump(mode="json")}


def _loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part and part[0].isupper():  # a union member's tag, not a key of the request
            continue
        else:
            out += f".{part}" if out else part
    return out


def parse_request(raw: Mapping[str, Any]) -> CreateResponseBody:
    """Validate a JSON request body; the first problem becomes a `RequestError` naming its place."""
    try:
        return CreateResponseBody.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        # A wrong `type` (an unknown tool or item kind) explains the other errors of its object.
        first = next((e for e in errors if e["loc"] and e["loc"][-1] == "type"), errors[0])
        raise RequestError("invalid_request", first["msg"], _loc(first["loc"]) or None) from exc


@dataclass(frozen=True)
class ToolPolicy:
    """What `tool_choice` asks of the sampler: the prompt alone cannot force or forbid a call."""

    mode: Literal["none", "auto", "required"]
    allowed: tuple[str, ...]  # the function names the model may call (all of them are in the prompt)


def _text_parts(content: str | Sequence[Any], where: str, accepted: tuple[str, ...], key: str = "content") -> list[str]:
    if isinstance(content, str):
        return [content]
    texts = []
    for j, part in enumerate(content):
        kind = getattr(part, "type", None)
        if kind not in accepted:
            raise RequestError(
                "unsupported_content",
                f"content of type {kind!r} is not supported: gpt-oss reads text only",
                f"{where}.{key}[{j}]",
            )
        texts.append(part.refusal if kind == "refusal" else part.text)
    return texts


def _input_items(body: CreateResponseBody) -> list[ItemParam]:
    if body.previous_response_id is not None:
        raise RequestError(
            "previous_response_not_found",
            "responses are not stored here: send the whole conversation as input",
            "previous_response_id",
        )
    if body.input is None:
        return []
    if isinstance(body.input, str):
        return [UserMessageItemParam(content=body.input)]
    return list(body.input)


def _tools(body: CreateResponseBody) -> tuple[list[FunctionToolParam], ToolPolicy]:
    tools = list(body.tools or [])
    names = [t.name for t in tools]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise RequestError("duplicate_tool", f"function {name!r} is declared twice", f"tools[{i}]")
    choice = body.tool_choice
    if choice is None or choice == "auto":
        return tools, ToolPolicy("auto", tuple(names))
    if choice == "none":
        return [], ToolPolicy("none", ())
    if choice == "required":
        if not tools:
            raise RequestError("invalid_tool_choice", "tool_choice is 'required' but no tools are given", "tool_choice")
        return tools, ToolPolicy("required", tuple(names))
    if isinstance(choice, SpecificFunctionParam):
        if choice.name not in names:
            raise RequestError("invalid_tool_choice", f"no function named {choice.name!r} in tools", "tool_choice.name")
        return [t for t in tools if t.name == choice.name], ToolPolicy("required", (choice.name,))
    if isinstance(choice, AllowedToolsParam):
        allowed = []
        for k, ref in enumerate(choice.tools):
            if ref.name not in names:
                raise RequestError(
                    "invalid_tool_choice", f"no function named {ref.name!r} in tools", f"tool_choice.tools[{k}].name"
                )
            allowed.append(ref.name)
        mode = choice.mode or "auto"
        kept = [] if mode == "none" else [t for t in tools if t.name in allowed]
        return kept, ToolPolicy(mode, () if mode == "none" else tuple(n for n in names if n in allowed))
    raise RequestError("invalid_tool_choice", f"unsupported tool_choice {choice!r}", "tool_choice")


def tool_policy(body: CreateResponseBody) -> ToolPolicy:
    """The tool constraint a sampler should enforce for `body` (e.g. `required`: the first message must call)."""
    return _tools(body)[1]


def _response_format_section(fmt: JsonSchemaResponseFormatParam) -> str:
    if not fmt.name:
        raise RequestError("missing_required_parameter", "a json_schema format needs a name", "text.format.name")
    if fmt.schema_ is None:
        raise RequestError("missing_required_parameter", "a json_schema format needs a schema", "text.format.schema")
    lines = [_spec.DEV_RESPONSE_FORMATS_HEADING, _spec.DEV_RESPONSE_FORMAT_NAME.format(name=fmt.name)]
    body = ""
    if fmt.description:
        body = _spec.DEV_RESPONSE_FORMAT_DESCRIPTION.format(description=fmt.description) + _spec.SYS_LINE_SEPARATOR
    lines.append(body + json.dumps(fmt.schema_, ensure_ascii=False, separators=(",", ":")))
    return _spec.SYS_SECTION_SEPARATOR.join(lines)


def _system(body: CreateResponseBody) -> SystemContent:
    system = SystemContent.new()
    effort = body.reasoning.effort if body.reasoning is not None else None
    if effort is not None:
        if effort not in _EFFORTS:
            raise RequestError(
                "unsupported_reasoning_effort",
                f"reasoning effort {effort!r} is not supported by gpt-oss: use one of {sorted(_EFFORTS)}",
                "reasoning.effort",
            )
        system = system.with_reasoning_effort(_EFFORTS[effort])
    return system


def _assistant(text: str, channel: str) -> Message:
    return Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel)


def request_to_conversation(body: CreateResponseBody, system: SystemContent | None = None) -> Conversation:
    """The Harmony conversation for `body`, ready for `render_conversation_for_completion(..., Role.ASSISTANT)`.

    `system` replaces the default system content (identity, dates); a reasoning effort the request
    names is applied to it.
    """
    sys_content = _system(body)
    if system is not None:
        requested = body.reasoning is not None and body.reasoning.effort is not None
        sys_content = (
            system.model_copy(update={"reasoning_effort": sys_content.reasoning_effort}) if requested else system
        )
    instructions: list[str] = [body.instructions] if body.instructions else []
    turns: list[Message] = []
    call_names: dict[str, str] = {}
    for i, item in enumerate(_input_items(body)):
        where = f"input[{i}]"
        if isinstance(item, (SystemMessageItemParam, DeveloperMessageItemParam)):
            instructions.append("".join(_text_parts(item.content, where, ("input_text",))))
        elif isinstance(item, UserMessageItemParam):
            texts = _text_parts(item.content, where, ("input_text",))
            turns.append(Message.from_role_and_contents(Role.USER, [TextContent(text=t) for t in texts]))
        elif isinstance(item, AssistantMessageItemParam):
            texts = _text_parts(item.content, where, (_OUTPUT_TEXT, "refusal"))
            channel = _CHANNEL_OF_PHASE.get(item.phase or "", _spec.CHANNEL_ANSWER)
            turns.append(_assistant("".join(texts), channel))
        elif isinstance(item, FunctionCallItemParam):
            call_names[item.call_id] = item.name
            turns.append(
                _assistant(item.arguments, _spec.CHANNEL_TOOL_CALLS)
                .with_recipient(_FUNCTIONS_PREFIX + item.name)
                .with_content_type(_JSON_CONTENT_TYPE)
            )
        elif isinstance(item, FunctionCallOutputItemParam):
            name = call_names.get(item.call_id)
            if name is None:
                raise RequestError(
                    "unknown_call_id",
                    f"no earlier function_call item has call_id {item.call_id!r}",
                    f"{where}.call_id",
                )
            output = _text_parts(item.output, where, ("input_text",), key="output")
            turns.append(
                Message.from_author_and_content(Author.new(Role.TOOL, _FUNCTIONS_PREFIX + name), "".join(output))
                .with_recipient(Role.ASSISTANT.value)
                .with_channel(_spec.CHANNEL_TOOL_CALLS)
            )
        elif isinstance(item, ReasoningItemParam):
            if item.encrypted_content is not None:
                raise RequestError(
                    "unsupported_parameter", "encrypted reasoning cannot be read here", f"{where}.encrypted_content"
                )
            text = "".join(part.text for part in item.summary)
            if text:
                turns.append(_assistant(text, _spec.CHANNEL_REASONING))
        elif isinstance(item, ItemReferenceParam):
            raise RequestError(
                "item_reference_not_found",
                f"item {item.id!r} cannot be referenced: items are not stored here",
                f"{where}.id",
            )
        elif isinstance(item, CompactionSummaryItemParam):
            raise RequestError("unsupported_item", "compaction items are not supported by gpt-oss", f"{where}.type")
        elif isinstance(item, ExtensionItem):
            raise RequestError("unsupported_item", f"item type {item.type!r} is not supported", f"{where}.type")
        else:  # pragma: no cover - the union is closed
            raise RequestError("unsupported_item", f"item {type(item).__name__} is not supported", where)
    tools, _policy = _tools(body)
    developer = DeveloperContent.new()
    if instructions:
        developer = developer.with_instructions(_spec.SYS_SECTION_SEPARATOR.join(instructions))
    if tools:
        developer = developer.with_function_tools(
            [
                ToolDescription.new(
                    t.name,
                    t.description or "",
                    t.parameters.model_dump(mode="json") if t.parameters is not None else None,
                )
                for t in tools
            ]
        )
    contents: list[Content] = [developer] if instructions or tools else []
    fmt = body.text.format if body.text is not None else None
    if isinstance(fmt, JsonSchemaResponseFormatParam):
        # The section follows whatever the developer content renders (instructions, then tools).
        separator = _spec.SYS_SECTION_SEPARATOR if contents else ""
        contents.append(TextContent(text=separator + _response_format_section(fmt)))
    messages = [Message.from_role_and_content(Role.SYSTEM, sys_content)]
    if contents:
        messages.append(Message.from_role_and_contents(Role.DEVELOPER, contents))
    return Conversation.from_messages(messages + turns)
