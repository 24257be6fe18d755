"""Malformed requests, tried as a new user would (issue 9, items 1-5): one typed 400 each, naming the field.

Every case here crashed, was reported under a pydantic-internal name, or was silently dropped before.
Only the public names that existed before are imported at the top, so the file also runs (and fails)
against the old code; what is new is imported where it is used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harmony_responses import HarmonyEncoding, Role
from harmony_responses.bridge import RequestError, parse_request, request_to_conversation
from harmony_responses.types import CreateResponseBody, FunctionToolParam

EXAMPLE = json.loads(
    (Path(__file__).resolve().parents[1] / "examples" / "responses" / "request.json").read_text(encoding="utf-8")
)


def refused(raw: Any, capabilities: Any = None) -> RequestError:
    with pytest.raises(RequestError) as caught:
        body = parse_request(raw) if capabilities is None else parse_request(raw, capabilities)
        request_to_conversation(body)
    assert caught.value.status == 400
    assert json.loads(json.dumps(caught.value.to_body()))["error"]["param"] == caught.value.param
    return caught.value


# -- 1. a list or object where a string tag belongs ----------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "param"),
    [
        ({"type": "message", "role": [], "content": "x"}, "input[0].role"),
        ({"type": "message", "role": {"a": 1}, "content": "x"}, "input[0].role"),
        ({"type": [], "role": "user", "content": "x"}, "input[0].type"),
        ({"type": {}, "content": "x"}, "input[0].type"),
    ],
)
def test_an_unhashable_tag_is_a_400_not_a_type_error(item: dict[str, Any], param: str) -> None:
    error = refused({"input": [item]})
    assert error.param == param
    assert "found an array" in error.message or "found an object" in error.message


# -- 2. lone surrogates anywhere -----------------------------------------------------------------------------

LONE = "a\ud800b"


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        ({"instructions": LONE}, "instructions"),
        ({"model": LONE}, "model"),
        ({"tools": [{"type": "function", "name": "f", "description": LONE}]}, "tools[0].description"),
        ({"tools": [{"type": "function", "name": "f", "parameters": {"type": "object", "title": LONE}}]},
         "tools[0].parameters.title"),
        ({"tools": [{"type": "function", "name": "f", "parameters": {LONE: 1}}]}, 'tools[0].parameters["a\\ud800b"]'),
        ({"metadata": {"k": LONE}}, "metadata.k"),
        ({"input": [{"type": "message", "role": "user", "content": LONE}]}, "input[0].content"),
        ({"input": LONE}, "input"),
    ],
)  # fmt: skip
def test_a_lone_surrogate_in_any_string_is_refused_by_name(raw: dict[str, Any], param: str) -> None:
    error = refused(raw)
    assert error.param == param
    assert "lone surrogate" in error.message
    json.dumps(error.to_body()).encode("utf-8")  # the error body itself is printable UTF-8


# -- 3. schema depth and size --------------------------------------------------------------------------------


def _nested_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def _with_tool_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": schema}]}


@pytest.mark.parametrize("levels", [127, 200, 2000])
def test_a_schema_beyond_the_depth_limit_is_refused(levels: int) -> None:
    error = refused(_with_tool_schema(_nested_schema(levels)))
    assert error.param is not None and error.param.startswith("tools[0].parameters.properties.a.properties")
    assert "deeper than 64 levels" in error.message  # json_input.MAX_JSON_DEPTH


def test_the_deepest_schema_within_the_limit_renders(encoding: HarmonyEncoding) -> None:
    from harmony_responses.json_input import MAX_JSON_DEPTH

    # The body, tools, [0] and parameters take 4 levels; each schema level two more (object, properties).
    levels = (MAX_JSON_DEPTH - 4) // 2
    body = parse_request(_with_tool_schema(_nested_schema(levels)))
    prompt = encoding.render_conversation_for_completion(request_to_conversation(body), Role.ASSISTANT)
    assert len(prompt) > levels
    assert "deeper" in refused(_with_tool_schema(_nested_schema(levels + 1))).message


def test_a_schema_beyond_the_size_limit_is_refused() -> None:
    from harmony_responses.json_input import MAX_SCHEMA_CHARS

    big = {"type": "object", "description": "x" * MAX_SCHEMA_CHARS}
    error = refused(_with_tool_schema(big))
    assert (error.code, error.param) == ("schema_too_large", "tools[0].parameters")
    fmt = {"type": "json_schema", "name": "out", "schema": big}
    assert refused({"input": "hi", "text": {"format": fmt}}).param == "text.format.schema"
    parse_request(_with_tool_schema({"type": "object", "description": "x" * (MAX_SCHEMA_CHARS - 100)}))


def test_a_body_built_in_python_is_held_to_the_same_limits() -> None:
    body = CreateResponseBody(
        input="hi", tools=[FunctionToolParam.model_validate({"name": "f", "parameters": _nested_schema(200)})]
    )
    with pytest.raises(RequestError) as caught:
        request_to_conversation(body)
    assert caught.value.param is not None and caught.value.param.startswith("tools[0].parameters")


# -- 4. errors name the request's own path and what was expected ---------------------------------------------


@pytest.mark.parametrize(
    ("item", "param", "says"),
    [
        ({"type": "message", "role": "robot", "content": "x"}, "input[0].role",
         ['"assistant", "developer", "system", "user"', 'found "robot"']),
        ({"type": "mesage", "role": "user", "content": "x"}, "input[0].type", ['"function_call"', 'found "mesage"']),
        ({"role": "usr", "content": "x"}, "input[0].role", ['"user"', 'found "usr"', '"message"']),
        ({"type": "message", "role": "user", "content": 5}, "input[0].content",
         ["a string", "an array", "found 5 (an integer)"]),
        ({"type": "message", "role": "user", "content": [{"type": "input_text", "text": 5}]},
         "input[0].content[0].text", ["expected a string", "found 5"]),
        ({"type": "message", "role": "user", "content": [{"type": "input_txt", "text": "x"}]},
         "input[0].content[0].type", ['"input_text"', 'found "input_txt"']),
        ({"type": "function_call", "call_id": "c", "name": "f"}, "input[0].arguments", ["required"]),
    ],
)  # fmt: skip
def test_input_errors_name_the_real_path_and_what_was_expected(
    item: dict[str, Any], param: str, says: list[str]
) -> None:
    error = refused({"input": [item]})
    assert error.param == param
    for words in says:
        assert words in error.message, error.message
    for internal in ("constrained-str", "tagged-union", "ItemParam", "item_tag", "list["):
        assert internal not in str(error)


@pytest.mark.parametrize(
    ("raw", "param", "says"),
    [
        ({"input": 5}, "input", "expected a string or an array, found 5 (an integer)"),
        ({"tool_choice": "sometimes"}, "tool_choice", '"none", "auto", "required"'),
        ({"tools": [{"type": "function", "name": 5}]}, "tools[0].name", "expected a string"),
        ({"tools": [{"type": "function"}]}, "tools[0].name", "required"),
        ({"temperature": "hot"}, "temperature", "expected a number"),
        ([1, 2], None, "expected the request body to be an object"),
    ],
)
def test_other_fields_name_their_path(raw: Any, param: str | None, says: str) -> None:
    error = refused(raw)
    assert error.param == param
    assert says in error.message


# -- 5. a field is honoured or refused, never dropped --------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"conversation": "conv_1"}, "conversation"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"seed": 7}, "seed"),
        ({"store": True}, "store"),
        ({"background": True}, "background"),
        ({"max_output_tokens": 20}, "max_output_tokens"),
        ({"temperature": 0.2}, "temperature"),
        ({"top_p": 0.5}, "top_p"),
        ({"top_logprobs": 3}, "top_logprobs"),
        ({"include": ["reasoning.encrypted_content"]}, "include[0]"),
        ({"reasoning": {"summary": "detailed"}}, "reasoning.summary"),
        ({"text": {"verbosity": "low"}}, "text.verbosity"),
        ({"truncation": "auto"}, "truncation"),
        ({"stream_options": {"include_obfuscation": True}}, "stream_options.include_obfuscation"),
        ({"frobnicate": 1}, "frobnicate"),
    ],
)
def test_a_field_nobody_honours_is_a_400_naming_it(extra: dict[str, Any], param: str) -> None:
    error = refused({**EXAMPLE, **extra})
    assert error.param == param
    assert error.code in ("unsupported_parameter", "unknown_parameter")


@pytest.mark.parametrize(
    "neutral",
    [
        {"store": False}, {"background": False}, {"temperature": 1}, {"top_p": 1.0}, {"presence_penalty": 0},
        {"top_logprobs": 0}, {"service_tier": "auto"}, {"truncation": "disabled"}, {"text": {"verbosity": "medium"}},
        {"stream": True}, {"parallel_tool_calls": False}, {"max_tool_calls": 1}, {"metadata": {"k": "v"}},
        {"safety_identifier": "s"}, {"prompt_cache_key": "k"},
    ],
)  # fmt: skip
def test_a_value_that_asks_for_nothing_is_accepted(neutral: dict[str, Any]) -> None:
    parse_request({**EXAMPLE, **neutral})


def test_capabilities_say_what_the_caller_honours() -> None:
    from harmony_responses.bridge import Capabilities

    server = Capabilities(store=True, sampling=True, max_output_tokens=True)
    body = parse_request({**EXAMPLE, "store": True, "seed": 7, "temperature": 0.2, "max_output_tokens": 20}, server)
    assert body.max_output_tokens == 20
    assert refused({**EXAMPLE, "background": True}, server).param == "background"
    parse_request({**EXAMPLE, "users": "u"}, Capabilities(extra_fields=frozenset({"users"})))
