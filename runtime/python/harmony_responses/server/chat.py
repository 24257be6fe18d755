"""Chat Completions on the Harmony path: a `/v1/chat/completions` request → an Open Responses request.

`ChatCompletionRequest` validates the body (errors name `messages[2].content` and so on). `to_responses_body`
maps it onto a `CreateResponseBody`, message by message:

- `system` / `developer` → the same messages (the developer message's instructions);
- `user` → a user message (`text`, `image_url`, `file` parts → `input_text`, `input_image`, `input_file`;
  `input_audio` is refused, or a placeholder with `--media placeholder`);
- `assistant` → its `reasoning_content` as a reasoning item, its text as an assistant message, each
  of its `tool_calls` as a `function_call` item (`id` → `call_id`);
- `tool` → a `function_call_output` for its `tool_call_id`;

`tools`, `tool_choice`, `parallel_tool_calls`, `response_format` (`json_object` becomes a JSON Schema
format named `json_object` whose schema is any object), `reasoning_effort`, the sampling fields and
the budget (`max_completion_tokens`, else `max_tokens`) follow. A `RequestError` the bridge raises
about the mapped request is renamed back onto the Chat request's fields (`chat_request_error`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._tables import spec as _spec
from ..bridge import Verbatim
from ..types import (
    AssistantMessageItemParam,
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    FunctionToolParam,
    InputFileContentParam,
    InputImageContentParamAutoParam,
    InputTextContentParam,
    JsonSchemaResponseFormatParam,
    ReasoningItemParam,
    ReasoningSummaryContentParam,
    UserMessageItemParam,
)
from .media import AUDIO_MARKER
from .respond import LOGPROBS_INCLUDE, RequestError
from .settings import MediaPolicy

# Chat Completions words spelled like Harmony's (see tests/test_facts_once.py): its legacy function-calling fields.
WIRE = {"legacy_function_fields": ("functions", "function_call")}


def _tag(model: type[BaseModel], field: str = "type") -> str:
    """The discriminator value an Open Responses model stands for (its `type`, or `role`)."""
    info = model.model_fields[field]
    if isinstance(info.default, str):
        return info.default
    literal = next(a for a in get_args(info.annotation) if get_origin(a) is Literal)  # `Literal["x"] | None`
    value: str = get_args(literal)[0]
    return value


_MESSAGE = _tag(UserMessageItemParam)
_USER = _tag(UserMessageItemParam, "role")
_ASSISTANT = _tag(AssistantMessageItemParam, "role")
_REASONING = _tag(ReasoningItemParam)
_SUMMARY_TEXT = _tag(ReasoningSummaryContentParam)
_FUNCTION_CALL = _tag(FunctionCallItemParam)
_FUNCTION_CALL_OUTPUT = _tag(FunctionCallOutputItemParam)
_FUNCTION_TOOL = _tag(FunctionToolParam)
_INPUT_TEXT = _tag(InputTextContentParam)
_INPUT_IMAGE = _tag(InputImageContentParamAutoParam)
_INPUT_FILE = _tag(InputFileContentParam)
_JSON_SCHEMA = _tag(JsonSchemaResponseFormatParam)
# Chat's `json_object` has no Open Responses twin: a JSON Schema format accepting any object stands in.
_JSON_OBJECT_FORMAT = {"type": _JSON_SCHEMA, "name": "json_object", "schema": {"type": "object"}}


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class TextPart(_Model):
    type: Literal["text"]
    text: str


class RefusalPart(_Model):
    type: Literal["refusal"]
    refusal: str


class ImageURL(_Model):
    url: str
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Model):
    type: Literal["image_url"]
    image_url: ImageURL


class AudioPart(_Model):
    type: Literal["input_audio"]
    input_audio: dict[str, Any]


class FileRef(_Model):
    file_data: str | None = None
    file_id: str | None = None
    filename: str | None = None


class FilePart(_Model):
    type: Literal["file"]
    file: FileRef


UserPart = Annotated[TextPart | ImagePart | AudioPart | FilePart, Field(discriminator="type")]
AssistantPart = Annotated[TextPart | RefusalPart, Field(discriminator="type")]


class SystemMessage(_Model):
    role: Literal["system"]
    content: str | list[TextPart]
    name: str | None = None


class DeveloperMessage(_Model):
    role: Literal["developer"]
    content: str | list[TextPart]
    name: str | None = None


class UserMessage(_Model):
    role: Literal["user"]
    content: str | list[UserPart]
    name: str | None = None


class CalledFunction(_Model):
    name: str
    arguments: str


class ToolCall(_Model):
    id: str = Field(min_length=1, max_length=64)
    type: Literal["function"] = "function"
    function: CalledFunction


class AssistantMessage(_Model):
    role: Literal["assistant"]
    content: str | list[AssistantPart] | None = None
    refusal: str | None = None
    tool_calls: list[ToolCall] | None = None
    reasoning_content: str | None = None  # what this server (and vLLM, SGLang) return as the reasoning
    name: str | None = None


class ToolMessage(_Model):
    role: Literal["tool"]
    content: str | list[TextPart]
    tool_call_id: str = Field(min_length=1, max_length=64)


ChatMessage = Annotated[
    SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]


class FunctionDefinition(_Model):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ChatTool(_Model):
    type: Literal["function"]
    function: FunctionDefinition


class FunctionName(_Model):
    name: str


class NamedToolChoice(_Model):
    type: Literal["function"]
    function: FunctionName


class JsonSchemaFormat(_Model):
    name: str
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextFormat(_Model):
    type: Literal["text"]


class JsonObjectFormat(_Model):
    type: Literal["json_object"]


class JsonSchemaResponseFormat(_Model):
    type: Literal["json_schema"]
    json_schema: JsonSchemaFormat


ResponseFormat = Annotated[TextFormat | JsonObjectFormat | JsonSchemaResponseFormat, Field(discriminator="type")]


class StreamOptions(_Model):
    include_usage: bool | None = None


class ChatCompletionRequest(_Model):
    """The fields of a Chat Completions request this server reads (others are kept and ignored)."""

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ChatTool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    reasoning_effort: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    # Held to the engines' ranges where every request is, in the Responses body they become (`parse_body`).
    temperature: float | None = None
    top_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    n: int | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    stop: str | list[str] | None = None
    logit_bias: dict[str, Any] | None = None

    @property
    def budget(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


def _loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "list[...]") or (part and part[0].isupper()) or part.startswith(("list[", "function-")):
            continue  # a union member's name, not a key of the request
        else:
            out += f".{part}" if out else part
    return out


_TAG_ERRORS = ("union_tag_invalid", "union_tag_not_found")


def parse_chat_request(raw: Any) -> ChatCompletionRequest:
    """Validate a Chat Completions body; `RequestError` names the first bad field."""
    try:
        request = ChatCompletionRequest.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        first = next((e for e in errors if e["type"] in _TAG_ERRORS), errors[0])
        loc = list(first["loc"])
        if first["type"] in _TAG_ERRORS:  # the discriminator (`role`, `type`) is the field that is wrong
            loc.append(str((first.get("ctx") or {}).get("discriminator", "")).strip("'"))
        raise RequestError.of(_spec.REQUEST_ERROR_INVALID, _loc(loc) or None, reason=Verbatim(first["msg"])) from exc
    _refuse_unhonoured(request)
    return request


def _refuse_unhonoured(request: ChatCompletionRequest) -> None:
    extra = request.model_extra or {}

    def refuse(field: str, value: object, why: str) -> RequestError:
        return RequestError.of(_spec.REQUEST_ERROR_NOT_HONOURED, field, value=value, why=Verbatim(why))

    if request.n not in (None, 1):
        raise refuse("n", request.n, "only one choice (n=1) is generated here")
    if request.stop:
        raise refuse("stop", request.stop, "stop sequences are not supported here")
    if request.logit_bias:
        raise refuse("logit_bias", request.logit_bias, "logit_bias is not supported here")
    for legacy in WIRE["legacy_function_fields"]:
        if extra.get(legacy) is not None:
            raise refuse(legacy, extra[legacy], "deprecated: use tools and tool_choice")
    if extra.get("audio") is not None or any(m != "text" for m in extra.get("modalities") or []):
        raise refuse("modalities", extra.get("modalities") or extra.get("audio"), "only text output is generated here")


def _text(content: str | Sequence[TextPart]) -> str:
    return content if isinstance(content, str) else "".join(p.text for p in content)


class _Items:
    """The mapped input items, each remembering the Chat field it came from."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.origins: list[tuple[str, dict[str, str]]] = []

    def add(self, item: dict[str, Any], origin: str, renames: dict[str, str] | None = None) -> None:
        self.items.append(item)
        self.origins.append((origin, renames or {}))


def _user_parts(message: UserMessage, where: str, media: MediaPolicy) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str):
        return message.content
    parts: list[dict[str, Any]] = []
    for j, part in enumerate(message.content):
        if isinstance(part, TextPart):
            parts.append({"type": _INPUT_TEXT, "text": part.text})
        elif media is MediaPolicy.REJECT:  # refused in Chat's own words: its part type, at its place
            raise RequestError.of(_spec.REQUEST_ERROR_UNSUPPORTED_CONTENT, f"{where}.content[{j}]", type=part.type)
        elif isinstance(part, ImagePart):
            image: dict[str, Any] = {"type": _INPUT_IMAGE, "image_url": part.image_url.url}
            if part.image_url.detail is not None:
                image["detail"] = part.image_url.detail
            parts.append(image)
        elif isinstance(part, FilePart):
            file: dict[str, Any] = {"type": _INPUT_FILE}
            if part.file.file_data is not None:
                file["file_data"] = part.file.file_data
            if part.file.filename is not None:
                file["filename"] = part.file.filename
            parts.append(file)
        else:
            parts.append({"type": _INPUT_TEXT, "text": AUDIO_MARKER})
    return parts


def to_responses_body(request: ChatCompletionRequest, media: MediaPolicy) -> tuple[dict[str, Any], _Items]:
    """The Open Responses request body for a Chat request, and where each input item came from."""
    items = _Items()
    for i, message in enumerate(request.messages):
        where = f"messages[{i}]"
        if isinstance(message, (SystemMessage, DeveloperMessage)):
            items.add({"type": _MESSAGE, "role": message.role, "content": _text(message.content)}, where)
        elif isinstance(message, UserMessage):
            items.add({"type": _MESSAGE, "role": _USER, "content": _user_parts(message, where, media)}, where)
        elif isinstance(message, AssistantMessage):
            if message.reasoning_content:
                summary = [{"type": _SUMMARY_TEXT, "text": message.reasoning_content}]
                reasoning = {"type": _REASONING, "summary": summary}
                items.add(reasoning, where, {".summary[0].text": ".reasoning_content"})
            content = message.content
            text = (
                content
                if isinstance(content, str)
                else "".join(p.text if isinstance(p, TextPart) else p.refusal for p in content or [])
            )
            text = text or message.refusal or ""
            if text or not message.tool_calls:
                items.add({"type": _MESSAGE, "role": _ASSISTANT, "content": text}, where)
            for k, call in enumerate(message.tool_calls or []):
                items.add(
                    {
                        "type": _FUNCTION_CALL,
                        "call_id": call.id,
                        "name": call.function.name,
                        "arguments": call.function.arguments,
                    },
                    f"{where}.tool_calls[{k}]",
                    {".call_id": ".id", ".name": ".function.name", ".arguments": ".function.arguments"},
                )
        else:
            output = {"type": _FUNCTION_CALL_OUTPUT, "call_id": message.tool_call_id, "output": _text(message.content)}
            items.add(output, where, {".call_id": ".tool_call_id", ".output": ".content"})
    body: dict[str, Any] = {"model": request.model, "input": items.items}
    if request.tools is not None:
        body["tools"] = [
            {
                "type": _FUNCTION_TOOL,
                "name": t.function.name,
                "description": t.function.description,
                "parameters": t.function.parameters,
                "strict": t.function.strict,
            }
            for t in request.tools
        ]
    choice = request.tool_choice
    if isinstance(choice, NamedToolChoice):
        body["tool_choice"] = {"type": _FUNCTION_TOOL, "name": choice.function.name}
    elif choice is not None:
        body["tool_choice"] = choice
    if request.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = request.parallel_tool_calls
    fmt = request.response_format
    if isinstance(fmt, JsonSchemaResponseFormat):
        spec = fmt.json_schema
        body["text"] = {
            "format": {
                "type": _JSON_SCHEMA,
                "name": spec.name,
                "description": spec.description,
                "schema": spec.schema_,
                "strict": spec.strict,
            }
        }
    elif isinstance(fmt, JsonObjectFormat):
        body["text"] = {"format": dict(_JSON_OBJECT_FORMAT)}
    if request.logprobs or request.top_logprobs:  # honoured where the engine returns them, else the 400 names it
        body["include"] = [LOGPROBS_INCLUDE]
        body["top_logprobs"] = request.top_logprobs or 0
    if request.reasoning_effort is not None:
        body["reasoning"] = {"effort": request.reasoning_effort}
    for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    return body, items


_INPUT = re.compile(r"^input\[(\d+)\](.*)$")
_RENAMED_PREFIXES = (
    ("tool_choice.name", "tool_choice.function.name"),
    ("text.format", "response_format.json_schema"),
    ("reasoning.effort", "reasoning_effort"),
    ("max_output_tokens", "max_completion_tokens"),
    ("include[0]", "logprobs"),
)
_TOOL_FIELD = re.compile(r"^tools\[(\d+)\]\.(name|description|parameters|strict)(.*)$")


def chat_param(param: str | None, items: _Items) -> str | None:
    """A Responses request path (`input[3].call_id`) as the Chat request's (`messages[2].tool_call_id`)."""
    if param is None:
        return None
    match = _INPUT.match(param)
    if match is not None:
        index = int(match.group(1))
        if index >= len(items.origins):
            return param
        origin, renames = items.origins[index]
        rest = match.group(2)
        for old, new in renames.items():
            if rest.startswith(old):
                rest = new + rest[len(old) :]
                break
        return origin + rest
    tool = _TOOL_FIELD.match(param)
    if tool is not None:
        return f"tools[{tool.group(1)}].function.{tool.group(2)}{tool.group(3)}"
    for old, new in _RENAMED_PREFIXES:
        if param.startswith(old):
            return new + param[len(old) :]
    return param


def chat_request_error(exc: RequestError, items: _Items) -> RequestError:
    """The same error, naming the Chat request's field."""
    return RequestError(exc.code, exc.message, chat_param(exc.param, items))
