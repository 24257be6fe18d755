"""The realistic 9-message conversation the render benchmark uses, built with either API."""

from __future__ import annotations

from typing import Any

TOOLS: list[dict[str, Any]] = [
    {
        "name": "search_flights",
        "description": "Search flights between two airports.\nReturns at most `limit` offers.",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "description": "IATA code, e.g. SFO"},
                "destination": {"type": "string", "description": "IATA code"},
                "cabin": {"type": "string", "enum": ["economy", "premium", "business", "first"], "default": "economy"},
                "passengers": {
                    "type": "object",
                    "description": "Who is travelling",
                    "properties": {"adults": {"type": "integer", "default": 1}, "children": {"type": "integer"}},
                    "required": ["adults"],
                },
                "limit": {"type": ["integer", "null"], "description": "Maximum offers"},
            },
            "required": ["origin", "destination"],
        },
    },
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "title": "City", "examples": ["Paris", "Tokyo"]},
                "unit": {
                    "oneOf": [{"type": "string", "enum": ["c", "f"]}, {"type": "null"}],
                    "description": "Temperature unit",
                    "default": "c",
                },
                "note": {"type": "string", "nullable": True, "description": "Free text"},
            },
            "required": ["city"],
        },
    },
    {"name": "get_time", "description": "The current local time."},
]


def build(api: Any) -> Any:
    """The conversation, built with `api` = harmony_responses or openai_harmony (same names)."""
    sys = (
        api.SystemContent.new()
        .with_reasoning_effort(api.ReasoningEffort.HIGH)
        .with_conversation_start_date("2026-11-30")
    )
    dev = (
        api.DeveloperContent.new()
        .with_instructions("You are a travel assistant. Be concise and cite tool results.")
        .with_function_tools([api.ToolDescription.new(t["name"], t["description"], t.get("parameters")) for t in TOOLS])
    )
    role = api.Role
    msg = api.Message
    return api.Conversation.from_messages(
        [
            msg.from_role_and_content(role.SYSTEM, sys),
            msg.from_role_and_content(role.DEVELOPER, dev),
            msg.from_role_and_content(
                role.USER, "Find me a flight from SFO to Tokyo next Friday, and the weather there."
            ),
            msg.from_role_and_content(
                role.ASSISTANT, "User wants flights SFO→HND and Tokyo weather. Call search_flights first."
            ).with_channel("analysis"),
            msg.from_role_and_content(role.ASSISTANT, "Let me look up flights first.").with_channel("commentary"),
            msg.from_role_and_content(
                role.ASSISTANT, '{"origin": "SFO", "destination": "HND", "passengers": {"adults": 1}}'
            )
            .with_channel("commentary")
            .with_recipient("functions.search_flights")
            .with_content_type("<|constrain|>json"),
            msg.from_author_and_content(
                api.Author.new(role.TOOL, "functions.search_flights"),
                '{"offers": [{"flight": "NH7", "depart": "11:05", "price": 1180},'
                ' {"flight": "JL1", "depart": "13:20", "price": 1245}]}',
            ).with_channel("commentary"),
            msg.from_role_and_content(
                role.ASSISTANT, "NH7 departs 11:05 for $1,180; JL1 departs 13:20 for $1,245."
            ).with_channel("final"),
            msg.from_role_and_content(role.USER, "Book the cheaper one. And what's the weather?"),
        ]
    )
