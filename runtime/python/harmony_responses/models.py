"""Chat data: authors, contents, messages and conversations, in the reference's shapes and JSON form.

The classes are pydantic models with the same fields, defaults, builder methods, equality and
`to_dict`/`to_json` output as openai-harmony's, so code written against it works unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel, Field

from ._tables import ReasoningEffort as ReasoningEffort
from ._tables import Role as Role
from ._tables import spec as _spec
from .json_input import load_json
from .texts import fill


class Author(BaseModel):
    """A message author: a role and, for tools or named participants, a name."""

    role: Role
    name: str | None = None

    @classmethod
    def new(cls, role: Role, name: str) -> Author:
        return cls(role=role, name=name)


class Content(BaseModel):
    """Base of the content variants a message can hold."""

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError


class TextContent(Content):
    """Plain text."""

    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


class ToolDescription(BaseModel):
    """One tool of a namespace: its name, description and JSON Schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] | None = None

    @classmethod
    def new(cls, name: str, description: str, parameters: dict[str, Any] | None = None) -> ToolDescription:
        return cls(name=name, description=description, parameters=parameters)


class ChannelConfig(BaseModel):
    """The channels the model may use and whether every message must name one."""

    valid_channels: list[str]
    channel_required: bool

    @classmethod
    def require_channels(cls, channels: list[str]) -> ChannelConfig:
        return cls(valid_channels=channels, channel_required=True)


class ToolNamespaceConfig(BaseModel):
    """A namespace of tools (`functions`, `browser`, `python`, ...)."""

    name: str
    description: str | None = None
    tools: list[ToolDescription]

    @staticmethod
    def browser() -> ToolNamespaceConfig:
        return ToolNamespaceConfig.model_validate(_spec.BUILTIN_NAMESPACES["browser"])

    @staticmethod
    def python() -> ToolNamespaceConfig:
        return ToolNamespaceConfig.model_validate(_spec.BUILTIN_NAMESPACES["python"])


def _default_channels() -> ChannelConfig | None:
    return ChannelConfig(
        valid_channels=list(_spec.SYSTEM_DEFAULT_VALID_CHANNELS),
        channel_required=_spec.SYSTEM_DEFAULT_CHANNEL_REQUIRED,
    )


class SystemContent(Content):
    """The system message: identity, dates, reasoning effort, built-in tools, channels."""

    model_identity: str | None = _spec.SYSTEM_DEFAULT_MODEL_IDENTITY
    reasoning_effort: ReasoningEffort | None = ReasoningEffort(_spec.SYSTEM_DEFAULT_REASONING_EFFORT)
    conversation_start_date: str | None = _spec.SYSTEM_DEFAULT_CONVERSATION_START_DATE
    knowledge_cutoff: str | None = _spec.SYSTEM_DEFAULT_KNOWLEDGE_CUTOFF
    channel_config: ChannelConfig | None = Field(default_factory=_default_channels)
    tools: dict[str, ToolNamespaceConfig] | None = None

    @classmethod
    def new(cls) -> SystemContent:
        return cls()

    def with_model_identity(self, model_identity: str) -> SystemContent:
        self.model_identity = model_identity
        return self

    def with_reasoning_effort(self, reasoning_effort: ReasoningEffort) -> SystemContent:
        self.reasoning_effort = reasoning_effort
        return self

    def with_conversation_start_date(self, conversation_start_date: str) -> SystemContent:
        self.conversation_start_date = conversation_start_date
        return self

    def with_knowledge_cutoff(self, knowledge_cutoff: str) -> SystemContent:
        self.knowledge_cutoff = knowledge_cutoff
        return self

    def with_channel_config(self, channel_config: ChannelConfig) -> SystemContent:
        self.channel_config = channel_config
        return self

    def with_required_channels(self, channels: list[str]) -> SystemContent:
        self.channel_config = ChannelConfig.require_channels(channels)
        return self

    def with_tools(self, ns_config: ToolNamespaceConfig) -> SystemContent:
        if self.tools is None:
            self.tools = {}
        self.tools[ns_config.name] = ns_config
        return self

    def with_browser_tool(self) -> SystemContent:
        return self.with_tools(ToolNamespaceConfig.browser())

    def with_python_tool(self) -> SystemContent:
        return self.with_tools(ToolNamespaceConfig.python())

    def to_dict(self) -> dict[str, Any]:
        out = self.model_dump(exclude_none=True)
        out["type"] = "system_content"
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> SystemContent:
        return cls(**raw)


class DeveloperContent(Content):
    """The developer message: instructions and function tools."""

    instructions: str | None = None
    tools: dict[str, ToolNamespaceConfig] | None = None

    @classmethod
    def new(cls) -> DeveloperContent:
        return cls()

    def with_instructions(self, instructions: str) -> DeveloperContent:
        self.instructions = instructions
        return self

    def with_tools(self, ns_config: ToolNamespaceConfig) -> DeveloperContent:
        if self.tools is None:
            self.tools = {}
        self.tools[ns_config.name] = ns_config
        return self

    def with_function_tools(self, tools: Sequence[ToolDescription]) -> DeveloperContent:
        return self.with_tools(
            ToolNamespaceConfig(name=_spec.HEADER_FUNCTION_NAMESPACE, description=None, tools=list(tools))
        )

    def to_dict(self) -> dict[str, Any]:
        out = self.model_dump(exclude_none=True)
        out["type"] = "developer_content"
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DeveloperContent:
        return cls(**raw)


_CONTENT_TYPES: dict[str, type[Content]] = {
    "text": TextContent,
    "system_content": SystemContent,
    "developer_content": DeveloperContent,
}


def content_from_dict(raw: dict[str, Any]) -> Content:
    kind = _CONTENT_TYPES.get(raw.get("type", "")) if isinstance(raw, dict) else None
    if kind is None:
        raise ValueError(fill(_spec.ERR_UNKNOWN_CONTENT, raw=raw))
    return kind(**{k: v for k, v in raw.items() if k != "type"})


class Message(BaseModel):
    """One Harmony message: author, contents, and the optional channel, recipient and content type."""

    author: Author
    content: list[Content] = Field(default_factory=list)
    channel: str | None = None
    recipient: str | None = None
    content_type: str | None = None

    @classmethod
    def from_author_and_content(cls, author: Author, content: str | Content) -> Message:
        if isinstance(content, str):
            content = TextContent(text=content)
        return cls(author=author, content=[content])

    @classmethod
    def from_role_and_content(cls, role: Role, content: str | Content) -> Message:
        return cls.from_author_and_content(Author(role=role), content)

    @classmethod
    def from_role_and_contents(cls, role: Role, contents: Sequence[Content]) -> Message:
        return cls(author=Author(role=role), content=list(contents))

    def adding_content(self, content: str | Content) -> Message:
        if isinstance(content, str):
            content = TextContent(text=content)
        self.content.append(content)
        return self

    def with_channel(self, channel: str) -> Message:
        self.channel = channel
        return self

    def with_recipient(self, recipient: str) -> Message:
        self.recipient = recipient
        return self

    def with_content_type(self, content_type: str) -> Message:
        self.content_type = content_type
        return self

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "role": self.author.role,
            "name": self.author.name,
            "content": [c.to_dict() for c in self.content],
        }
        if self.channel is not None:
            out["channel"] = self.channel
        if self.recipient is not None:
            out["recipient"] = self.recipient
        if self.content_type is not None:
            out["content_type"] = self.content_type
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        author = Author(role=Role(data["role"]), name=data.get("name"))
        raw_content = data["content"]
        if isinstance(raw_content, str):
            raw_content = [{"type": "text", "text": raw_content}]
        msg = cls(author=author, content=[content_from_dict(raw) for raw in raw_content])
        msg.channel = data.get("channel")
        msg.recipient = data.get("recipient")
        msg.content_type = data.get("content_type")
        return msg


class Conversation(BaseModel):
    """An ordered list of messages."""

    messages: list[Message] = Field(default_factory=list)

    @classmethod
    def from_messages(cls, messages: Sequence[Message]) -> Conversation:
        return cls(messages=list(messages))

    def __iter__(self) -> Iterator[Message]:  # type: ignore[override]
        return iter(self.messages)

    def to_dict(self) -> dict[str, Any]:
        return {"messages": [m.to_dict() for m in self.messages]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, payload: str) -> Conversation:
        """Read `to_json` output; JSON beyond `json_input`'s limits or with a lone surrogate raises `JSONInputError`.

        The reference refuses a lone surrogate too (when it renders); here the error names its JSON path.
        """
        data = load_json(payload)
        return cls(messages=[Message.from_dict(m) for m in data["messages"]])


class RenderConversationConfig(BaseModel):
    """Options for rendering a whole conversation."""

    auto_drop_analysis: bool = _spec.CONV_AUTO_DROP_ANALYSIS_DEFAULT


class RenderOptions(BaseModel):
    """Options for rendering one message."""

    conversation_has_function_tools: bool = False
