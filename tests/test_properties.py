"""Properties of rendering, checked against openai-harmony 0.0.8 as an oracle where it is installed."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from harmony_responses import (
    Conversation,
    DeveloperContent,
    HarmonyEncoding,
    HarmonyError,
    Message,
    RenderConversationConfig,
    Role,
    render_tool_namespace,
    schema_to_typescript,
)

from strategies import conversation, message, namespaces, schema

oracle = pytest.importorskip("openai_harmony", reason="openai-harmony is installed by the test extras")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def reference() -> Any:
    return oracle.load_harmony_encoding(oracle.HarmonyEncodingName.HARMONY_GPT_OSS)


def _content_to_reference(content: Any) -> Any:
    # Built field by field: the reference's from_json drops explicit None values, which would
    # turn them back into defaults.
    kind = {"TextContent": oracle.TextContent, "SystemContent": oracle.SystemContent}.get(
        type(content).__name__, oracle.DeveloperContent
    )
    return kind.model_validate(content.model_dump())


def _to_reference(convo: Conversation) -> Any:
    return oracle.Conversation.from_messages(
        [
            oracle.Message(
                author=oracle.Author(role=oracle.Role(m.author.role.value), name=m.author.name),
                content=[_content_to_reference(c) for c in m.content],
                channel=m.channel,
                recipient=m.recipient,
                content_type=m.content_type,
            )
            for m in convo.messages
        ]
    )


def _reference_tokens(fn: Any) -> list[int] | str:
    try:
        return list(fn())
    except Exception as exc:  # the reference raises RuntimeError/HarmonyError with a message
        return f"error: {exc}"


def _our_tokens(fn: Any) -> list[int] | str:
    try:
        return list(fn())
    except HarmonyError as exc:
        return f"error: {exc}"


@SETTINGS
@given(schema)
def test_schema_rendering_never_raises(s: dict[str, Any]) -> None:
    assert isinstance(schema_to_typescript(s), str)


@SETTINGS
@given(conversation)
def test_conversations_match_reference(encoding: HarmonyEncoding, reference: Any, convo: Conversation) -> None:
    ref = _to_reference(convo)
    for drop in (True, False):
        cfg = RenderConversationConfig(auto_drop_analysis=drop)
        ref_cfg = oracle.RenderConversationConfig(auto_drop_analysis=drop)
        ours = _our_tokens(partial(encoding.render_conversation_for_completion, convo, Role.ASSISTANT, cfg))
        theirs = _reference_tokens(
            partial(reference.render_conversation_for_completion, ref, oracle.Role.ASSISTANT, ref_cfg)
        )
        assert ours == theirs
    assert _our_tokens(lambda: encoding.render_conversation_for_training(convo)) == _reference_tokens(
        lambda: reference.render_conversation_for_training(ref)
    )


@SETTINGS
@given(namespaces)
def test_tool_namespaces_match_reference(encoding: HarmonyEncoding, reference: Any, nss: dict[str, Any]) -> None:
    dev = DeveloperContent.new()
    for ns in nss.values():
        dev = dev.with_tools(ns)
    convo = Conversation.from_messages([Message.from_role_and_content(Role.DEVELOPER, dev)])
    ours = encoding.render_conversation(convo)
    assert ours == reference.render_conversation(_to_reference(convo))
    for ns in nss.values():  # the standalone renderer gives the same block
        block = render_tool_namespace(ns.name, ns.tools, ns.description)
        assert block in encoding.decode_utf8(ours)


@SETTINGS
@given(message())
def test_render_equals_single_message_conversation(encoding: HarmonyEncoding, msg: Message) -> None:
    single = _our_tokens(lambda: encoding.render(msg))
    assert single == _our_tokens(lambda: encoding.render_conversation(Conversation.from_messages([msg])))


@SETTINGS
@given(conversation)
def test_json_form_matches_reference(convo: Conversation) -> None:
    payload = convo.to_json()
    assert payload == _to_reference(convo).to_json()
    # Loading drops explicit nulls the same way the reference does (they become defaults).
    assert Conversation.from_json(payload).to_json() == oracle.Conversation.from_json(payload).to_json()
