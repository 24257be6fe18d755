"""Open Responses request → Harmony conversation, for gpt-oss.

`request_to_conversation(body)` maps a `CreateResponseBody` onto the messages the model is trained on:
`instructions` and `system`/`developer` input messages become the developer message's instructions,
function tools its `functions` namespace, `reasoning.effort` the system message's reasoning line,
`text.format` (json_schema) a `# Response Formats` section closing the developer message; the other
items become messages in order (`items_to_messages`). Whatever the model cannot take raises
`RequestError`, a 400-style error that names the offending parameter; nothing is dropped silently.

Every item the bridge emits comes back as input and renders to the message the model wrote:

- `reasoning` → an analysis message of its `content` (what the model wrote); only without content, of
  its `summary` (an empty summary renders nothing); with the content type in its `harmony:content_type`;
- an assistant `message` → its phase's channel (a preamble on commentary, the answer on final), unless its
  `harmony:channel` names the channel the model wrote it on (null: none, as an answer written without a
  header); with the content type in its `harmony:content_type` (absent or null: none);
- `function_call` → a message to the function, on the channel and with the content type the item's
  vendor fields name (`harmony:channel`, `harmony:content_type`; null: none), by default the
  tool-calls channel and the constrained function-arguments type; its `function_call_output` → a tool
  message from the function to the assistant, on the call's channel;
- the vendor-prefixed call items (`harmony:browser_call`, `harmony:python_call`, `harmony:container_call`,
  `harmony:tool_call`) → a message to their `recipient`, with their `arguments`, `channel` and
  `content_type`; a vendor-prefixed tool output item (`harmony:tool_output`) names its call by the call
  item's `id` and renders as a tool message from the call's recipient to the assistant, on the call's channel.

`conversation_parts(body, history=..., calls=...)` is the same mapping for a request that continues
earlier turns (`previous_response_id`): the request's system and developer messages, the stored turns'
Harmony messages, then the new input. Compaction items render through the caller's `CompactionReader`
(only the server that made an item can open it); reasoning items that carry `encrypted_content` through its
`ReasoningReader` (`bridge.encrypted`), refused without one.

The chain-of-thought rule is the renderer's (`render_conversation_for_completion`, as the reference): when
the last assistant message is a final answer, analysis messages before the first final answer are left
out; next to a tool call they stay.

`parse_request(raw, capabilities)` checks a JSON body in three steps, each failure one `RequestError`:

1. the JSON limits of `json_input` (at most `MAX_JSON_DEPTH` levels, no lone surrogate in any string
   or key, no NaN), then every tool and response-format schema at most `MAX_SCHEMA_CHARS` characters;
2. the Open Responses schema: the error names the request's own path (`input[0].role`, never a
   pydantic union member) and says what was expected there and what was found;
3. `check_supported`: a field is either honoured or refused. The bridge honours what shapes the prompt;
   `Capabilities` says what the caller adds (a store, background runs, sampling, a token budget…).
   Asking for something no one here does (`store: true` without a store, `seed` without a sampler, a
   field outside the spec such as `user`) is a 400 naming the field, never silently dropped.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, get_args, get_origin

from pydantic import ValidationError

from .. import types as _types
from .._tables import ItemKind
from .._tables import spec as _spec
from ..json_input import MAX_SCHEMA_CHARS, JSONInputError, check_json_value, format_path
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
    ToolNamespaceConfig,
)
from ..types import (
    AllowedToolsParam,
    AssistantMessageItemParam,
    CodeInterpreterCallItemParam,
    CodeInterpreterOutputLogs,
    CompactionSummaryItemParam,
    CreateResponseBody,
    DeveloperMessageItemParam,
    ErrorPayload,
    ExtensionItem,
    FunctionCall,
    FunctionCallItemParam,
    FunctionCallOutputItemParam,
    FunctionToolParam,
    ItemParam,
    ItemReferenceParam,
    JsonSchemaResponseFormatParam,
    McpApprovalRequestItemParam,
    McpApprovalResponseItemParam,
    McpCallItemParam,
    McpListToolsItemParam,
    NamespaceToolParam,
    ReasoningItemParam,
    SpecificFunctionParam,
    SystemMessageItemParam,
    UnavailableTool,
    UserMessageItemParam,
    WebSearchCallItemParam,
    is_vendor_type,
)
from .tools import (
    DeclaredTool,
    ToolPlan,
    ToolPolicy,
    declared_tools,
    namespace_tools,
    qualified,
    read_tools,
    recipient,
)
from .validation import ITEM_UNION, explain, found, validate

_FUNCTIONS_PREFIX = _spec.HEADER_FUNCTION_NAMESPACE + _spec.HEADER_NAMESPACE_SEPARATOR
_CONSTRAIN = _spec.SPELLING_CONSTRAIN
_JSON_CONTENT_TYPE = _CONSTRAIN + _spec.CONTENT_TYPE_FUNCTION_ARGUMENTS
_EFFORTS = {e.value.lower(): e for e in ReasoningEffort}
_OUTPUT_TEXT = _spec.ITEM_KINDS[ItemKind.MESSAGE]["text"]["part"]
# An assistant message's phase → the channel it was written on.
_CHANNEL_OF_PHASE = {
    phase: _spec.CHANNEL_BY_PURPOSE[purpose] for purpose, phase in _spec.ITEM_KINDS[ItemKind.MESSAGE]["phases"].items()
}
# The vendor-prefixed call items the bridge emits, and the models that read them and their outputs as input.
_CALL_TYPES = tuple(row["type"] for row in _spec.ITEM_KINDS.values() if is_vendor_type(row["type"]))
_CALL_MODEL: Any = getattr(_types, _spec.INPUT_CALL_SCHEMA)
_TOOL_OUTPUT_MODEL: Any = getattr(_types, _spec.INPUT_TOOL_OUTPUT_SCHEMA)
# The vendor-prefixed fields in which an item keeps the header the model wrote → their attribute on each input model
# that reads them (`harmony:channel` → `harmony_channel`).
_HeaderItem = FunctionCallItemParam | AssistantMessageItemParam | ReasoningItemParam
_HEADER_KEYS = (_spec.RESPONSE_CHANNEL_FIELD, _spec.RESPONSE_CONTENT_TYPE_FIELD)
_HEADER_ATTRIBUTES: dict[tuple[type[Any], str], str] = {
    (model, f.alias): name
    for model in (FunctionCallItemParam, AssistantMessageItemParam, ReasoningItemParam)
    for name, f in model.model_fields.items()
    if f.alias in _HEADER_KEYS
}


def _header(item: _HeaderItem, key: str, default: str | None) -> str | None:
    """The header field `key` of an input item: its value when given (null: none), else `default`."""
    attribute = _HEADER_ATTRIBUTES[type(item), key]
    value: str | None = getattr(item, attribute) if attribute in item.model_fields_set else default
    return value


class RequestError(ValueError):
    """A request the model cannot serve: an HTTP 400 with an Open Responses error body.

    `param` names the request field (`input[2].content[0]`, `tools[1]`, `reasoning.effort`). The codes
    and messages are the spec's (`REQUEST_ERRORS`): build one with `RequestError.of(handle, param, ...)`.
    """

    status = 400
    type = _spec.REQUEST_ERROR_TYPE

    def __init__(self, code: str, message: str, param: str | None = None) -> None:
        super().__init__(f"{param}: {message}" if param else message)
        self.code = code
        self.message = message
        self.param = param

    @classmethod
    def of(cls, handle: str, param: str | None = None, **fields: object) -> RequestError:
        """The spec's error `handle`, its message filled with `fields` (shown as JSON unless already text)."""
        entry = _spec.REQUEST_ERRORS[handle]
        shown = {key: value if isinstance(value, Verbatim) else _shown(value) for key, value in fields.items()}
        return cls(entry["code"], entry["message"].format(**shown), param)

    def to_payload(self) -> ErrorPayload:
        """The error as the spec's `ErrorPayload` (the `error` of an error event or response body)."""
        return ErrorPayload(type=self.type, code=self.code, message=self.message, param=self.param)

    def to_body(self) -> dict[str, Any]:
        """The HTTP 400 JSON body: `{"error": {...}}`."""
        return {"error": self.to_payload().model_dump(mode="json")}


# -- what the caller honours ------------------------------------------------------------------------------


class HostedTools(str, Enum):
    """What to do with a declared tool of a type the server would have to run itself (`web_search`, `custom`, ...)."""

    OMIT = "omit"  # leave it out of the prompt and say so in the response's `harmony:unavailable_tools`
    REJECT = "reject"  # refuse the request: a 400 naming the tool


@dataclass(frozen=True)
class Capabilities:
    """What the caller of the bridge does beyond turning the request into a prompt.

    The bridge itself honours the fields that shape the prompt or are echoed (`model`, `input`,
    `instructions`, `tools`, `tool_choice`, `text.format`, `reasoning.effort`, `metadata`,
    `parallel_tool_calls` and `max_tool_calls`, which cap the calls read from one completion). Every other field
    asks the caller for something; a request that asks, with the flag for it off, is refused with a 400
    naming the field (`check_supported`). A value that asks for nothing (`store: false`, `temperature: 1`,
    `top_logprobs: 0`, `service_tier: "auto"`) is always accepted.
    """

    store: bool = False  # keeps responses: `store: true`, `previous_response_id`, `conversation`
    background: bool = False  # runs `background: true` requests for clients to poll
    sampling: bool = False  # samples the completion: `temperature`, `top_p`, the penalties, `seed`
    logprobs: bool = False  # returns log probabilities: `top_logprobs`, include `message.output_text.logprobs`
    encrypted_reasoning: bool = False  # seals reasoning items: include `reasoning.encrypted_content`
    max_output_tokens: bool = False  # stops at `max_output_tokens` and answers `incomplete`
    truncation: bool = False  # shortens an input too long for the context (`truncation: "auto"`)
    extra_fields: frozenset[str] = frozenset()  # fields outside the spec that the caller reads itself
    hosted_tools: HostedTools = HostedTools.OMIT  # declared tools no one here runs (see `split_tools`)
    web_search: bool = False  # runs `web_search` tools: include `web_search_call.action.sources`
    code_interpreter: bool = False  # runs `code_interpreter` tools: include `code_interpreter_call.outputs`
    runs_tools: frozenset[str] = frozenset()  # tool types the caller runs itself (hosted tools with a backend)


NOTHING_MORE = Capabilities()
"""The bridge alone: every field that asks the caller for something is refused."""


class Verbatim(str):
    """A value for `RequestError.of` to put in its message as it is, not shown as JSON (a reason, a list
    already shown)."""


# The capabilities the spec lists (and its loader holds every field's to) must be the caller's (`Capabilities`) flags.
_FLAGS = frozenset(Capabilities.__dataclass_fields__) - {"extra_fields", "hosted_tools", "runs_tools"}
if not set(_spec.CAPABILITIES) <= _FLAGS:
    raise ImportError(f"spec/mapping/requests.json names capabilities {sorted(set(_spec.CAPABILITIES) - _FLAGS)}")


def _honoured(capabilities: Capabilities, flag: str | None) -> bool:
    return flag is not None and bool(getattr(capabilities, flag))


def _shown(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # the value's JSON: 2.0 is 2
    return json.dumps(value, ensure_ascii=True, default=str)


def _refusal(field: str, value: Any, capabilities: Capabilities) -> RequestError | None:
    """The 400 for `value` of `field` when its row of `REQUEST_FIELDS` refuses it without `capabilities` (a value
    outside the row's neutral ones asks for its capability), else None."""
    row = _spec.REQUEST_FIELDS.get(field)
    if row is None or row["rule"] != "refused" or value in row["neutral"] or _honoured(capabilities, row["capability"]):
        return None  # each field has one type once validated
    error = row["error"] or _spec.REQUEST_ERROR_NOT_HONOURED
    return RequestError.of(error, field, value=value, why=Verbatim(row["why"]))


# The rows of `REQUEST_FIELDS` that may refuse a field of the request model, in order, with the field's path:
# what `check_supported` looks at in every request (the other rows never refuse a value).
_REFUSABLE = tuple(
    (field, tuple(field.split(".")))
    for field, row in _spec.REQUEST_FIELDS.items()
    if row["rule"] == "refused" and field.split(".")[0] in CreateResponseBody.model_fields
)


def check_supported(body: CreateResponseBody, capabilities: Capabilities = NOTHING_MORE) -> None:
    """Refuse, with a 400 naming the field, whatever `body` asks that neither the bridge nor `capabilities` does.

    What asks for what is the spec's (`spec/mapping/requests.json`): the fields of the spec in `REQUEST_FIELDS`
    order, then `include` (`INCLUDES`), then the fields outside the spec (a label is kept).
    """
    for field, path in _REFUSABLE:
        value: Any = body
        for name in path:
            value = getattr(value, name, None)
        refused = _refusal(field, value, capabilities)
        if refused is not None:
            raise refused
    for i, include in enumerate(body.include or []):
        if not _honoured(capabilities, _spec.INCLUDES.get(include)):
            raise RequestError.of(_spec.REQUEST_ERROR_NOT_INCLUDABLE, f"include[{i}]", value=include)
    for key, value in (body.model_extra or {}).items():
        if key in capabilities.extra_fields:
            continue
        if key not in _spec.REQUEST_FIELDS:
            raise RequestError.of(_spec.REQUEST_ERROR_UNKNOWN_FIELD, key)
        refused = _refusal(key, value, capabilities)
        if refused is not None:
            raise refused


# -- validation errors, in the request's own words -----------------------------------------------------


def _literal_args(model: type[Any], field: str) -> tuple[Any, ...]:
    info = model.model_fields.get(field)
    if info is None:
        return ()
    annotation = info.annotation
    members = get_args(annotation) if get_origin(annotation) is not Literal else (annotation,)
    args: list[Any] = []
    for member in members:
        if get_origin(member) is Literal:
            args.extend(get_args(member))
    return tuple(a for a in args if a is not None)


def _item_kinds() -> dict[str, tuple[str, ...]]:
    """Each input item `type` the spec defines → the roles it takes (empty: no role), read from `ItemParam`."""
    union = get_args(ItemParam.__value__)[0]
    kinds: dict[str, list[str]] = {}
    for member in get_args(union):
        model = get_args(member)[0]
        for kind in _literal_args(model, "type"):
            kinds.setdefault(kind, []).extend(_literal_args(model, "role"))
    return {k: tuple(sorted(v)) for k, v in sorted(kinds.items())}


_ITEM_KINDS = _item_kinds()


def _choices(values: Sequence[object]) -> str:
    return ", ".join(json.dumps(v) for v in values)


def _explain_item(parts: list[int | str], item: object) -> RequestError:
    """An input item no member of the item union takes: a wrong `type`, or a wrong `role` for it."""
    where = format_path("", parts)
    kind = item.get("type") if isinstance(item, Mapping) else None
    role = item.get("role") if isinstance(item, Mapping) else None
    if kind is None and isinstance(role, str):  # an easy input message: the type that takes roles
        kind = next((k for k, roles in _ITEM_KINDS.items() if roles), None)
    roles = _ITEM_KINDS.get(kind) if isinstance(kind, str) else None
    if roles:
        return RequestError.of(
            _spec.REQUEST_ERROR_ITEM_ROLE,
            f"{where}.role",
            roles=Verbatim(_choices(roles)),
            type=kind,
            found=Verbatim(found(role)),
        )
    return RequestError.of(
        _spec.REQUEST_ERROR_ITEM_TYPE,
        f"{where}.type",
        types=Verbatim(_choices(list(_ITEM_KINDS))),
        found=Verbatim(found(kind)),
    )


def _explain(exc: ValidationError, raw: object) -> RequestError:
    """One `RequestError` for a failed validation, in the request's own words (see `validation.explain`)."""
    problem = explain(exc, raw)
    if problem.union == ITEM_UNION:
        return _explain_item(list(problem.parts), problem.value)
    return RequestError.of(problem.error, problem.path() or None, reason=Verbatim(problem.message))


def _check_schema(schema: Mapping[str, Any], where: str) -> None:
    """A schema the prompt will show: within the depth limit, valid Unicode, and at most `MAX_SCHEMA_CHARS`."""
    try:
        check_json_value(schema, where)
    except JSONInputError as exc:
        raise RequestError.of(_spec.REQUEST_ERROR_INVALID, exc.path, reason=Verbatim(exc.reason)) from None
    size = len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
    if size > MAX_SCHEMA_CHARS:
        raise RequestError.of(_spec.REQUEST_ERROR_SCHEMA_TOO_LARGE, where, size=size, limit=MAX_SCHEMA_CHARS)


def _check_schemas(body: CreateResponseBody) -> None:
    for declared in declared_tools(body):
        if declared.tool.parameters is not None:
            _check_schema(declared.tool.parameters.model_extra or {}, f"{declared.where}.parameters")
    fmt = body.text.format if body.text is not None else None
    if isinstance(fmt, JsonSchemaResponseFormatParam) and fmt.schema_ is not None:
        _check_schema(fmt.schema_, "text.format.schema")


def parse_request(raw: Mapping[str, Any], capabilities: Capabilities = NOTHING_MORE) -> CreateResponseBody:
    """Validate a JSON request body; the first problem becomes a `RequestError` naming its place.

    Before the schema, the body must be within `json_input`'s limits (depth, lone surrogates, NaN); after
    it, every schema within `MAX_SCHEMA_CHARS`, and every field either honoured by `capabilities` or
    refused (`check_supported`).
    """
    if not isinstance(raw, Mapping):
        raise RequestError.of(_spec.REQUEST_ERROR_NOT_AN_OBJECT, found=Verbatim(found(raw)))
    try:
        check_json_value(raw, "")
    except JSONInputError as exc:
        raise RequestError.of(_spec.REQUEST_ERROR_INVALID, exc.path or None, reason=Verbatim(exc.reason)) from None
    raw, unavailable = split_tools(raw, capabilities.hosted_tools, capabilities.runs_tools)
    try:
        body = validate(CreateResponseBody, raw)
    except ValidationError as exc:
        raise _explain(exc, raw) from None
    _check_schemas(body)
    check_supported(body, capabilities)
    if unavailable:
        assert body.model_extra is not None
        body.model_extra[_UNAVAILABLE_FIELD] = [t.model_dump(mode="json", exclude_none=True) for t in unavailable]
    return body


# The tool types a request declares that the bridge renders (function and namespace tools); any other type is a
# tool the server would run itself.
_TOOL_TYPES = frozenset(
    kind for model in (FunctionToolParam, NamespaceToolParam) for kind in _literal_args(model, "type")
)
_UNAVAILABLE_FIELD = _spec.RESPONSE_UNAVAILABLE_TOOLS_FIELD
_HOSTED_REASON = _spec.HOSTED_TOOL_REASONS["omitted"]


def split_tools(
    raw: Mapping[str, Any], policy: HostedTools, runs: frozenset[str] = frozenset()
) -> tuple[Mapping[str, Any], list[UnavailableTool]]:
    """The body with the tools the bridge renders only, and the declared tools left out (the server would have to
    run them: `web_search`, `custom`, `local_shell`, ...). With `HostedTools.REJECT` such a tool is a 400 naming it.
    A tool of a type in `runs` is run by the caller (a hosted tool it has a backend for): left out of the body too,
    but not listed (the caller reads it from the raw body, `hosted_tools_declared`).

    A tool whose `type` is not a string is left for the schema to report."""
    tools = raw.get("tools")
    if not isinstance(tools, list):
        return raw, []
    kept: list[Any] = []
    unavailable: list[UnavailableTool] = []
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if not isinstance(kind, str) or kind in _TOOL_TYPES:
            kept.append(tool)
            continue
        if kind in runs:
            continue
        if policy is HostedTools.REJECT:
            raise RequestError.of(
                _spec.REQUEST_ERROR_HOSTED_TOOL,
                f"tools[{i}].type",
                type=kind,
                reason=Verbatim(_spec.HOSTED_TOOL_REASONS["refused"]),
            )
        name = tool.get("name")
        unavailable.append(
            UnavailableTool(type=kind, name=name if isinstance(name, str) else None, reason=_HOSTED_REASON)
        )
    if len(kept) == len(tools):
        return raw, []
    return {**raw, "tools": kept}, unavailable


def hosted_tools_declared(raw: Mapping[str, Any], runs: frozenset[str]) -> list[tuple[int, Mapping[str, Any]]]:
    """The declared tools of a type in `runs` (the ones `split_tools` leaves to the caller), with their index in
    `tools`."""
    tools = raw.get("tools")
    if not isinstance(tools, list):
        return []
    return [(i, t) for i, t in enumerate(tools) if isinstance(t, Mapping) and t.get("type") in runs]


def unavailable_tools(body: CreateResponseBody) -> list[dict[str, Any]]:
    """The declared tools `parse_request` left out of the prompt (`split_tools`), as the response lists them."""
    listed: list[dict[str, Any]] = (body.model_extra or {}).get(_UNAVAILABLE_FIELD) or []
    return listed


def _text_parts(content: str | Sequence[Any], where: str, accepted: tuple[str, ...], key: str = "content") -> list[str]:
    if isinstance(content, str):
        return [content]
    texts = []
    for j, part in enumerate(content):
        kind = getattr(part, "type", None)
        if kind not in accepted:
            raise RequestError.of(_spec.REQUEST_ERROR_UNSUPPORTED_CONTENT, f"{where}.{key}[{j}]", type=kind)
        texts.append(part.refusal if kind == "refusal" else part.text)
    return texts


def _input_items(body: CreateResponseBody) -> list[ItemParam]:
    if body.input is None:
        return []
    if isinstance(body.input, str):
        return [UserMessageItemParam(content=body.input)]
    return list(body.input)


def _tools(body: CreateResponseBody) -> tuple[list[DeclaredTool], ToolPolicy]:
    """The functions the prompt declares (top-level and namespace tools' ones, by their qualified names) and the
    tool policy `tool_choice` gives; a `tool_choice` names a function by its qualified name (`ns.tool`)."""
    tools = declared_tools(body)
    names = [t.name for t in tools]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise RequestError.of(_spec.REQUEST_ERROR_DUPLICATE_TOOL, tools[i].where, name=name)
    choice = body.tool_choice
    if choice is None or choice == "auto":
        return tools, ToolPolicy("auto", tuple(names))
    if choice == "none":
        return [], ToolPolicy("none", ())
    if choice == "required":
        if not tools:
            raise RequestError.of(_spec.REQUEST_ERROR_REQUIRED_WITHOUT_TOOLS, "tool_choice")
        return tools, ToolPolicy("required", tuple(names))
    if isinstance(choice, SpecificFunctionParam):
        if choice.name not in names:
            raise RequestError.of(_spec.REQUEST_ERROR_UNKNOWN_TOOL, "tool_choice.name", name=choice.name)
        return [t for t in tools if t.name == choice.name], ToolPolicy("required", (choice.name,))
    if isinstance(choice, AllowedToolsParam):
        allowed = []
        for k, ref in enumerate(choice.tools):
            if ref.name not in names:
                raise RequestError.of(_spec.REQUEST_ERROR_UNKNOWN_TOOL, f"tool_choice.tools[{k}].name", name=ref.name)
            allowed.append(ref.name)
        mode = choice.mode or "auto"
        kept = [] if mode == "none" else [t for t in tools if t.name in allowed]
        return kept, ToolPolicy(mode, () if mode == "none" else tuple(n for n in names if n in allowed))
    raise RequestError.of(_spec.REQUEST_ERROR_UNSUPPORTED_TOOL_CHOICE, "tool_choice", choice=Verbatim(repr(choice)))


def tool_policy(body: CreateResponseBody) -> ToolPolicy:
    """The tool constraint a sampler should enforce for `body` (e.g. `required`: the first message must call)."""
    return _tools(body)[1]


def plan_tools(body: CreateResponseBody, *, checked: bool = False) -> ToolPlan:
    """The request's tools read once (`ToolPlan`): the declared functions, what the tool policy offers, and each
    schema dumped. `checked`: `parse_request` already held the schemas to their limits (else they are held here)."""
    if not checked:
        _check_schemas(body)
    offered, policy = _tools(body)
    return read_tools(body, offered, policy)


def _response_format_section(fmt: JsonSchemaResponseFormatParam) -> str:
    if not fmt.name:
        raise RequestError.of(_spec.REQUEST_ERROR_FORMAT_NEEDS_NAME, "text.format.name")
    if fmt.schema_ is None:
        raise RequestError.of(_spec.REQUEST_ERROR_FORMAT_NEEDS_SCHEMA, "text.format.schema")
    lines = [_spec.DEV_RESPONSE_FORMATS_HEADING, _spec.DEV_RESPONSE_FORMAT_NAME.format(name=fmt.name)]
    body = ""
    if fmt.description:
        body = _spec.DEV_RESPONSE_FORMAT_DESCRIPTION.format(description=fmt.description) + _spec.SYS_LINE_SEPARATOR
    lines.append(body + json.dumps(fmt.schema_, ensure_ascii=False, separators=(",", ":")))
    return _spec.SYS_SECTION_SEPARATOR.join(lines)


def _namespaces_of(body: CreateResponseBody, tools: ToolPlan) -> list[ToolNamespaceConfig]:
    """The namespaces the developer message declares: `functions` for the top-level functions, and each namespace
    tool as its own namespace with its description (only the functions the tool policy keeps)."""
    kept = {t.name for t in tools.offered}

    def described(declared: DeclaredTool) -> ToolDescription:
        t = declared.tool
        return ToolDescription.new(t.name, t.description or "", tools.schemas[declared.name])

    functions = [t for t in tools.offered if t.namespace is None]
    out: list[ToolNamespaceConfig] = []
    if functions:
        out.append(ToolNamespaceConfig(name=_spec.HEADER_FUNCTION_NAMESPACE, tools=[described(t) for t in functions]))
    for namespace in namespace_tools(body):
        members = [d for d in tools.declared if d.namespace == namespace.name and d.name in kept]
        if members:
            descriptions = [described(d) for d in members]
            out.append(ToolNamespaceConfig(name=namespace.name, description=namespace.description, tools=descriptions))
    return out


def _system(body: CreateResponseBody) -> SystemContent:
    system = SystemContent.new()
    effort = body.reasoning.effort if body.reasoning is not None else None
    if effort is not None:
        if effort not in _EFFORTS:
            raise RequestError.of(
                _spec.REQUEST_ERROR_UNSUPPORTED_EFFORT, "reasoning.effort", effort=effort, efforts=sorted(_EFFORTS)
            )
        system = system.with_reasoning_effort(_EFFORTS[effort])
    return system


def _assistant(text: str, channel: str | None, content_type: str | None = None) -> Message:
    message = Message.from_role_and_content(Role.ASSISTANT, text)
    message = message.with_channel(channel) if channel is not None else message
    return message.with_content_type(content_type) if content_type is not None else message


@dataclass(frozen=True)
class ToolCall:
    """A call read from the items, as the message answering it needs it: its author and its channel."""

    author: str  # the tool's name in the Harmony header (`functions.get_weather`, `browser.search`)
    channel: str | None  # the call's channel, which its output takes too (None: none)


@dataclass
class KnownCalls:
    """The calls read so far, for the outputs that answer them (shared across `items_to_messages` calls, so
    a store can replay stored items and then read the new input with the same calls known)."""

    functions: dict[str, ToolCall] = dataclasses.field(default_factory=dict)  # a function_call's call_id → the call
    tools: dict[str, ToolCall] = dataclasses.field(default_factory=dict)  # a vendor-prefixed call item's id → the call

    def to_json(self) -> dict[str, list[str | bool | None]]:
        """The calls as JSON, for a store: call id → [author, channel]. Function calls are told from the
        vendor-prefixed ones by their author's function namespace, so one flat object holds both; a call to a
        namespace tool's function (author `ns.tool`) says so in a third element, `true`."""
        out: dict[str, list[str | bool | None]] = {i: [c.author, c.channel] for i, c in self.tools.items()}
        for i, c in self.functions.items():
            out[i] = [c.author, c.channel] if c.author.startswith(_FUNCTIONS_PREFIX) else [c.author, c.channel, True]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KnownCalls:
        """The calls `to_json` gave."""
        calls = cls()
        calls.add_json(data)
        return calls

    def add_json(self, data: Mapping[str, Any]) -> None:
        """Add the calls `to_json` gave (a later call with the same id wins)."""
        for call_id, (author, channel, *function) in data.items():
            table = self.functions if author.startswith(_FUNCTIONS_PREFIX) or function == [True] else self.tools
            table[call_id] = ToolCall(author, channel)

    @classmethod
    def of_items(cls, items: Iterable[Any]) -> KnownCalls:
        """The calls among input items or a response's output items (what later outputs answer)."""
        calls = cls()
        for item in items:
            if isinstance(item, FunctionCallItemParam):
                calls.functions[item.call_id] = _function_call_of(item)
            elif isinstance(item, FunctionCall):
                extra = item.model_extra or {}
                channel = extra.get(_spec.RESPONSE_CHANNEL_FIELD, _spec.CHANNEL_TOOL_CALLS)
                author = recipient(qualified(item.name, extra.get(_spec.RESPONSE_NAMESPACE_FIELD)))
                calls.functions[item.call_id] = ToolCall(author, channel)
            elif isinstance(item, ExtensionItem) and item.type in _CALL_TYPES:
                call = _CALL_MODEL.model_validate(item.model_dump(mode="json"))
                if call.id is not None:
                    calls.tools[call.id] = ToolCall(call.recipient, call.channel)
        return calls


@dataclass(frozen=True)
class ItemMessages:
    """What a list of input items says: instructions for the developer message, and the conversation's turns."""

    instructions: list[str]  # the text of each system or developer message, in order
    messages: list[Message]  # every other item as the Harmony message it stands for, in order


CompactionReader = Callable[[CompactionSummaryItemParam, str], Sequence[Message]]
"""Opens a compaction item found at request path `where`: the Harmony messages it stands for, or a
`RequestError`. Only the server that made the item can read it (its content is that server's, signed or
stored), so the bridge asks its caller; without a reader, compaction items are refused."""


ReasoningReader = Callable[[ReasoningItemParam, str], Message]
"""Opens a reasoning input item's `encrypted_content` found at request path `where`: the analysis message the
model wrote, or a `RequestError` (`bridge.encrypted.ReasoningSeal.reader`). Without a reader, such items are
refused."""


@dataclass(frozen=True)
class ConversationParts:
    """A request's conversation in its three parts.

    `head` is the system message and, when the request has instructions, tools or a response format, the
    developer message: each request renders them afresh. `history` holds the earlier turns as given;
    `turn` the messages of this request's input, in order. `tools` is the request's `ToolPlan`, read once
    (the head declares what it offers; the engine request and the response builder read it too).
    """

    head: list[Message]
    history: list[Message]
    turn: list[Message]
    tools: ToolPlan

    def conversation(self) -> Conversation:
        return Conversation.from_messages([*self.head, *self.history, *self.turn])


def _validated(model: Any, item: ExtensionItem, where: str) -> Any:
    """A vendor-prefixed item read with the model the spec names for it; a bad shape is a 400 at its field."""
    raw = item.model_dump(mode="json")
    try:
        return validate(model, raw)
    except ValidationError as exc:
        problem = explain(exc, raw)
        raise RequestError.of(problem.error, problem.path(where), reason=Verbatim(problem.message)) from None


def _function_call_of(item: FunctionCallItemParam) -> ToolCall:
    channel = _header(item, _spec.RESPONSE_CHANNEL_FIELD, _spec.CHANNEL_TOOL_CALLS)
    return ToolCall(recipient(qualified(item.name, item.namespace)), channel)


def _function_call(item: FunctionCallItemParam, calls: KnownCalls) -> Message:
    content_type = _header(item, _spec.RESPONSE_CONTENT_TYPE_FIELD, _JSON_CONTENT_TYPE)
    call = calls.functions[item.call_id] = _function_call_of(item)
    return _assistant(item.arguments, call.channel, content_type).with_recipient(call.author)


def _tool_message(call: ToolCall, text: str) -> Message:
    message = Message.from_author_and_content(Author.new(Role.TOOL, call.author), text).with_recipient(
        Role.ASSISTANT.value
    )
    return message.with_channel(call.channel) if call.channel is not None else message


def _extension(item: ExtensionItem, where: str, calls: KnownCalls) -> Message:
    if item.type in _CALL_TYPES:
        call = _validated(_CALL_MODEL, item, where)
        if call.id is not None:
            calls.tools[call.id] = ToolCall(call.recipient, call.channel)
        message = _assistant(call.arguments, call.channel).with_recipient(call.recipient)
        return message.with_content_type(call.content_type) if call.content_type is not None else message
    if item.type == _spec.INPUT_TOOL_OUTPUT_TYPE:
        output = _validated(_TOOL_OUTPUT_MODEL, item, where)
        known = calls.tools.get(output.call_id)
        if known is None:
            raise RequestError.of(
                _spec.REQUEST_ERROR_UNKNOWN_TOOL_CALL,
                f"{where}.call_id",
                types=Verbatim(_choices(_CALL_TYPES)),
                call_id=output.call_id,
            )
        return _tool_message(known, "".join(_text_parts(output.output, where, ("input_text",), key="output")))
    raise RequestError.of(_spec.REQUEST_ERROR_UNSUPPORTED_ITEM, f"{where}.type", type=item.type)


_MCP_ITEMS = (McpListToolsItemParam, McpCallItemParam, McpApprovalRequestItemParam, McpApprovalResponseItemParam)
McpItem = McpListToolsItemParam | McpCallItemParam | McpApprovalRequestItemParam | McpApprovalResponseItemParam


def _mcp_messages(item: McpItem) -> list[Message]:
    """An MCP item sent back as input (the server runs `mcp` tools: server/hosted/mcp.py). A tool listing and an
    approval answer render as nothing (the server reads them); an approval request as the call the model wrote; a
    call as that call and the tool's message, or the message alone when it ran on approval (the approval request
    holds the call). The call and the message are the ones kept in `harmony:hosted`, else built from the item's
    fields (a commentary call with JSON arguments, as the model writes a function call)."""
    if isinstance(item, (McpListToolsItemParam, McpApprovalResponseItemParam)):
        return []
    kept = item.harmony_hosted
    recipient = kept.recipient if kept is not None else item.server_label + _spec.HEADER_NAMESPACE_SEPARATOR + item.name
    channel = kept.channel if kept is not None else _spec.CHANNEL_TOOL_CALLS
    content_type = kept.content_type if kept is not None else _JSON_CONTENT_TYPE
    call = _assistant(kept.arguments if kept is not None else item.arguments, channel).with_recipient(recipient)
    call = call.with_content_type(content_type) if content_type is not None else call
    if isinstance(item, McpApprovalRequestItemParam):
        return [call]
    if kept is not None:
        output, author = kept.output, kept.author or recipient
    else:
        error = item.error if isinstance(item.error, str) or item.error is None else item.error.model_dump_json()
        output, author = item.output if item.output is not None else f"error: {error}", recipient
    message = _tool_message(ToolCall(author, channel), output)
    return [message] if item.approval_request_id is not None else [call, message]


# A `web_search_call` without the conversation it stood for (`harmony:hosted`: a client that dropped the field) →
# the browser call its action names, by the order of the browser's functions: search, open, find.
_BROWSER = _spec.BUILTIN_NAMESPACES[_spec.HOSTED_KINDS["web_search"]["namespace"]]
_ACTION_CALLS = dict(zip(("search", "open_page", "find_in_page"), (t["name"] for t in _BROWSER["tools"]), strict=True))
_ACTION_ARGUMENT = {"search": ("query", "query"), "open_page": ("url", "id"), "find_in_page": ("pattern", "pattern")}
_LOST_OUTPUT = "(the tool's output did not come back with this item)"


_PYTHON = _spec.HOSTED_KINDS["code_interpreter"]["namespace"]


def _hosted_call(item: WebSearchCallItemParam | CodeInterpreterCallItemParam) -> list[Message]:
    """A hosted tool's call item sent back as input: the call the model wrote and the tool message it read (as the
    item's `harmony:hosted` keeps them), else the call its action (or code) names, with its logs or no output."""
    record = item.harmony_hosted
    if record is not None:
        call = _assistant(record.arguments, record.channel, record.content_type).with_recipient(record.recipient)
        return [call, _tool_message(ToolCall(record.author or record.recipient, record.channel), record.output)]
    if isinstance(item, CodeInterpreterCallItemParam):
        if item.code is None:
            return []
        logs = [o.logs for o in item.outputs or () if isinstance(o, CodeInterpreterOutputLogs)]
        call = _assistant(item.code, _spec.CHANNEL_REASONING).with_recipient(_PYTHON)
        return [call, _tool_message(ToolCall(_PYTHON, _spec.CHANNEL_REASONING), "\n".join(logs) or _LOST_OUTPUT)]
    action = item.action
    if action is None:
        return []
    key, argument = _ACTION_ARGUMENT[action.type]
    value = getattr(action, key, None)
    recipient = _BROWSER["name"] + _spec.HEADER_NAMESPACE_SEPARATOR + _ACTION_CALLS[action.type]
    arguments = json.dumps({argument: value} if value is not None else {}, ensure_ascii=False)
    call = _assistant(arguments, _spec.CHANNEL_REASONING).with_recipient(recipient)
    return [call, _tool_message(ToolCall(recipient, _spec.CHANNEL_REASONING), _LOST_OUTPUT)]


def _reasoning(item: ReasoningItemParam, where: str, sealed: ReasoningReader | None = None) -> Message | None:
    """The analysis message of a reasoning item: its content (what the model wrote), else its summary; sealed
    reasoning (`encrypted_content`) is opened by `sealed`, and refused without it."""
    if item.encrypted_content is not None and sealed is not None:
        return sealed(item, where)
    if item.encrypted_content is not None:
        raise RequestError.of(_spec.REQUEST_ERROR_ENCRYPTED_REASONING, f"{where}.encrypted_content")
    content_type = _header(item, _spec.RESPONSE_CONTENT_TYPE_FIELD, None)
    if item.content:
        return _assistant("".join(part.text for part in item.content), _spec.CHANNEL_REASONING, content_type)
    text = "".join(part.text for part in item.summary)
    return _assistant(text, _spec.CHANNEL_REASONING, content_type) if text else None


def _assistant_message(item: AssistantMessageItemParam, where: str) -> Message:
    """An assistant message on its phase's channel, unless it names the channel the model wrote it on."""
    text = "".join(_text_parts(item.content, where, (_OUTPUT_TEXT, "refusal")))
    channel = _header(item, _spec.RESPONSE_CHANNEL_FIELD, _CHANNEL_OF_PHASE.get(item.phase or "", _spec.CHANNEL_ANSWER))
    return _assistant(text, channel, _header(item, _spec.RESPONSE_CONTENT_TYPE_FIELD, None))


def items_to_messages(
    items: Iterable[ItemParam],
    root: str = "input",
    calls: KnownCalls | None = None,
    compaction: CompactionReader | None = None,
    reasoning: ReasoningReader | None = None,
) -> ItemMessages:
    """Input items → the developer instructions they give and the Harmony messages they stand for, in order.

    An item's errors name it as `root[i]` (`input[3].call_id`). `calls` holds the calls read before these
    items (a store replaying earlier turns passes the same `KnownCalls` to each batch); it is updated with the
    calls these items make. `compaction` opens compaction items and `reasoning` sealed reasoning (each refused
    without it). Output items are input items too: `ItemParamAdapter.validate_python(item.model_dump())`.
    """
    calls = KnownCalls() if calls is None else calls
    instructions: list[str] = []
    turns: list[Message] = []
    for i, item in enumerate(items):
        where = f"{root}[{i}]"
        if isinstance(item, (SystemMessageItemParam, DeveloperMessageItemParam)):
            instructions.append("".join(_text_parts(item.content, where, ("input_text",))))
        elif isinstance(item, UserMessageItemParam):
            texts = _text_parts(item.content, where, ("input_text",))
            turns.append(Message.from_role_and_contents(Role.USER, [TextContent(text=t) for t in texts]))
        elif isinstance(item, AssistantMessageItemParam):
            turns.append(_assistant_message(item, where))
        elif isinstance(item, FunctionCallItemParam):
            turns.append(_function_call(item, calls))
        elif isinstance(item, FunctionCallOutputItemParam):
            known = calls.functions.get(item.call_id)
            if known is None:
                raise RequestError.of(_spec.REQUEST_ERROR_UNKNOWN_CALL_ID, f"{where}.call_id", call_id=item.call_id)
            turns.append(_tool_message(known, "".join(_text_parts(item.output, where, ("input_text",), key="output"))))
        elif isinstance(item, ReasoningItemParam):
            message = _reasoning(item, where, reasoning)
            if message is not None:
                turns.append(message)
        elif isinstance(item, ItemReferenceParam):
            raise RequestError.of(_spec.REQUEST_ERROR_ITEM_REFERENCE_NOT_FOUND, f"{where}.id", id=item.id)
        elif isinstance(item, CompactionSummaryItemParam):
            if compaction is None:
                raise RequestError.of(_spec.REQUEST_ERROR_UNSUPPORTED_ITEM, f"{where}.type", type=item.type)
            turns.extend(compaction(item, where))
        elif isinstance(item, ExtensionItem):
            turns.append(_extension(item, where, calls))
        elif isinstance(item, _MCP_ITEMS):
            turns.extend(_mcp_messages(item))
        elif isinstance(item, WebSearchCallItemParam | CodeInterpreterCallItemParam):
            turns.extend(_hosted_call(item))
        else:  # pragma: no cover - the union is closed
            raise RequestError.of(_spec.REQUEST_ERROR_UNSUPPORTED_ITEM, where, type=type(item).__name__)
    return ItemMessages(instructions, turns)


def request_to_conversation(
    body: CreateResponseBody,
    system: SystemContent | None = None,
    *,
    compaction: CompactionReader | None = None,
    reasoning: ReasoningReader | None = None,
) -> Conversation:
    """The Harmony conversation for `body`, ready for `render_conversation_for_completion(..., Role.ASSISTANT)`.

    `system` replaces the default system content (identity, dates); a reasoning effort the request
    names is applied to it. The input items become messages as `items_to_messages` says; `compaction`
    opens compaction items and `reasoning` sealed reasoning (each refused without it). A request that
    continues a stored response (`previous_response_id`) needs its history: see `conversation_parts`.
    """
    if body.previous_response_id is not None:
        raise RequestError.of(_spec.REQUEST_ERROR_PREVIOUS_RESPONSE_NOT_FOUND, "previous_response_id")
    return conversation_parts(body, system=system, compaction=compaction, reasoning=reasoning).conversation()


def conversation_parts(
    body: CreateResponseBody,
    *,
    history: Sequence[Message] = (),
    calls: KnownCalls | None = None,
    compaction: CompactionReader | None = None,
    system: SystemContent | None = None,
    reasoning: ReasoningReader | None = None,
    tools: ToolPlan | None = None,
    checked: bool = False,
) -> ConversationParts:
    """The conversation for `body` after `history`, the Harmony messages of earlier turns, oldest first (what
    a store keeps for `previous_response_id`): the request's system and developer messages, the history,
    then the request's input.

    `calls` are the calls made in the history (Harmony messages carry no call ids), so an output in the
    input finds the call it answers; it is updated with the calls the input makes. When `history` is what
    the earlier turns' items render to, the result renders token for token as the same request with those
    items sent as input: the chain-of-thought rule applies to the whole conversation. `tools` is the request's
    `ToolPlan` when the caller has read it (`plan_tools`), else it is read here (`parts.tools`); `checked`: the
    body came from `parse_request`, which held its schemas to their limits (else they are held here).
    """
    if tools is None and not checked:
        _check_schemas(body)  # a body built in Python skipped `parse_request`
    sys_content = _system(body)
    if system is not None:
        requested = body.reasoning is not None and body.reasoning.effort is not None
        sys_content = (
            system.model_copy(update={"reasoning_effort": sys_content.reasoning_effort}) if requested else system
        )
    read = items_to_messages(_input_items(body), calls=calls, compaction=compaction, reasoning=reasoning)
    instructions: list[str] = [body.instructions] if body.instructions else []
    instructions += read.instructions
    plan = tools if tools is not None else plan_tools(body, checked=True)
    developer = DeveloperContent.new()
    if instructions:
        developer = developer.with_instructions(_spec.SYS_SECTION_SEPARATOR.join(instructions))
    for namespace in _namespaces_of(body, plan):
        developer = developer.with_tools(namespace)
    contents: list[Content] = [developer] if instructions or plan.offered else []
    fmt = body.text.format if body.text is not None else None
    if isinstance(fmt, JsonSchemaResponseFormatParam):
        # The section follows whatever the developer content renders (instructions, then tools).
        separator = _spec.SYS_SECTION_SEPARATOR if contents else ""
        contents.append(TextContent(text=separator + _response_format_section(fmt)))
    head = [Message.from_role_and_content(Role.SYSTEM, sys_content)]
    if contents:
        head.append(Message.from_role_and_contents(Role.DEVELOPER, contents))
    return ConversationParts(head, list(history), read.messages, plan)
