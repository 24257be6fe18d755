"""What the agent clients send (docs/clients.md): easy input messages, label fields, namespace tools and tools the
server cannot run, read by the bridge as the issue draws the lines; every response stays valid."""

from __future__ import annotations

from typing import Any

import pytest
from responses_checker import assert_valid_request, assert_valid_response, check_stream

from harmony_responses import HarmonyEncoding
from harmony_responses.bridge import (
    NOTHING_MORE,
    HostedTools,
    RequestError,
    counting_ids,
    items_to_messages,
    parse_request,
    request_to_conversation,
    stream_response,
)
from harmony_responses.bridge.request import Capabilities
from harmony_responses.models import Role
from harmony_responses.types import ItemParamAdapter

A = "<|start|>assistant"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
AGENTS = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Tools to run other agents.",
    "tools": [
        {"type": "function", "name": "spawn_agent", "description": "Start an agent.",
         "parameters": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}},
        {"type": "function", "name": "wait_agent", "description": "Wait for it."},
    ],
}  # fmt: skip


def prompt(encoding: HarmonyEncoding, raw: dict[str, Any]) -> str:
    conversation = request_to_conversation(parse_request(raw))
    return encoding.decode(encoding.render_conversation_for_completion(conversation, Role.ASSISTANT))


def served(encoding: HarmonyEncoding, raw: dict[str, Any], completion: str) -> dict[str, Any]:
    body = parse_request(raw)
    events = [e.model_dump(mode="json") for e in stream_response([completion], encoding, body, ids=counting_ids())]
    check_stream(events)
    response: dict[str, Any] = events[-1]["response"]
    assert_valid_response(response)
    return response


# -- 1. easy input messages ------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["user", "system", "developer", "assistant"])
@pytest.mark.parametrize("content", ["Weather in Paris?", [{"type": "input_text", "text": "Weather in Paris?"}]])
def test_a_message_without_type_is_a_message_of_its_role(encoding: HarmonyEncoding, role: str, content: Any) -> None:
    if role == "assistant" and isinstance(content, list):
        content = [{"type": "output_text", "text": "Weather in Paris?"}]
    untyped = {"model": "m", "input": [{"role": role, "content": content}]}
    typed = {"model": "m", "input": [{"type": "message", "role": role, "content": content}]}
    assert prompt(encoding, untyped) == prompt(encoding, typed)
    assert_valid_request(untyped)  # valid under the overrides (spec/overrides/responses.json `required`)


def test_a_role_typo_is_the_roles_error_not_a_missing_id() -> None:
    with pytest.raises(RequestError) as caught:
        parse_request({"input": [{"role": "usr", "content": "hi"}]})
    assert caught.value.param == "input[0].role"
    assert '"usr"' in caught.value.message and '"user"' in caught.value.message


def test_an_item_with_neither_type_nor_role_is_still_an_item_reference() -> None:
    with pytest.raises(RequestError) as caught:
        parse_request({"input": [{"content": "hi"}]})
    assert caught.value.param == "input[0].id"


# -- 2. labels --------------------------------------------------------------------------------------------------

LABELS = {
    "user": "u-1",
    "client_metadata": {"session_id": "s", "x-codex-turn-metadata": "{}"},
    "prompt_cache_retention": "24h",
}


def test_labels_are_accepted_kept_and_echoed(encoding: HarmonyEncoding) -> None:
    raw = {"model": "m", "input": "hi", "metadata": {"k": "v"}, "safety_identifier": "sid", "prompt_cache_key": "pk",
           "service_tier": "priority", **LABELS}  # fmt: skip
    assert prompt(encoding, raw) == prompt(encoding, {"model": "m", "input": "hi"})  # nothing the model is asked
    response = served(encoding, raw, "<|channel|>final<|message|>ok<|return|>")
    assert response["harmony:labels"] == LABELS
    assert (response["metadata"], response["safety_identifier"], response["prompt_cache_key"]) == (
        {"k": "v"},
        "sid",
        "pk",
    )
    assert response["service_tier"] == "default"  # the tier that served it


def test_a_field_in_neither_api_is_still_a_400() -> None:
    with pytest.raises(RequestError) as caught:
        parse_request({"input": "hi", "client_metadatas": {}})
    assert (caught.value.code, caught.value.param) == ("unknown_parameter", "client_metadatas")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("reasoning", {"summary": "detailed"}),
        ("text", {"verbosity": "low"}),
        ("stream_options", {"include_obfuscation": True}),
    ],
)
def test_a_field_that_would_change_the_output_is_refused_naming_it(field: str, value: dict[str, Any]) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request({"input": "hi", field: value})
    assert caught.value.param == f"{field}.{next(iter(value))}"


# -- 4. namespace tools -----------------------------------------------------------------------------------------


def test_a_namespace_tool_is_its_own_namespace_beside_functions(encoding: HarmonyEncoding) -> None:
    text = prompt(encoding, {"model": "m", "input": "hi", "tools": [WEATHER, AGENTS]})
    assert "namespace functions {" in text and "type get_weather" in text
    block = text[text.index("## multi_agent_v1") :]
    assert block.startswith("## multi_agent_v1\n\n// Tools to run other agents.\nnamespace multi_agent_v1 {")
    assert "type spawn_agent = (_: {\ntask: string,\n}) => any;" in block and "type wait_agent = () => any;" in block
    assert "spawn_agent" not in text[: text.index("## multi_agent_v1")]


def test_a_call_to_a_namespace_tool_comes_back_with_its_namespace_and_renders_back(encoding: HarmonyEncoding) -> None:
    raw = {"model": "m", "input": "hi", "tools": [WEATHER, AGENTS]}
    call = '<|channel|>commentary to=multi_agent_v1.spawn_agent <|constrain|>json<|message|>{"task":"x"}<|call|>'
    response = served(encoding, raw, call)
    item = response["output"][-1]
    assert (item["type"], item["name"], item["namespace"]) == ("function_call", "spawn_agent", "multi_agent_v1")
    # Sent back with its output, the call is that namespace's call again, and the output answers it.
    output = {"type": "function_call_output", "call_id": item["call_id"], "output": "started"}
    items = [ItemParamAdapter.validate_python(item), ItemParamAdapter.validate_python(output)]
    messages = items_to_messages(items).messages
    assert messages[0].recipient == "multi_agent_v1.spawn_agent"
    assert messages[1].author.name == "multi_agent_v1.spawn_agent"
    nxt = prompt(encoding, {**raw, "input": [{"role": "user", "content": "hi"}, item, output]})
    assert "to=multi_agent_v1.spawn_agent" in nxt and "<|start|>multi_agent_v1.spawn_agent to=assistant" in nxt


def test_tool_choice_names_a_namespace_tool_by_its_qualified_name(encoding: HarmonyEncoding) -> None:
    from harmony_responses.bridge import tool_policy

    body = parse_request(
        {
            "input": "hi",
            "tools": [WEATHER, AGENTS],
            "tool_choice": {"type": "function", "name": "multi_agent_v1.wait_agent"},
        }
    )
    assert tool_policy(body).allowed == ("multi_agent_v1.wait_agent",)


# -- 5. tools the server cannot run -----------------------------------------------------------------------------

HOSTED = [
    {"type": "web_search", "external_web_access": False},
    {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
]


def test_a_hosted_tool_is_not_offered_and_the_response_says_so(encoding: HarmonyEncoding) -> None:
    raw = {"model": "m", "input": "hi", "tools": [WEATHER, *HOSTED]}
    assert prompt(encoding, raw) == prompt(encoding, {"model": "m", "input": "hi", "tools": [WEATHER]})
    response = served(encoding, raw, "<|channel|>final<|message|>ok<|return|>")
    listed = response["harmony:unavailable_tools"]
    assert [(t["type"], t.get("name")) for t in listed] == [("web_search", None), ("custom", "apply_patch")]
    assert all("cannot run" in t["reason"] for t in listed)
    assert [t["name"] for t in response["tools"]] == ["get_weather"]


def test_hosted_tools_reject_keeps_the_400() -> None:
    with pytest.raises(RequestError) as caught:
        parse_request({"input": "hi", "tools": [WEATHER, *HOSTED]}, Capabilities(hosted_tools=HostedTools.REJECT))
    assert (caught.value.code, caught.value.param) == ("unsupported_tool", "tools[1].type")
    assert "web_search" in caught.value.message


def test_a_client_cannot_send_the_unavailable_tools_field_itself() -> None:
    with pytest.raises(RequestError) as caught:
        parse_request({"input": "hi", "harmony:unavailable_tools": []}, NOTHING_MORE)
    assert caught.value.param == "harmony:unavailable_tools"


def test_what_parse_request_gives_needs_no_engine(encoding: HarmonyEncoding) -> None:
    response = served(encoding, {"model": "m", "input": "hi"}, A[len(A) :] + "<|channel|>final<|message|>ok<|return|>")
    assert "harmony:unavailable_tools" not in response and "harmony:labels" not in response


def test_the_hosted_tools_policy_is_a_setting_flag_and_variable() -> None:
    from harmony_responses.cli import build_parser
    from harmony_responses.server.command import settings_from_args
    from harmony_responses.server.settings import Settings

    assert Settings().hosted_tools is HostedTools.OMIT
    assert Settings.from_env({"HARMONY_RESPONSES_HOSTED_TOOLS": "reject"}).hosted_tools is HostedTools.REJECT
    assert Settings(hosted_tools=HostedTools.REJECT).to_env()["HARMONY_RESPONSES_HOSTED_TOOLS"] == "reject"
    args = build_parser().parse_args(["serve", "--hosted-tools", "reject"])
    assert settings_from_args(args, {}).hosted_tools is HostedTools.REJECT


def test_a_stored_namespace_call_is_still_a_function_call_its_output_answers() -> None:
    from harmony_responses.bridge import KnownCalls

    call = {
        "type": "function_call",
        "call_id": "c9",
        "name": "spawn_agent",
        "namespace": "multi_agent_v1",
        "arguments": "{}",
    }
    stored = KnownCalls.of_items([ItemParamAdapter.validate_python(call)]).to_json()
    assert stored == {"c9": ["multi_agent_v1.spawn_agent", "commentary", True]}
    calls = KnownCalls.from_json(stored)  # as a store gives them back for previous_response_id
    output = ItemParamAdapter.validate_python({"type": "function_call_output", "call_id": "c9", "output": "ok"})
    (message,) = items_to_messages([output], calls=calls).messages
    assert message.author.name == "multi_agent_v1.spawn_agent"
