"""The drop-in API: encoding, decoding, models, builders, JSON form and error texts."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harmony_responses import (
    Author,
    ChannelConfig,
    Conversation,
    DeveloperContent,
    HarmonyEncoding,
    HarmonyEncodingName,
    HarmonyError,
    Message,
    ReasoningEffort,
    RenderConversationConfig,
    RenderOptions,
    Role,
    SystemContent,
    TextContent,
    ToolDescription,
    ToolNamespaceConfig,
    load_harmony_encoding,
)


def test_name_and_enum(encoding: HarmonyEncoding) -> None:
    assert encoding.name == "HarmonyGptOss"
    assert str(HarmonyEncodingName.HARMONY_GPT_OSS) == "HarmonyGptOss"
    assert load_harmony_encoding("HarmonyGptOss").name == "HarmonyGptOss"
    with pytest.raises(ValueError, match="^Invalid HarmonyEncodingName: nope$"):
        load_harmony_encoding("nope")


def test_special_tokens(encoding: HarmonyEncoding) -> None:
    specials = encoding.special_tokens_set
    assert len(specials) == 1091
    assert {"<|start|>", "<|message|>", "<|reserved_200018|>", "<|reserved_201088|>"} <= specials
    assert "<|endofprompt|>" not in specials
    assert encoding.is_special_token(200006)
    assert encoding.is_special_token(201088)
    assert not encoding.is_special_token(201089)
    assert not encoding.is_special_token(24912)
    assert sorted(encoding.stop_tokens()) == [200002, 200007, 200012]
    assert sorted(encoding.stop_tokens_for_assistant_actions()) == [200002, 200012]


def test_encode_special_handling(encoding: HarmonyEncoding) -> None:
    assert encoding.encode("hello world") == [24912, 2375]
    assert encoding.encode("<|start|>", allowed_special={"<|start|>"}) == [200006]
    assert encoding.encode("<|start|>", allowed_special="all") == [200006]
    assert encoding.encode("<|start|>", disallowed_special=()) == [27, 91, 5236, 91, 29]
    with pytest.raises(
        HarmonyError, match="Encountered text corresponding to disallowed special token '<\\|start\\|>'"
    ):
        encoding.encode("x <|start|>")
    # allowing one token leaves the others disallowed
    with pytest.raises(HarmonyError, match="<\\|end\\|>"):
        encoding.encode("<|start|><|end|>", allowed_special={"<|start|>"})


def test_decode(encoding: HarmonyEncoding) -> None:
    assert encoding.decode_utf8(encoding.encode("héllo wörld")) == "héllo wörld"
    assert encoding.decode([200014]) == "<|reserved_200014|>"
    assert encoding.decode_utf8([200018]) == "<|reserved_200018|>"
    assert encoding.decode_utf8([201088]) == "<|reserved_201088|>"
    with pytest.raises(
        HarmonyError, match="^Could not decode tokens: Invalid token error: Invalid token for decoding: 99999999$"
    ):
        encoding.decode_utf8([99999999])
    with pytest.raises(HarmonyError, match="Invalid token for decoding: 201089"):
        encoding.decode([201089])
    with pytest.raises(
        HarmonyError,
        match="^Could not decode tokens: Invalid utf-8 sequence: incomplete utf-8 byte sequence from index 8$",
    ):
        encoding.decode_utf8([132990, 9552])
    assert "Chicken" in encoding.decode([132990, 9552])
    with pytest.raises(HarmonyError, match="invalid utf-8 sequence of 2 bytes from index 1"):
        encoding.decode_utf8([9552, 9552])


def test_builders_and_defaults() -> None:
    sys = SystemContent.new()
    assert sys.model_identity == "You are ChatGPT, a large language model trained by OpenAI."
    assert sys.reasoning_effort is ReasoningEffort.MEDIUM
    assert sys.knowledge_cutoff == "2024-06"
    assert sys.conversation_start_date is None
    assert sys.channel_config == ChannelConfig.require_channels(["analysis", "commentary", "final"])
    built = (
        SystemContent.new()
        .with_reasoning_effort(ReasoningEffort.HIGH)
        .with_conversation_start_date("2025-01-01")
        .with_knowledge_cutoff("2025-01")
        .with_model_identity("X")
        .with_required_channels(["final"])
        .with_browser_tool()
        .with_python_tool()
    )
    assert built.tools is not None and sorted(built.tools) == ["browser", "python"]
    assert [t.name for t in built.tools["browser"].tools] == ["search", "open", "find"]
    assert ToolNamespaceConfig.python().tools == []
    dev = DeveloperContent.new().with_instructions("be brief").with_function_tools([ToolDescription.new("f", "does f")])
    assert dev.tools is not None and dev.tools["functions"].tools[0].name == "f"
    msg = (
        Message.from_role_and_content(Role.ASSISTANT, "hi")
        .with_channel("commentary")
        .with_recipient("functions.f")
        .with_content_type("<|constrain|>json")
        .adding_content("!")
    )
    assert msg.content == [TextContent(text="hi"), TextContent(text="!")]
    assert Message.from_author_and_content(Author.new(Role.TOOL, "functions.f"), "ok").author.name == "functions.f"
    assert Message.from_role_and_contents(Role.USER, [TextContent(text="a")]).content[0] == TextContent(text="a")


def test_equality_and_json_form() -> None:
    a = Message.from_role_and_content(Role.USER, "hi").with_channel("final")
    b = Message.from_role_and_content(Role.USER, "hi").with_channel("final")
    assert a == b
    assert a != Message.from_role_and_content(Role.USER, "hi")
    assert (
        a.to_json() == '{"role": "user", "name": null, "content": [{"type": "text", "text": "hi"}], "channel": "final"}'
    )
    sys_dict = SystemContent.new().to_dict()
    assert sys_dict["type"] == "system_content" and "conversation_start_date" not in sys_dict
    convo = Conversation.from_messages(
        [
            Message.from_role_and_content(Role.SYSTEM, SystemContent.new().with_browser_tool()),
            Message.from_role_and_content(Role.DEVELOPER, DeveloperContent.new().with_instructions("x")),
            a,
        ]
    )
    assert Conversation.from_json(convo.to_json()) == convo
    assert list(convo) == convo.messages
    assert Message.from_dict({"role": "user", "content": "plain"}).content == [TextContent(text="plain")]


def test_errors() -> None:
    with pytest.raises(ValueError, match="Unknown role: 'robot'"):
        Role("robot")
    with pytest.raises(ValueError, match="Unknown content variant"):
        Message.from_dict({"role": "user", "content": [{"type": "image"}]})
    with pytest.raises(ValidationError, match="Input should be a valid dictionary or instance of Message"):
        Conversation.from_messages([SystemContent.new()])  # type: ignore[list-item]  # a wrong type, on purpose


def test_render_errors(encoding: HarmonyEncoding) -> None:
    with pytest.raises(HarmonyError, match="^Tools should have a name!$"):
        encoding.render(Message.from_author_and_content(Author(role=Role.TOOL), "x"))
    with pytest.raises(RuntimeError, match="^SystemContent may only appear in system messages, found in User$"):
        encoding.render(Message.from_role_and_content(Role.USER, SystemContent.new()))
    with pytest.raises(HarmonyError, match="^DeveloperContent may only appear in developer messages, found in System$"):
        encoding.render(Message.from_role_and_content(Role.SYSTEM, DeveloperContent.new()))


def test_render_and_conversation_agree(encoding: HarmonyEncoding) -> None:
    msg = Message.from_role_and_content(Role.USER, "Hello")
    convo = Conversation.from_messages([msg])
    assert encoding.render(msg) == encoding.render_conversation(convo)
    completion = encoding.render_conversation_for_completion(convo, Role.ASSISTANT)
    assert completion[:-2] == encoding.render_conversation(convo)
    assert completion[-2:] == [200006, encoding.encode("assistant")[0]]


def test_training_final(encoding: HarmonyEncoding) -> None:
    convo = Conversation.from_messages(
        [
            Message.from_role_and_content(Role.USER, "hi"),
            Message.from_role_and_content(Role.ASSISTANT, "hello").with_channel("final"),
        ]
    )
    regular = encoding.render_conversation(convo)
    training = encoding.render_conversation_for_training(convo)
    assert regular[:-1] == training[:-1]
    assert (regular[-1], training[-1]) == (200007, 200002)
    only_user = Conversation.from_messages([Message.from_role_and_content(Role.USER, "hi")])
    assert encoding.render_conversation_for_training(only_user) == encoding.render_conversation(only_user)


def test_function_tools_note_only_with_functions(encoding: HarmonyEncoding) -> None:
    sys = Message.from_role_and_content(Role.SYSTEM, SystemContent.new())
    note = "Calls to these tools must go to the commentary channel: 'functions'."
    empty_ns = DeveloperContent.new().with_function_tools([])
    with_fn = DeveloperContent.new().with_function_tools([ToolDescription.new("f", "d")])
    for dev, expected in ((empty_ns, False), (with_fn, True)):
        convo = Conversation.from_messages([sys, Message.from_role_and_content(Role.DEVELOPER, dev)])
        assert (note in encoding.decode_utf8(encoding.render_conversation(convo))) is expected
    rendered = encoding.render(sys, RenderOptions(conversation_has_function_tools=True))
    assert note in encoding.decode_utf8(rendered)


def test_drop_analysis_rules(encoding: HarmonyEncoding) -> None:
    msgs = [
        Message.from_role_and_content(Role.USER, "q"),
        Message.from_role_and_content(Role.ASSISTANT, "think").with_channel("analysis"),
        Message.from_role_and_content(Role.ASSISTANT, "a").with_channel("final"),
    ]
    text = encoding.decode_utf8(encoding.render_conversation(Conversation.from_messages(msgs)))
    assert "think" not in text
    kept = encoding.render_conversation(
        Conversation.from_messages(msgs), RenderConversationConfig(auto_drop_analysis=False)
    )
    assert "think" in encoding.decode_utf8(kept)
    ongoing = msgs[:2]
    assert "think" in encoding.decode_utf8(encoding.render_conversation(Conversation.from_messages(ongoing)))


def test_constrain_content_type_is_special(encoding: HarmonyEncoding) -> None:
    msg = (
        Message.from_role_and_content(Role.ASSISTANT, '{"a": 1}')
        .with_channel("commentary")
        .with_recipient("functions.f")
        .with_content_type("<|constrain|>json")
    )
    tokens = encoding.render(msg)
    text = encoding.decode_utf8(tokens)
    assert text == '<|start|>assistant to=functions.f<|channel|>commentary <|constrain|>json<|message|>{"a": 1}<|call|>'
    assert tokens == encoding.encode(text, allowed_special="all")
    assert 200003 in tokens


def test_messages_parsed_from_one_repeated_header_are_independent(encoding: HarmonyEncoding) -> None:
    # The parser reads a header it has seen once; each message still gets an author of its own.
    text = "<|start|>assistant<|channel|>analysis<|message|>a<|end|>" * 2
    first, second = encoding.parse_messages_from_completion_tokens(encoding.encode(text, allowed_special="all"))
    assert first.author == second.author and first.author is not second.author
    first.author.name = "changed"
    assert second.author.name is None and second.channel == "analysis" and second.content[0].to_dict()["text"] == "a"
