"""The Harmony encoding: o200k_base plus Harmony's special tokens, and conversation rendering.

Rendering walks the message objects directly and encodes each header piece and content item on
its own (BPE never merges across them), so the token ids equal the reference's exactly.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Literal

import tiktoken

from ._tables import HarmonyEncodingName
from ._tables import spec as _spec
from ._vocab import load_ranks
from .errors import HarmonyError
from .models import (
    Content,
    Conversation,
    DeveloperContent,
    Message,
    ReasoningEffort,
    RenderConversationConfig,
    RenderOptions,
    Role,
    SystemContent,
    TextContent,
)
from .texts import fill
from .tool_namespace import render_tools_section


@functools.lru_cache(maxsize=1)
def _special_tokens() -> dict[str, int]:
    specials = dict(_spec.NAMED_TOKENS)
    for lo, hi in _spec.RESERVED_RANGES:
        for token in range(lo, hi + 1):
            specials[fill(_spec.RESERVED_SPELLING, id=token)] = token
    return specials


@functools.lru_cache(maxsize=1)
def _tiktoken_encoding() -> tiktoken.Encoding:
    return tiktoken.Encoding(
        name=_spec.ENCODING_TIKTOKEN_NAME,
        pat_str=_spec.PATTERN,
        mergeable_ranks=load_ranks(),
        special_tokens=_special_tokens(),
    )


_ROLE_TEXT = {role: role.value for role in Role}
_EFFORT_TEXT = {effort: _spec.REASONING_RENDERED[effort.value] for effort in ReasoningEffort}
_CONSTRAIN_SPELLING = _spec.SPELLING_CONSTRAIN
_FUNCTIONS = _spec.HEADER_FUNCTION_NAMESPACE
_RECIPIENT_PREFIX = _spec.HEADER_PART_SEPARATOR + _spec.HEADER_RECIPIENT_KEYWORD
_FUNCTION_CHANNEL_NOTE = fill(_spec.SYS_FUNCTION_CHANNEL_NOTE, channel=_spec.CHANNEL_TOOL_CALLS, namespace=_FUNCTIONS)


def _has_function_tools(messages: Sequence[Message]) -> bool:
    for msg in messages:
        for content in msg.content:
            if isinstance(content, DeveloperContent) and content.tools:
                ns = content.tools.get(_FUNCTIONS)
                if ns is not None and ns.tools:
                    return True
    return False


class HarmonyEncoding:
    """Renders conversations to token ids and decodes ids, as openai-harmony's HarmonyEncoding."""

    def __init__(self, name: str, encoding: tiktoken.Encoding, special_tokens: dict[str, int]) -> None:
        self._name = name
        self._enc = encoding
        self._encode_ordinary = encoding.encode_ordinary
        self._decode_bytes = encoding.decode_bytes
        self._specials = dict(special_tokens)
        self._special_ids = frozenset(self._specials.values())
        self._n_base = encoding.max_token_value + 1 - len(self._specials)
        self._piece_cache: dict[str, list[int]] = {}
        # token → its text (None: not whole UTF-8 on its own), for the tokens decoded so far: a fact of the
        # vocabulary, so every stream's `TokenLexer` shares it, and a token is decoded once per process rather
        # than once per response (at most one entry per token of the vocabulary)
        self.token_texts: dict[int, str | None] = {}
        self._special_regex_cache: dict[frozenset[str], re.Pattern[str]] = {}

    @property
    def name(self) -> str:
        return self._name

    @functools.cached_property
    def special_tokens_set(self) -> set[str]:
        return set(self._specials)

    # -- encoding ------------------------------------------------------------------------------

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode text as ordinary text: a control-token spelling in it stays text."""
        return self._encode_ordinary(text)

    def _piece(self, text: str) -> list[int]:
        """Encode a short header piece, memoised: headers repeat across every conversation."""
        cached = self._piece_cache.get(text)
        if cached is None:
            cached = self._encode_ordinary(text)
            if len(self._piece_cache) < 4096:
                self._piece_cache[text] = cached
        return cached

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | AbstractSet[str] = frozenset(),
        disallowed_special: Literal["all"] | Collection[str] = "all",
    ) -> list[int]:
        """Encode text; spellings of special tokens raise unless allowed or no longer disallowed."""
        allowed = self.special_tokens_set if allowed_special == "all" else set(allowed_special)
        disallowed = self.special_tokens_set - allowed if disallowed_special == "all" else frozenset(disallowed_special)
        if disallowed:
            key = frozenset(disallowed)
            pattern = self._special_regex_cache.get(key)
            if pattern is None:
                pattern = re.compile("|".join(re.escape(t) for t in sorted(key, key=len, reverse=True)))
                self._special_regex_cache[key] = pattern
            match = pattern.search(text)
            if match:
                raise HarmonyError(fill(_spec.ERR_DISALLOWED_SPECIAL, token=match.group()))
        try:
            return self._enc.encode(text, allowed_special=allowed, disallowed_special=())
        except UnicodeEncodeError:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            return self._enc.encode(text, allowed_special=allowed, disallowed_special=())

    def _check_tokens(self, tokens: Iterable[int]) -> list[int]:
        out = list(tokens)
        n_base, specials = self._n_base, self._special_ids
        for token in out:
            if not (0 <= token < n_base or token in specials):
                raise HarmonyError(fill(_spec.ERR_INVALID_TOKEN, token=token))
        return out

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return self._decode_bytes(self._check_tokens(tokens))

    def decode_utf8(self, tokens: Sequence[int]) -> str:
        """Decode to text; raises HarmonyError on invalid UTF-8 (use `decode` to replace it)."""
        data = self.decode_bytes(tokens)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.reason == "unexpected end of data":
                raise HarmonyError(_spec.ERR_INVALID_UTF8_INCOMPLETE.format(index=exc.start)) from None
            length = max(1, exc.end - exc.start)
            raise HarmonyError(_spec.ERR_INVALID_UTF8_SEQUENCE.format(length=length, index=exc.start)) from None

    def decode(self, tokens: Sequence[int], errors: str = "replace") -> str:
        """Decode to text, replacing invalid UTF-8 by default (as tiktoken does)."""
        return self.decode_bytes(tokens).decode("utf-8", errors=errors)

    def is_special_token(self, token: int) -> bool:
        return token in self._special_ids

    def stop_tokens(self) -> list[int]:
        return list(_spec.STOP_TOKENS)

    def stop_tokens_for_assistant_actions(self) -> list[int]:
        return list(_spec.STOP_TOKENS_FOR_ASSISTANT_ACTIONS)

    # -- rendering -----------------------------------------------------------------------------

    def _system_text(self, sys: SystemContent, has_function_tools: bool) -> str:
        sections = []
        top = []
        if sys.model_identity is not None:
            top.append(sys.model_identity)
        if sys.knowledge_cutoff is not None:
            top.append(fill(_spec.SYS_KNOWLEDGE_CUTOFF, value=sys.knowledge_cutoff))
        if sys.conversation_start_date is not None:
            top.append(fill(_spec.SYS_CURRENT_DATE, value=sys.conversation_start_date))
        if top:
            sections.append(_spec.SYS_LINE_SEPARATOR.join(top))
        if sys.reasoning_effort is not None:
            sections.append(fill(_spec.SYS_REASONING, value=_EFFORT_TEXT[ReasoningEffort(sys.reasoning_effort)]))
        if sys.tools:
            sections.append(render_tools_section(sys.tools))
        cc = sys.channel_config
        if cc is not None and cc.valid_channels:
            text = fill(_spec.SYS_VALID_CHANNELS, channels=_spec.SYS_VALID_CHANNELS_JOINER.join(cc.valid_channels))
            if cc.channel_required:
                text += _spec.SYS_CHANNEL_REQUIRED
            if has_function_tools:
                text += _spec.SYS_LINE_SEPARATOR + _FUNCTION_CHANNEL_NOTE
            sections.append(text)
        return _spec.SYS_SECTION_SEPARATOR.join(sections)

    def _developer_text(self, dev: DeveloperContent) -> str:
        sections = []
        if dev.instructions is not None:
            sections.append(_spec.DEV_INSTRUCTIONS_HEADING)
            sections.append(dev.instructions)
        if dev.tools:
            sections.append(render_tools_section(dev.tools))
        return _spec.SYS_SECTION_SEPARATOR.join(sections)

    def _content_into(self, content: Content, role: Role, out: list[int], has_function_tools: bool) -> None:
        if isinstance(content, TextContent):
            out += self._encode_ordinary(content.text)
        elif isinstance(content, SystemContent):
            if role is not Role.SYSTEM:
                raise HarmonyError(fill(_spec.ERR_SYSTEM_CONTENT_MISPLACED, role=_spec.ROLE_DEBUG_NAMES[role.value]))
            out += self._encode_ordinary(self._system_text(content, has_function_tools))
        elif isinstance(content, DeveloperContent):
            if role is not Role.DEVELOPER:
                raise HarmonyError(fill(_spec.ERR_DEVELOPER_CONTENT_MISPLACED, role=_spec.ROLE_DEBUG_NAMES[role.value]))
            out += self._encode_ordinary(self._developer_text(content))
        else:
            raise HarmonyError(fill(_spec.ERR_UNKNOWN_CONTENT, raw=type(content).__name__))

    def _render_into(self, message: Message, out: list[int], has_function_tools: bool) -> None:
        piece = self._piece
        out.append(_spec.TOKEN_START)
        role = Role(message.author.role)
        name = message.author.name
        if role is Role.TOOL:
            if name is None:
                raise HarmonyError(_spec.ERR_TOOL_WITHOUT_NAME)
            out += piece(name)
        else:
            out += piece(_ROLE_TEXT[role])
            if name is not None:
                out += piece(_spec.HEADER_AUTHOR_NAME_SEPARATOR + name)
        recipient = message.recipient
        if recipient is not None and recipient != _spec.HEADER_BROADCAST_RECIPIENT:
            out += piece(_RECIPIENT_PREFIX + recipient)
        if message.channel is not None:
            out.append(_spec.TOKEN_CHANNEL)
            out += piece(message.channel)
        content_type = message.content_type
        if content_type is not None:
            if content_type.startswith(_CONSTRAIN_SPELLING):
                out += piece(_spec.HEADER_PART_SEPARATOR)
                out.append(_spec.TOKEN_CONSTRAIN)
                rest = content_type[len(_CONSTRAIN_SPELLING) :]
                if rest:
                    out += piece(rest)
            else:
                out += piece(_spec.HEADER_PART_SEPARATOR + content_type)
        out.append(_spec.TOKEN_MESSAGE)
        for content in message.content:
            self._content_into(content, role, out, has_function_tools)
        if role is Role.ASSISTANT and recipient is not None:
            out.append(_spec.TOKEN_CALL)
        else:
            out.append(_spec.TOKEN_END)

    def render(self, message: Message, render_options: RenderOptions | None = None) -> list[int]:
        """Render one message."""
        out: list[int] = []
        has_tools = render_options.conversation_has_function_tools if render_options is not None else False
        self._render_into(message, out, has_tools)
        return out

    def _conversation_into(
        self,
        conversation: Conversation | Iterable[Message],
        config: RenderConversationConfig | None,
        out: list[int],
        rendered: Sequence[Sequence[int] | None] | None = None,
    ) -> list[Message]:
        messages = list(conversation.messages if isinstance(conversation, Conversation) else conversation)
        has_tools = _has_function_tools(messages)
        auto_drop = _spec.CONV_AUTO_DROP_ANALYSIS_DEFAULT if config is None else config.auto_drop_analysis
        drop_before = -1
        if auto_drop:
            last_assistant_final = False
            for msg in reversed(messages):
                if msg.author.role == Role.ASSISTANT:
                    last_assistant_final = msg.channel == _spec.CHANNEL_ANSWER
                    break
            if last_assistant_final:
                drop_before = next((i for i, m in enumerate(messages) if m.channel == _spec.CHANNEL_ANSWER), -1)
        for index, msg in enumerate(messages):
            if index < drop_before and msg.channel == _spec.CHANNEL_REASONING:
                continue
            known = rendered[index] if rendered is not None else None
            if known is not None:
                out += known
            else:
                self._render_into(msg, out, has_tools)
        return messages

    def render_conversation(
        self, conversation: Conversation, config: RenderConversationConfig | None = None
    ) -> list[int]:
        """Render every message; analysis before the first final is dropped when the last assistant
        message is final (unless `auto_drop_analysis=False`)."""
        out: list[int] = []
        self._conversation_into(conversation, config, out)
        return out

    def render_conversation_for_completion(
        self,
        conversation: Conversation,
        next_turn_role: Role,
        config: RenderConversationConfig | None = None,
        *,
        rendered: Sequence[Sequence[int] | None] | None = None,
    ) -> list[int]:
        """Render the conversation, then `<|start|>` and the role that is to speak next.

        `rendered[i]`, when given and not None, is message i's tokens as `render(message)` gave them before
        (a store keeps them with the message): they are used as they are instead of being encoded again.
        The chain-of-thought rule still decides, from the messages, which ones are rendered at all.
        """
        if rendered is not None and len(rendered) != len(conversation.messages):
            raise ValueError(f"rendered has {len(rendered)} entries for {len(conversation.messages)} messages")
        out: list[int] = []
        self._conversation_into(conversation, config, out, rendered)
        out.append(_spec.TOKEN_START)
        out += self._piece(Role(next_turn_role).value)
        return out

    def render_conversation_for_training(
        self, conversation: Conversation, config: RenderConversationConfig | None = None
    ) -> list[int]:
        """Render the conversation; a trailing assistant final ends with `<|return|>`."""
        out: list[int] = []
        messages = self._conversation_into(conversation, config, out)
        if messages:
            last = messages[-1]
            if last.author.role == Role.ASSISTANT and last.channel == _spec.CHANNEL_ANSWER and out:
                out[-1] = _spec.TOKEN_END_DONE_SAMPLING
        return out

    # -- parsing -------------------------------------------------------------------------------

    def parse_messages_from_completion_tokens(
        self, tokens: Sequence[int], role: Role | None = None, *, strict: bool = True
    ) -> list[Message]:
        """Parse completion tokens into messages (the reference's rules, strict by default)."""
        from .parser import StreamableParser

        parser = StreamableParser(self, role, strict=strict)
        parser.process_tokens(tokens)
        parser.process_eos()
        return parser.take_messages()


def load_harmony_encoding(name: str | HarmonyEncodingName) -> HarmonyEncoding:
    """Load the Harmony encoding by name; the o200k_base ranks are found offline first."""
    value = name.value if isinstance(name, HarmonyEncodingName) else str(name)
    if value != _spec.ENCODING_NAME:
        raise ValueError(fill(_spec.ERR_UNKNOWN_ENCODING, name=value))
    return HarmonyEncoding(value, _tiktoken_encoding(), _special_tokens())


__all__ = ["HarmonyEncoding", "HarmonyEncodingName", "load_harmony_encoding"]
