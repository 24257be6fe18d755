"""The standalone namespace renderer, against the reference's golden functions block."""

from __future__ import annotations

from typing import Any

import pytest

from harmony_responses import ToolDescription, render_tool_namespace, schema_to_typescript
from harmony_responses.tool_namespace import json_display, rust_lines

from conftest import FIXTURES, require

WEATHER_FORMAT = {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}
OPENAI_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "name": "get_location", "description": "Gets the location of the user."},
    {
        "type": "function",
        "name": "get_current_weather",
        "description": "Gets the current weather in the provided location.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "format": WEATHER_FORMAT,
            },
            "required": ["location"],
        },
    },
    {
        "type": "function",
        "function": {  # Chat Completions nesting
            "name": "get_multiple_weathers",
            "description": "Gets the current weather in the provided list of locations.",
            "parameters": {
                "type": "object",
                "properties": {
                    "locations": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": 'List of city and state, e.g. ["San Francisco, CA", "New York, NY"]',
                    },
                    "format": WEATHER_FORMAT,
                },
                "required": ["locations"],
            },
        },
    },
    {
        "type": "function",
        "name": "kitchensink",
        "description": "A function with various complex schemas.",
        "parameters": {
            "description": "params object",
            "type": "object",
            "properties": {
                "string": {
                    "type": "string",
                    "title": "STRING",
                    "description": "A string",
                    "examples": ["hello", "world"],
                },
                "string_nullable": {
                    "type": "string",
                    "nullable": True,
                    "description": "A nullable string",
                    "default": "the default",
                },
                "string_enum": {"type": "string", "enum": ["a", "b", "c"]},
                "oneof_string_or_number": {
                    "oneOf": [
                        {"type": "string", "default": "default_string_in_oneof"},
                        {"type": "number", "description": "numbers can happen too"},
                    ],
                    "description": "a oneof",
                    "default": 20,
                },
            },
        },
    },
]


def test_matches_reference_golden_block() -> None:
    golden = require(FIXTURES / "reference" / "test_render_functions_with_parameters.txt").read_text(encoding="utf-8")
    block = golden[
        golden.index("## functions") : golden.index("} // namespace functions") + len("} // namespace functions")
    ]
    assert render_tool_namespace("functions", OPENAI_TOOLS) == block


def test_description_lines_and_empty_namespace() -> None:
    tools = [ToolDescription.new("f", "line one\r\nline two\n")]
    text = render_tool_namespace("ns", tools, description="About\nthe ns\n")
    assert (
        text == "## ns\n\n// About\n// the ns\nnamespace ns {\n\n"
        "// line one\n// line two\ntype f = () => any;\n\n} // namespace ns"
    )
    assert render_tool_namespace("python", [], description="Raw text\nkept raw") == "## python\n\nRaw text\nkept raw"


def test_rust_lines() -> None:
    assert rust_lines("") == []
    assert rust_lines("a\n") == ["a"]
    assert rust_lines("a\n\nb\r\n") == ["a", "", "b"]
    # only a \r that ends a line is dropped, as openai-harmony 0.0.8 renders it
    assert rust_lines("a\r") == ["a\r"]
    assert rust_lines("\r") == ["\r"]
    assert rust_lines("a\r\r\nb") == ["a\r", "b"]
    assert rust_lines("a\n\r") == ["a", "\r"]
    assert rust_lines("\r\n") == [""]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "integer"}, "number"),
        ({"type": ["integer", "string", 3]}, "number | string"),
        ({"type": [3]}, "any"),
        ({"type": "array"}, "Array<any>"),
        ({"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}, '"a" | "b"[]'),
        ({"type": "string", "enum": [1, 2]}, "string"),
        ({"anyOf": [{"type": "string"}]}, "any"),
        ({"type": "null"}, "any"),
        ([], "any"),
        (
            {"oneOf": [{"type": "string", "nullable": True}, {"type": "null", "nullable": True}]},
            "\n | string | null\n | any | null",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "inner": {"type": "object", "description": "D", "properties": {"x": {"type": "boolean"}}}
                },
            },
            "{\n// D\ninner?:     // D\n{\n    x?: boolean,\n    },\n}",
        ),
    ],
)
def test_schema_quirks(schema: Any, expected: str) -> None:
    assert schema_to_typescript(schema) == expected


def test_json_display_is_compact_and_keeps_unicode() -> None:
    assert json_display({"b": [1, 2.5, None, True], "a": "é\n"}) == '{"b":[1,2.5,null,true],"a":"é\\n"}'
    assert json_display(1e-5) == "0.00001" and json_display(1e16) == "1e16" and json_display(3.0) == "3.0"
