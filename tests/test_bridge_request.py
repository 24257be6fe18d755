"""Open Responses request → Harmony prompt: golden prompts and 400-style errors.

Each `tests/bridge/<case>/request.json` renders to `prompt.txt` (the completion prompt, decoded, byte
for byte). Rebuild the goldens after an intended change with:

    UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/test_bridge_request.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from harmony_responses import HarmonyEncoding, Role
from harmony_responses.bridge import RequestError, parse_request, request_to_conversation, tool_policy

from conftest import SHARED, require

CASES = Path(__file__).resolve().parent / "bridge"
UPDATE = os.environ.get("UPDATE_GOLDENS") == "1"


def load(case: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CASES / case / "request.json").read_text(encoding="utf-8"))
    return data


def prompt(encoding: HarmonyEncoding, raw: dict[str, Any]) -> str:
    conversation = request_to_conversation(parse_request(raw))
    return encoding.decode_utf8(encoding.render_conversation_for_completion(conversation, Role.ASSISTANT))


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "request.json").is_file()))
def test_request_renders_the_golden_prompt(encoding: HarmonyEncoding, case: str) -> None:
    text = prompt(encoding, load(case))
    golden = CASES / case / "prompt.txt"
    if UPDATE:
        golden.write_bytes(text.encode("utf-8"))
    assert text.encode("utf-8") == golden.read_bytes()


def test_the_three_goldens_exist() -> None:
    assert {"tools", "function_call_round_trip", "structured_output"} <= {p.name for p in CASES.iterdir()}


def test_round_trip_maps_calls_outputs_and_reasoning(encoding: HarmonyEncoding) -> None:
    text = prompt(encoding, load("function_call_round_trip"))
    assert (
        "<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
        '{"city":"Paris"}<|call|>' in text
    )
    assert "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{" in text
    # the last assistant message is a call, not a final: the Harmony rule keeps the chain of thought
    assert "Need the weather tool for Paris." in text and "Simple fact: Paris." in text
    assert "You are a concise travel assistant.\n\nAnswer in one sentence." in text
    assert text.endswith("<|start|>assistant")


def test_a_finished_turn_drops_its_chain_of_thought(encoding: HarmonyEncoding) -> None:
    raw = load("function_call_round_trip")
    raw["input"] = raw["input"][:4]  # user, reasoning, final answer
    raw["input"].append({"type": "message", "role": "user", "content": "Thanks!"})
    text = prompt(encoding, raw)
    assert "Simple fact: Paris." not in text
    assert "<|channel|>final<|message|>Paris.<|end|>" in text


def test_structured_output_adds_a_response_formats_section(encoding: HarmonyEncoding) -> None:
    text = prompt(encoding, load("structured_output"))
    assert "# Response Formats\n\n## shopping_list\n\n// Items to buy, one entry per product.\n{" in text
    assert "Reasoning: high" in text
    bare = {**load("structured_output"), "instructions": None}
    assert "<|start|>developer<|message|># Response Formats\n\n## shopping_list" in prompt(encoding, bare)
    tools = {**bare, "tools": load("tools")["tools"]}
    assert "} // namespace functions\n\n# Response Formats\n\n## shopping_list" in prompt(encoding, tools)


def test_tool_choice_selects_what_the_prompt_offers(encoding: HarmonyEncoding) -> None:
    raw = load("tools")
    assert "type get_time" in prompt(encoding, raw)
    assert tool_policy(parse_request(raw)).allowed == ("get_weather", "get_time")
    none = {**raw, "tool_choice": "none"}
    assert "namespace functions" not in prompt(encoding, none)
    assert tool_policy(parse_request(none)).mode == "none"
    named = {**raw, "tool_choice": {"type": "function", "name": "get_time"}}
    text = prompt(encoding, named)
    assert "type get_time" in text and "get_weather" not in text
    assert tool_policy(parse_request(named)).mode == "required"
    allowed = {**raw, "tool_choice": {"type": "allowed_tools", "tools": [{"type": "function", "name": "get_weather"}]}}
    assert "get_time" not in prompt(encoding, allowed)
    assert tool_policy(parse_request({**raw, "tool_choice": "required"})).mode == "required"


BAD = [
    (
        {"input": [{"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": "https://example.com/cat.png"}]}]},
        "unsupported_content", "input[0].content[1]",
    ),
    ({"tools": [{"type": 5}]}, "invalid_request", "tools[0].type"),
    ({"input": [{"type": "item_reference", "id": "msg_9"}]}, "item_reference_not_found", "input[0].id"),
    ({"input": [{"id": "msg_9"}]}, "item_reference_not_found", "input[0].id"),
    ({"previous_response_id": "resp_1", "input": "hi"}, "previous_response_not_found", "previous_response_id"),
    (
        {"input": [{"type": "function_call_output", "call_id": "call_x", "output": "1"}]},
        "unknown_call_id", "input[0].call_id",
    ),
    ({"reasoning": {"effort": "xhigh"}, "input": "hi"}, "unsupported_reasoning_effort", "reasoning.effort"),
    ({"reasoning": {"effort": "none"}, "input": "hi"}, "unsupported_reasoning_effort", "reasoning.effort"),
    ({"tool_choice": {"type": "function", "name": "nope"}, "input": "hi"}, "invalid_tool_choice", "tool_choice.name"),
    ({"tool_choice": "required", "input": "hi"}, "invalid_tool_choice", "tool_choice"),
    (
        {"input": [{"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}]},
        "unsupported_parameter", "input[0].encrypted_content",
    ),
    ({"input": [{"type": "compaction", "encrypted_content": "x"}]}, "unsupported_item", "input[0].type"),
    ({"input": [{"type": "acme:search", "query": "q"}]}, "unsupported_item", "input[0].type"),
    ({"text": {"format": {"type": "json_schema", "schema": {}}}, "input": "hi"}, "missing_required_parameter",
     "text.format.name"),
    (
        {"input": [{"type": "function_call_output", "call_id": "c", "output": [
            {"type": "input_file", "file_url": "https://example.com/a.pdf"}]}]},
        "unknown_call_id", "input[0].call_id",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "code", "param"), BAD)
def test_what_the_model_cannot_take_is_a_400_naming_the_parameter(raw: dict[str, Any], code: str, param: str) -> None:
    with pytest.raises(RequestError) as caught:
        request_to_conversation(parse_request(raw))
    assert (caught.value.code, caught.value.param) == (code, param)
    assert caught.value.status == 400


def test_error_bodies_validate_against_the_spec() -> None:
    document = json.loads(require(SHARED / "openresponses" / "openapi.json").read_text(encoding="utf-8"))
    validator = Draft202012Validator({**document, "$ref": "#/components/schemas/ErrorPayload"})
    with pytest.raises(RequestError) as caught:
        request_to_conversation(parse_request({"reasoning": {"effort": "xhigh"}}))
    body = caught.value.to_body()
    assert not list(validator.iter_errors(body["error"]))
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["param"] == "reasoning.effort"


def test_function_output_parts_other_than_text_are_refused() -> None:
    raw = {
        "input": [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image", "image_url": "x"}]},
        ]
    }
    with pytest.raises(RequestError) as caught:
        request_to_conversation(parse_request(raw))
    assert (caught.value.code, caught.value.param) == ("unsupported_content", "input[1].output[0]")


def test_a_given_system_content_keeps_its_effort_unless_the_request_names_one(encoding: HarmonyEncoding) -> None:
    from harmony_responses import ReasoningEffort, SystemContent

    system = SystemContent.new().with_reasoning_effort(ReasoningEffort.HIGH).with_conversation_start_date("2026-11-30")
    conversation = request_to_conversation(parse_request({"input": "hi"}), system=system)
    text = encoding.decode_utf8(encoding.render_conversation_for_completion(conversation, Role.ASSISTANT))
    assert "Reasoning: high" in text and "Current date: 2026-11-30" in text
    conversation = request_to_conversation(
        parse_request({"input": "hi", "reasoning": {"effort": "low"}}), system=system
    )
    text = encoding.decode_utf8(encoding.render_conversation_for_completion(conversation, Role.ASSISTANT))
    assert "Reasoning: low" in text and "Current date: 2026-11-30" in text
