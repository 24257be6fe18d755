"""The official `openai` SDK against a real `harmony-responses serve --engine demo` process.

What the SDK parses is checked: output items, text, function calls and a full round trip, streamed
and not, through both the Responses and the Chat Completions API.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import openai
import pytest
from openai import OpenAI
from openai.types.chat import ChatCompletionFunctionToolParam
from openai.types.responses import FunctionToolParam

from serverkit import Server

# The SDK's FunctionToolParam marks `strict` required; Open Responses does not, and these tools are sent without it.
WEATHER = cast(
    FunctionToolParam,
    {
        "type": "function",
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
    },
)
CHAT_WEATHER: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
    },
}


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    proc = Server("--engine", "demo", "--model", "gpt-oss-demo")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def client(server: Server) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key="any key works when none is configured", max_retries=0)


def test_responses_create(client: OpenAI) -> None:
    response = client.responses.create(model="gpt-oss-demo", input="Say hello in three words.", max_output_tokens=500)
    assert response.status == "completed"
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert "demo engine" in response.output_text and "Say hello in three words." in response.output_text
    assert response.usage is not None and response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.usage.output_tokens_details.reasoning_tokens > 0
    assert response.max_output_tokens == 500 and response.model == "gpt-oss-demo"


def test_responses_stream(client: OpenAI) -> None:
    events = list(client.responses.create(model="gpt-oss-demo", input="Count to five.", stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[1] == "response.in_progress" and kinds[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    last = events[-1]
    assert last.type == "response.completed"
    final = last.response
    assert text == final.output_text and "Count to five." in text


def test_function_call_round_trip(client: OpenAI) -> None:
    first = client.responses.create(
        model="gpt-oss-demo",
        input="What is the weather in Paris?",
        tools=[WEATHER],
    )
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].status == "completed"
    assert calls[0].arguments == '{"location": "demo"}'
    second = client.responses.create(
        model="gpt-oss-demo",
        tools=[WEATHER],
        input=[
            {"type": "message", "role": "user", "content": "What is the weather in Paris?"},
            {
                "type": "function_call",
                "call_id": calls[0].call_id,
                "name": "get_weather",
                "arguments": calls[0].arguments,
            },
            {"type": "function_call_output", "call_id": calls[0].call_id, "output": "Sunny, 24 °C"},
        ],
    )
    assert second.status == "completed"
    assert [item.type for item in second.output] == ["reasoning", "message"]
    assert "get_weather" in second.output_text and "Sunny, 24 °C" in second.output_text


def test_streamed_function_call(client: OpenAI) -> None:
    events = list(
        client.responses.create(
            model="gpt-oss-demo",
            input="Weather in Oslo?",
            tools=[WEATHER],
            stream=True,
        )
    )
    added = [e for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
    deltas = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert len(added) == 1 and deltas and len(done) == 1 and "".join(deltas) == done[0].arguments
    assert events[-1].type == "response.completed"


def test_tool_choice_naming_a_function_is_obeyed(client: OpenAI) -> None:
    lookup: FunctionToolParam = {**WEATHER, "name": "lookup", "parameters": {"type": "object", "properties": {}}}
    response = client.responses.create(
        model="gpt-oss-demo",
        input="Hi there",
        tools=[WEATHER, lookup],
        tool_choice={"type": "function", "name": "lookup"},
    )
    assert [(i.type, getattr(i, "name", None)) for i in response.output] == [("function_call", "lookup")]


def test_chat_completion(client: OpenAI) -> None:
    completion = client.chat.completions.create(
        model="gpt-oss-demo",
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hello there"},
        ],
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "stop" and choice.message.role == "assistant"
    assert choice.message.content is not None and "Hello there" in choice.message.content
    assert completion.usage is not None and completion.usage.completion_tokens > 0


def test_chat_tool_call_round_trip(client: OpenAI) -> None:
    messages: list[Any] = [{"role": "user", "content": "Weather in Rome?"}]
    first = client.chat.completions.create(model="gpt-oss-demo", messages=messages, tools=[CHAT_WEATHER])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
    call = choice.message.tool_calls[0]
    assert call.type == "function"
    assert call.function.name == "get_weather" and call.function.arguments == '{"location": "demo"}'
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "Rain, 12 °C"},
    ]
    second = client.chat.completions.create(model="gpt-oss-demo", messages=messages, tools=[CHAT_WEATHER])
    assert second.choices[0].finish_reason == "stop"
    assert "Rain, 12 °C" in (second.choices[0].message.content or "")


def test_chat_stream_with_usage(client: OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="gpt-oss-demo",
            messages=[{"role": "user", "content": "Stream this"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert "Stream this" in text and finishes == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0


def test_chat_stream_tool_call(client: OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="gpt-oss-demo", messages=[{"role": "user", "content": "Weather?"}], tools=[CHAT_WEATHER], stream=True
        )
    )
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]
    assert calls[0].id and calls[0].function is not None and calls[0].function.name == "get_weather"
    assert "".join(tc.function.arguments or "" for tc in calls if tc.function) == '{"location": "demo"}'
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_errors_reach_the_sdk_as_typed_exceptions(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        client.responses.create(model="gpt-oss-demo", input="hi", previous_response_id="resp_123")
    assert bad.value.code == "previous_response_not_found"
    with pytest.raises(openai.BadRequestError) as chat_bad:
        client.chat.completions.create(
            model="gpt-oss-demo",
            messages=[{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "nope", "content": "x"}],
        )
    body = chat_bad.value.body
    assert isinstance(body, dict) and body["param"] == "messages[1].tool_call_id"
    assert [m.id for m in client.models.list()] == ["gpt-oss-demo"]
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("another-model")
