"""Unit tests of the server's modules, one at a time, in process (no sockets)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from harmony_responses import load_harmony_encoding, parse_tokens
from harmony_responses._tables import spec
from harmony_responses.bridge import ChatChunks, EventSink, RequestError, SSESink
from harmony_responses.cli import build_parser
from harmony_responses.server.auth import KeyCheck
from harmony_responses.server.body import MAX_VALUES, nesting_exceeds, read_json, too_many_values
from harmony_responses.server.calls import call_header
from harmony_responses.server.chat import (
    chat_param,
    chat_request_error,
    parse_chat_request,
    to_responses_body,
)
from harmony_responses.server.command import settings_from_args, startup_warnings
from harmony_responses.server.engines.base import EngineRequest, Finished, FinishReason, Text, Tokens, ToolSpec
from harmony_responses.server.engines.demo import DemoEngine, example_value
from harmony_responses.server.engines.ollama import prompt_as_text
from harmony_responses.server.engines.replay import RecordingError, ReplayEngine, load_recordings
from harmony_responses.server.engines.spec import EngineSpecError, parse_engine_spec
from harmony_responses.server.errors import ErrorKind, ServerError
from harmony_responses.server.media import FILE_MARKER, IMAGE_MARKER, with_media_placeholders
from harmony_responses.server.respond import ResponseRun, parse_body, plan_request
from harmony_responses.server.settings import MediaPolicy, ReasoningEvents, Settings, SettingsError
from harmony_responses.server.stored import NotRecorded
from harmony_responses.store import InvalidArgument, MemoryStore, Owner, ResponseNotFound, StoreError
from harmony_responses.types import FunctionCall

from serverkit import asgi_post, asgi_request

ENC = load_harmony_encoding("HarmonyGptOss")
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def tokens(text: str) -> list[int]:
    return ENC.encode(text, allowed_special="all")


# -- settings and the command line -------------------------------------------------------------------


def test_settings_come_from_env_and_flags_win() -> None:
    env = {
        "HARMONY_RESPONSES_PORT": "9000",
        "HARMONY_RESPONSES_API_KEYS": "a, b",
        "HARMONY_RESPONSES_MEDIA": "placeholder",
    }
    settings = Settings.from_env(env)
    assert (settings.port, settings.api_keys, settings.media) == (9000, ("a", "b"), MediaPolicy.PLACEHOLDER)
    assert Settings.from_env(settings.to_env()) == settings
    args = build_parser().parse_args(["serve", "--port", "7000", "--api-key", "k"])
    assert settings_from_args(args, env).port == 7000 and settings_from_args(args, env).api_keys == ("k",)


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"HARMONY_RESPONSES_PORT": "eighty"}, "HARMONY_RESPONSES_PORT"),
        ({"HARMONY_RESPONSES_MEDIA": "sometimes"}, "HARMONY_RESPONSES_MEDIA"),
        ({"HARMONY_RESPONSES_WORKERS": "0"}, "workers"),
        ({"HARMONY_RESPONSES_ENGINE_TIMEOUT": "-1"}, "engine_timeout"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(SettingsError, match=fragment):
        Settings.from_env(env)


def test_warns_when_listening_beyond_loopback_without_keys() -> None:
    assert startup_warnings(Settings(host="127.0.0.1")) == []
    assert startup_warnings(Settings(host="::1")) == [] and startup_warnings(Settings(host="localhost")) == []
    assert "without API keys" in startup_warnings(Settings(host="0.0.0.0"))[0]
    assert startup_warnings(Settings(host="0.0.0.0", api_keys=("k",))) == []


@pytest.mark.parametrize(
    ("spec", "kind", "target", "options"),
    [
        ("demo", "demo", "", {}),
        ("demo:?tps=50", "demo", "", {"tps": "50"}),
        ("vllm:http://127.0.0.1:8001", "vllm", "http://127.0.0.1:8001", {}),
        ("vllm:http://h:8001?model=openai/gpt-oss-120b", "vllm", "http://h:8001", {"model": "openai/gpt-oss-120b"}),
        (
            "ollama:http://127.0.0.1:11434?model=gpt-oss:20b",
            "ollama",
            "http://127.0.0.1:11434",
            {"model": "gpt-oss:20b"},
        ),
        ("replay:rec.jsonl?tps=100&first_token_ms=50", "replay", "rec.jsonl", {"tps": "100", "first_token_ms": "50"}),
    ],
)
def test_engine_specs(spec: str, kind: str, target: str, options: dict[str, str]) -> None:
    parsed = parse_engine_spec(spec)
    assert (parsed.kind, parsed.target, parsed.options) == (kind, target, options)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("tgi:http://x", "unknown engine"),
        ("vllm", "base URL"),
        ("vllm:127.0.0.1:8000", "base URL"),
        ("replay", "recordings file"),
        ("vllm:http://x?temperature=1", "unknown option"),
        ("demo:foo", "no target"),
    ],
)
def test_bad_engine_specs(spec: str, fragment: str) -> None:
    with pytest.raises(EngineSpecError, match=fragment):
        parse_engine_spec(spec)


# -- bodies and keys -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "deep"),
    [
        (b'{"a": [1, {"b": []}]}', 4, False),
        (b'{"a": [1, {"b": []}]}', 3, True),
        (b'{"a": "[[[[[[[[[[", "b": "\\"]]]]{{{{"}', 1, False),
        (b"[" * 65 + b"]" * 65, 64, True),
        (b"[" * 64 + b"]" * 64, 64, False),
        (b"[[[", 3, False),  # malformed: left to the parser, which names the place
        (b"[[[", 2, True),  # malformed, but it opens more levels than the limit before the parser would say so
        (b'{"a": "\\\\", "b": [[["\\\\\\"]"]]]}', 4, False),  # escaped backslashes, then an escaped quote
        (b'{"a": "\\\\", "b": [[["\\\\\\"]"]]]}', 3, True),
        (b"[[]" * 1000 + b"]" * 1000, 64, True),  # no long run of openers at first: one appears after a pass
    ],
)
def test_nesting_scan(text: bytes, limit: int, deep: bool) -> None:
    assert nesting_exceeds(text, limit) is deep


@pytest.mark.parametrize(
    "hostile",
    [
        b'{"input": "' + b'\\"' * 40_000 + b"}",  # an unterminated run of escaped quotes (backtracked quadratically)
        b'{"input": "' + b'\\"' * 40_000 + b'"}',
        b"[" * (4 << 20) + b"]" * (4 << 20),  # 8 MiB nested 4M deep (64 passes over 8 MiB)
        b"[[]" * (2 << 20),
        b'""' * (4 << 20),  # 8M quotes
        b'"' + b"\\" * (4 << 20) + b'"',
    ],
)
def test_body_scans_are_linear(hostile: bytes) -> None:
    """Each scan of an 8 MiB hostile body takes CPU time of a linear pass (the old scans took 3 s on 40 KB)."""
    started = time.process_time()
    nesting_exceeds(hostile, 64)
    too_many_values(hostile)
    assert time.process_time() - started < 0.5


def test_read_json_refuses_before_reading_everything() -> None:
    reads = 0

    async def chunks() -> Any:
        nonlocal reads
        for _ in range(1000):
            reads += 1
            yield b"x" * 100

    async def main() -> None:
        with pytest.raises(ServerError) as info:
            await read_json({}, chunks(), max_bytes=1000, max_depth=8)
        assert info.value.kind is ErrorKind.BODY_TOO_LARGE and info.value.status == 413
        with pytest.raises(ServerError) as declared:
            await read_json({"content-length": "5000"}, chunks(), max_bytes=1000, max_depth=8)
        assert declared.value.status == 413

    asyncio.run(main())
    assert reads == 11  # the eleventh chunk went over the limit; the other 989 were never read


def test_bodies_with_too_many_values_are_refused_before_parsing() -> None:
    async def one(data: bytes) -> Any:
        async def chunks() -> Any:
            yield data

        return await read_json({}, chunks(), max_bytes=10**8, max_depth=64)

    crowded = b"[" + b"{}," * (MAX_VALUES + 1) + b"{}]"
    with pytest.raises(ServerError, match="more than 200000 values") as info:
        asyncio.run(one(crowded))
    assert info.value.status == 400
    text = b'{"input": "' + b"a, b, " * MAX_VALUES + b'"}'  # commas inside a string are text, not values
    assert asyncio.run(one(text))["input"].startswith("a, b")


def test_keys() -> None:
    KeyCheck(()).check({})  # none configured: anything goes
    check = KeyCheck(("sk-1", "sk-2"))
    check.check({"authorization": "Bearer sk-2"})
    check.check({"authorization": "bearer sk-1"})
    for headers in ({}, {"authorization": "sk-1"}, {"authorization": "Bearer sk-3"}, {"authorization": "Bearer "}):
        with pytest.raises(ServerError) as info:
            check.check(headers)
        assert info.value.status == 401 and info.value.headers == {"WWW-Authenticate": "Bearer"}


# -- Chat Completions mapping --------------------------------------------------------------------------


def test_chat_messages_map_onto_input_items() -> None:
    request = parse_chat_request(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "sys"},
                {"role": "developer", "content": [{"type": "text", "text": "dev"}]},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "u"}}],
                },
                {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "think",
                    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "out"},
            ],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "response_format": {"type": "json_object"},
            "reasoning_effort": "low",
            "max_completion_tokens": 99,
            "max_tokens": 5,
            "temperature": 0.5,
        }
    )
    with pytest.raises(RequestError) as refused:  # refused in Chat's words: its part type, at its place
        to_responses_body(request, MediaPolicy.REJECT)
    assert refused.value.param == "messages[2].content[1]" and "image_url" in refused.value.message
    body, items = to_responses_body(request, MediaPolicy.PLACEHOLDER)
    assert [(i["type"], i.get("role")) for i in body["input"]] == [
        ("message", "system"),
        ("message", "developer"),
        ("message", "user"),
        ("reasoning", None),
        ("function_call", None),
        ("function_call_output", None),
    ]
    assert body["input"][2]["content"][1] == {"type": "input_image", "image_url": "u"}
    assert body["input"][4] == {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    assert body["tool_choice"] == {"type": "function", "name": "f"} and body["reasoning"] == {"effort": "low"}
    assert body["text"]["format"]["type"] == "json_schema" and body["temperature"] == 0.5
    assert request.budget == 99
    assert [o for o, _ in items.origins] == [f"messages[{i}]" for i in range(4)] + [
        "messages[3].tool_calls[0]",
        "messages[4]",
    ]
    parse_body(body)  # a valid Open Responses request


@pytest.mark.parametrize(
    ("param", "chat"),
    [
        ("input[2].content[1]", "messages[2].content[1]"),
        ("input[4].arguments", "messages[3].tool_calls[0].function.arguments"),
        ("input[5].call_id", "messages[4].tool_call_id"),
        ("tools[0].name", "tools[0].function.name"),
        ("tool_choice.name", "tool_choice.function.name"),
        ("text.format.schema", "response_format.json_schema.schema"),
        ("reasoning.effort", "reasoning_effort"),
        (None, None),
    ],
)
def test_chat_errors_are_renamed_onto_chat_fields(param: str | None, chat: str | None) -> None:
    request = parse_chat_request(
        {
            "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                {
                    "role": "assistant",
                    "reasoning_content": "r",
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "x"}}],
                },
                {"role": "tool", "tool_call_id": "c", "content": "o"},
            ]
        }
    )
    _body, items = to_responses_body(request, MediaPolicy.REJECT)
    assert chat_param(param, items) == chat
    renamed = chat_request_error(RequestError("x", "message", param), items)
    assert (renamed.code, renamed.message, renamed.param) == ("x", "message", chat)


def test_chat_audio_is_refused_or_replaced() -> None:
    raw = {
        "messages": [
            {"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]}
        ]
    }
    with pytest.raises(RequestError) as info:
        to_responses_body(parse_chat_request(raw), MediaPolicy.REJECT)
    assert info.value.param == "messages[0].content[0]"
    body, _ = to_responses_body(parse_chat_request(raw), MediaPolicy.PLACEHOLDER)
    assert body["input"][0]["content"][0]["type"] == "input_text"


def test_chat_chunks_carry_usage_last() -> None:
    request = parse_chat_request(
        {"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": True}}
    )
    plan = plan_request(
        parse_body(to_responses_body(request, MediaPolicy.REJECT)[0]), ENC, media=MediaPolicy.REJECT, budget=50
    )
    sink = EventSink()
    run = ResponseRun(plan, ENC, sink, model="m")
    chunks = ChatChunks(include_usage=True)
    run.start()
    out = chunks.feed(sink.take())
    run.feed(Tokens(tokens("<|channel|>final<|message|>Hello!<|return|>")))
    out += chunks.feed(sink.take())
    run.finish(Finished(FinishReason.STOP, 200002))
    out += chunks.feed(sink.take())
    out += chunks.close()
    assert out[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in out[1:-2]) == "Hello!"
    assert out[-2]["choices"][0]["finish_reason"] == "stop"
    assert out[-1]["choices"] == [] and out[-1]["usage"]["completion_tokens"] == len(
        tokens("<|channel|>final<|message|>Hello!<|return|>")
    )


# -- media ----------------------------------------------------------------------------------------------


def test_media_placeholders_replace_every_non_text_part() -> None:
    body = parse_body(
        {
            "input": [
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "data:,"},
                    {"type": "input_file", "file_data": "abc"}]},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c",
                 "output": [{"type": "input_file", "filename": "a.pdf"}]},
            ]
        }
    )  # fmt: skip
    replaced = with_media_placeholders(body)
    dumped = replaced.model_dump(mode="json")["input"]
    # Each marker is set apart from the text it would touch, so it never glues onto a word.
    assert [p["text"] for p in dumped[0]["content"]] == ["look", "\n" + IMAGE_MARKER + "\n", FILE_MARKER]
    assert dumped[2]["output"] == [{"type": "input_text", "text": "[file 'a.pdf' omitted: this model reads text only]"}]
    plain = parse_body({"input": "just text"})
    assert with_media_placeholders(plain) is plain


# -- text → tokens, the call header, the Ollama prompt ---------------------------------------------------


@pytest.mark.parametrize("cut", [1, 2, 3, 5, 7, 11])
def test_text_from_a_text_engine_reads_as_its_tokens_would(cut: int) -> None:
    text = "<|channel|>final<|message|>a <b> c <|end|> text|>"
    by_text = run_of({"input": "x"})
    for i in range(0, len(text), cut):
        by_text.feed(Text(text[i : i + cut]))
    by_text.finish(Finished(FinishReason.STOP))
    by_tokens = run_of({"input": "x"})
    by_tokens.feed(Tokens(tokens(text)))
    by_tokens.finish(Finished(FinishReason.STOP))
    a, b = by_text.response(), by_tokens.response()
    assert a is not None and b is not None
    assert [o.model_dump(exclude={"id"}) for o in a.output] == [o.model_dump(exclude={"id"}) for o in b.output]


def test_call_header_is_the_models_order() -> None:
    assert ENC.decode(call_header(ENC, "get_weather")) == (
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    )


def test_ollama_prompt_escapes_control_spellings_in_text_only() -> None:
    plan = plan_request(parse_body({"input": "say <|end|> now"}), ENC, media=MediaPolicy.REJECT, budget=50)
    text = prompt_as_text(ENC, plan.engine_request.prompt)
    assert text.count("<|end|>") == 2  # the system and user messages' own ends, not the user's spelling
    assert "say <\u2060|end|> now" in text and text.endswith("<|start|>assistant")


# -- the demo and replay engines -------------------------------------------------------------------------


def run_engine(engine: Any, request: EngineRequest) -> list[Any]:
    async def main() -> list[Any]:
        return [o async for o in engine.generate(request)]

    return asyncio.run(main())


def demo_request(raw: dict[str, Any], budget: int = 500) -> EngineRequest:
    return plan_request(parse_body(raw), ENC, media=MediaPolicy.REJECT, budget=budget).engine_request


def completion_of(outputs: list[Any]) -> list[int]:
    return [t for o in outputs if isinstance(o, Tokens) for t in o.ids]


def test_demo_answers_reasoning_then_final() -> None:
    outputs = run_engine(DemoEngine(ENC), demo_request({"input": "hello <|return|> world"}))
    messages = parse_tokens(ENC, completion_of(outputs))
    assert [m.channel for m in messages] == ["analysis", "final"]
    assert messages[-1].content.endswith("You said: hello <|return|> world") and "demo engine" in messages[-1].content
    assert outputs[-1] == Finished(FinishReason.STOP, 200002)


def test_demo_calls_a_declared_function_then_answers_after_its_output() -> None:
    outputs = run_engine(DemoEngine(ENC), demo_request({"input": "weather?", "tools": [WEATHER]}))
    call = parse_tokens(ENC, completion_of(outputs))[-1]
    assert (call.recipient, call.content, call.terminator) == ("functions.get_weather", '{"city": "demo"}', "call")
    after = [
        {"type": "message", "role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "c", "name": "get_weather", "arguments": call.content},
        {"type": "function_call_output", "call_id": "c", "output": "sunny"},
    ]
    answer = parse_tokens(
        ENC, completion_of(run_engine(DemoEngine(ENC), demo_request({"input": after, "tools": [WEATHER]})))
    )
    assert answer[-1].channel == "final" and answer[-1].content.endswith("get_weather: sunny")


def test_demo_respects_the_budget_and_forced_calls() -> None:
    outputs = run_engine(DemoEngine(ENC), demo_request({"input": "hello"}, budget=16))
    assert len(completion_of(outputs)) == 16 and outputs[-1] == Finished(FinishReason.LENGTH)
    forced = {"input": "hi", "tools": [WEATHER], "tool_choice": {"type": "function", "name": "get_weather"}}
    assert ENC.decode(completion_of(run_engine(DemoEngine(ENC), demo_request(forced)))) == '{"city": "demo"}<|call|>'


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "object", "properties": {"n": {"type": "integer"}, "e": {"enum": ["x", "y"]}},
          "required": ["n", "e"]}, {"n": 1, "e": "x"}),
        ({"type": ["null", "boolean"]}, True),
        ({"anyOf": [{"type": "number"}, {"type": "string"}]}, 1),
        ({"const": 7}, 7),
        ({"type": "object"}, {}),
    ],
)  # fmt: skip
def test_example_values_follow_the_schema(schema: dict[str, Any], value: Any) -> None:
    assert example_value(schema) == value


def test_replay_recordings(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    lines = [
        {"completion": "<|channel|>final<|message|>one<|return|>"},
        {"tokens": tokens("<|channel|>final<|message|>two<|return|>")},
        {"completion": "<|channel|>final<|message|>matched<|return|>", "match": "special words"},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    engine = ReplayEngine(load_recordings(path, ENC), ENC, tokens_per_second=0, chunk=3)
    played = [ENC.decode(completion_of(run_engine(engine, demo_request({"input": text})))) for text in ("a", "b", "c")]
    assert played == [
        "<|channel|>final<|message|>one<|return|>",
        "<|channel|>final<|message|>two<|return|>",
        "<|channel|>final<|message|>one<|return|>",
    ]
    assert "matched" in ENC.decode(completion_of(run_engine(engine, demo_request({"input": "some special words"}))))
    for bad, fragment in [
        ("", "no recordings"),
        ("{nope", "not JSON"),
        ('{"text": "x"}', "record 1"),
        ("[1]", "record 1"),
    ]:
        path.write_text(bad)
        with pytest.raises(RecordingError, match=fragment):
            load_recordings(path, ENC)


def test_replay_paces_tokens_on_a_schedule() -> None:
    recording = load_recordings_from_text("<|channel|>final<|message|>" + "word " * 30 + "<|return|>")
    engine = ReplayEngine(recording, ENC, tokens_per_second=200, first_token_s=0.05, chunk=1)
    started = time.monotonic()
    outputs = run_engine(engine, demo_request({"input": "x"}))
    elapsed = time.monotonic() - started
    n = len(completion_of(outputs))
    assert elapsed >= 0.05 + (n - 1) / 200 * 0.95 and elapsed < 0.05 + n / 200 + 1.0


def load_recordings_from_text(text: str) -> Any:
    from harmony_responses.server.engines.replay import Recording

    return [Recording(tuple(tokens(text)))]


# -- ResponseRun: what the server adds to the bridge's streamer -------------------------------------------


def run_of(raw: dict[str, Any], budget: int = 200) -> ResponseRun:
    plan = plan_request(parse_body(raw), ENC, media=MediaPolicy.REJECT, budget=budget)
    run = ResponseRun(plan, ENC, EventSink(), model="m")
    run.start()
    return run


def events_of(run: ResponseRun) -> list[Any]:
    sink = run.sink
    assert isinstance(sink, EventSink)
    return sink.take()


def calls_of(run: ResponseRun) -> list[str]:
    response = run.response()
    assert response is not None
    return [item.name for item in response.output if isinstance(item, FunctionCall)]


def test_a_silent_stop_closes_a_call_as_a_call_and_an_answer_as_an_answer() -> None:
    run = run_of({"input": "x", "tools": [WEATHER]})
    run.feed(Text("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}"))
    run.finish(Finished(FinishReason.STOP))
    response = run.response()
    assert response is not None and response.status == "completed" and calls_of(run) == ["get_weather"]
    answer = run_of({"input": "x"})
    answer.feed(Text("<|channel|>final<|message|>done"))
    answer.finish(Finished(FinishReason.STOP))
    final = answer.response()
    assert final is not None and final.status == "completed" and final.output[-1].model_dump()["status"] == "completed"


def test_budget_ending_between_messages_is_incomplete() -> None:
    run = run_of({"input": "x"})
    run.feed(Tokens(tokens("<|channel|>analysis<|message|>thinking<|end|>")))
    run.finish(Finished(FinishReason.LENGTH))
    assert events_of(run)[-1].type == "response.incomplete"
    response = run.response()
    assert response is not None and response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens" and response.completed_at is None


def test_parallel_tool_calls_false_keeps_the_first_call_only() -> None:
    two = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>"
    run = run_of({"input": "x", "tools": [WEATHER], "parallel_tool_calls": False})
    run.feed(Tokens(tokens(two + "<|start|>assistant" + two)))
    run.finish(Finished(FinishReason.STOP))
    response = run.response()
    assert response is not None and [i.type for i in response.output] == ["function_call"]


@pytest.mark.parametrize(("fields", "calls"), [({}, 3), ({"max_tool_calls": 2}, 2), ({"max_tool_calls": 5}, 3)])
def test_calls_in_one_completion_up_to_max_tool_calls(fields: dict[str, Any], calls: int) -> None:
    one = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>"
    run = run_of({"input": "x", "tools": [WEATHER], **fields})
    run.feed(Tokens(tokens(one + ("<|start|>assistant" + one) * 2)))
    run.finish(Finished(FinishReason.STOP))
    response = run.response()
    assert response is not None and [i.type for i in response.output] == ["function_call"] * calls


@pytest.mark.parametrize(
    ("raw", "completion", "fragment"),
    [
        ({"tool_choice": "none"}, "<|channel|>commentary to=functions.get_weather<|message|>{}<|call|>",
         "allows no function"),
        ({"tool_choice": "required", "tools": [WEATHER, {**WEATHER, "name": "other"}]},
         "<|channel|>final<|message|>no call<|return|>", "without one"),
    ],
)  # fmt: skip
def test_tool_choice_violations_fail_with_their_code(raw: dict[str, Any], completion: str, fragment: str) -> None:
    run = run_of({"input": "x", "tools": [WEATHER], **raw})
    run.feed(Tokens(tokens(completion)))
    run.finish(Finished(FinishReason.STOP))
    events = events_of(run)
    assert [e.type for e in events[-2:]] == ["error", "response.failed"]
    assert events[-2].error.code == "tool_choice_violated" and fragment in events[-2].error.message
    assert run.failure is ErrorKind.TOOL_CHOICE_VIOLATED


def test_engine_failure_codes() -> None:
    run = run_of({"input": "x"})
    run.feed(Tokens(tokens("<|channel|>final<|message|>partial")))
    events_of(run)
    run.fail(ErrorKind.ENGINE_TIMEOUT, "no token for 60 s")
    events = events_of(run)
    assert events[0].error.code == "engine_timeout" and events[0].error.type == "server_error"
    response = run.response()
    assert response is not None and response.status == "failed" and response.error is not None
    assert response.error.code == "engine_timeout"
    run.fail(ErrorKind.ENGINE_FAILED, "again")
    assert events_of(run) == []


def test_forced_call_budget_must_leave_room() -> None:
    with pytest.raises(RequestError, match="no room"):
        plan_request(
            parse_body({"input": "x", "tools": [WEATHER], "tool_choice": "required"}),
            ENC,
            media=MediaPolicy.REJECT,
            budget=5,
        )
    plan = plan_request(
        parse_body({"input": "x", "tools": [WEATHER], "tool_choice": "required"}),
        ENC,
        media=MediaPolicy.REJECT,
        budget=100,
    )
    assert (
        plan.engine_request.max_tokens == 100 - len(plan.prefill)
        and plan.engine_request.json_schema == WEATHER["parameters"]
    )
    assert plan.engine_request.tools == (ToolSpec("get_weather", WEATHER["parameters"]),)


def test_reasoning_event_names_on_the_wire() -> None:
    texts = {}
    for names in ("spec", "openai"):
        sink = SSESink(names)
        plan = plan_request(parse_body({"input": "x"}), ENC, media=MediaPolicy.REJECT, budget=200)
        run = ResponseRun(plan, ENC, sink, model="m")
        run.start()
        run.feed(Tokens(tokens("<|channel|>analysis<|message|>hm<|end|>")))
        texts[names] = sink.take()
    spec, openai = texts["spec"], texts["openai"]
    assert "event: response.reasoning.delta\n" in spec and "response.reasoning_text" not in spec
    assert "[DONE]" not in spec  # the stream's end is written once, by the server
    assert '"type":"response.reasoning_text.delta"' in openai and "response.reasoning.delta" not in openai
    args = build_parser().parse_args(["serve", "--reasoning-events", "openai"])
    assert settings_from_args(args, {}).reasoning_events is ReasoningEvents.OPENAI


# -- bugs never hang a stream or leak a traceback -----------------------------------------------------------


class BrokenEngine(DemoEngine):
    """Yields one good output, then something no engine may yield (a bug in an adapter)."""

    def __init__(self, at_start: bool) -> None:
        super().__init__(ENC)
        self.at_start = at_start

    async def produce(self, request: EngineRequest) -> Any:
        if self.at_start:
            raise RuntimeError("adapter bug")
        yield Tokens(tokens("<|channel|>final<|message|>Hello"))
        yield 42


def test_a_bug_before_the_response_is_a_500_with_the_spec_body() -> None:
    from harmony_responses.server.app import create_app

    app = create_app(Settings(), engine=BrokenEngine(at_start=True), encoding=ENC, store=MemoryStore())
    status, body = asgi_post(app, "/v1/responses", {"input": "hi"})
    assert status == 500 and json.loads(body)["error"]["code"] == "internal_error"


def test_a_bug_mid_stream_still_ends_the_stream() -> None:
    from harmony_responses.server.app import create_app

    app = create_app(Settings(), engine=BrokenEngine(at_start=False), encoding=ENC, store=MemoryStore())
    status, body = asgi_post(app, "/v1/responses", {"input": "hi", "stream": True})
    text = body.decode()
    assert status == 200 and text.endswith("data: [DONE]\n\n")
    assert "event: error\n" in text and '"code":"internal_error"' in text and "event: response.failed\n" in text


def test_every_stored_response_is_in_the_store_when_its_terminal_event_leaves() -> None:
    from harmony_responses.server.app import create_app

    store = MemoryStore()
    app = create_app(Settings(), engine=DemoEngine(ENC), encoding=ENC, store=store)
    status, body = asgi_post(app, "/v1/responses", {"input": "hi", "stream": True})
    frames = [json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: {")]
    final = frames[-1]["response"]
    assert status == 200 and final["status"] == "completed" and final["store"] is True
    assert store.get(final["id"], Owner.of_api_key(None)) == final
    _, body = asgi_post(app, "/v1/responses", {"input": "hi", "store": False})
    unstored = json.loads(body)
    assert unstored["store"] is False
    with pytest.raises(ResponseNotFound):
        store.get(unstored["id"], Owner.of_api_key(None))
    asgi_post(app, "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})  # never stored
    _, body = asgi_post(app, "/v1/responses", {"input": 5})  # refused before any engine call: not a response
    assert json.loads(body)["error"]["param"] == "input"


def test_a_stored_turn_keeps_every_messages_token_ids_as_the_encoding_renders_it() -> None:
    from harmony_responses.server.app import create_app

    store = MemoryStore()
    app = create_app(Settings(), engine=DemoEngine(ENC), encoding=ENC, store=store)
    _, body = asgi_post(app, "/v1/responses", {"input": "hi there"})
    history = store.load_history(json.loads(body)["id"], Owner.of_api_key(None))
    rendered = history.rendering(app.state.renderer.key)
    assert len(rendered) == len(history.messages()) == 3  # the user message, the analysis, the answer
    assert rendered == [ENC.render(m) for m in history.messages()]
    assert history.rendering("another release") == [None, None, None]


class FailingFinish(MemoryStore):
    """A store that takes every response's start and fails to record its end (a database gone away)."""

    def _complete(self, *args: Any, **kwargs: Any) -> None:
        raise StoreError("the database went away")


def test_an_end_the_store_cannot_record_is_never_announced() -> None:
    from harmony_responses.server.app import create_app

    app = create_app(Settings(), engine=DemoEngine(ENC), encoding=ENC, store=FailingFinish())
    status, body = asgi_post(app, "/v1/responses", {"input": "hi"})
    error = json.loads(body)["error"]
    assert status == 503 and error["code"] == "store_unavailable" and "went away" in error["message"]
    sent: list[dict[str, Any]] = []
    with pytest.raises(NotRecorded):  # streamed: the connection is cut before the terminal event
        asgi_post(app, "/v1/responses", {"input": "hi", "stream": True}, sent)
    streamed = b"".join(m.get("body", b"") for m in sent).decode()
    assert "event: response.created" in streamed and "response.completed" not in streamed and "[DONE]" not in streamed
    status, body = asgi_post(app, "/v1/responses", {"input": "hi", "store": False})
    assert status == 200 and json.loads(body)["status"] == "completed"  # not stored, so nothing to record


def test_every_server_error_of_the_spec_has_a_kind_and_a_status() -> None:
    assert {kind.name.lower() for kind in ErrorKind} == set(spec.SERVER_ERRORS)
    for kind in ErrorKind:
        row = spec.SERVER_ERRORS[kind.name.lower()]
        error = ServerError(kind, "m")
        assert error.body()["error"]["code"] == row["code"] and error.body()["error"]["type"] == row["type"]
        assert error.status == (row["status"] or spec.SERVER_ERRORS["internal"]["status"])


class StoreDown(MemoryStore):
    """A store whose every look-up of a stored response fails (the database gone away)."""

    def _owned(self, response_id: str, owner: Owner) -> Any:
        raise StoreError("the database went away")


STORED_ENDPOINTS = [  # every endpoint on a stored response: method, path after the id, query
    ("GET", "", ""),
    ("GET", "", "stream=true"),
    ("POST", "/cancel", ""),
    ("DELETE", "", ""),
    ("GET", "/input_items", ""),
]


def test_every_endpoint_on_a_stored_response_answers_store_errors_alike() -> None:
    """Not this key's response and a store that fails: each endpoint's answer, one body per case."""
    from harmony_responses.server.app import create_app

    answers: dict[str, set[tuple[int, bytes]]] = {"missing": set(), "down": set()}
    for case, store in (("missing", MemoryStore()), ("down", StoreDown())):
        app = create_app(Settings(), engine=DemoEngine(ENC), encoding=ENC, store=store)
        for method, tail, query in STORED_ENDPOINTS:
            answers[case].add(asgi_request(app, method, f"/v1/responses/resp_gone{tail}", query=query))
    ((missing_status, missing),) = answers["missing"]
    ((down_status, down),) = answers["down"]
    assert missing_status == 404 and json.loads(missing)["error"]["message"].startswith("no response 'resp_gone'")
    assert down_status == 503 and json.loads(down)["error"]["code"] == "store_unavailable"
    assert "the database went away" in json.loads(down)["error"]["message"]


def test_one_function_maps_store_errors_to_http_errors() -> None:
    from harmony_responses.server.endpoints import stored_error

    def answer(exc: Any) -> tuple[int, dict[str, Any]]:
        response = stored_error(exc, "resp_1")
        return response.status_code, json.loads(bytes(response.body))["error"]

    status, error = answer(ResponseNotFound("resp_1", requested="resp_0"))
    assert status == 404 and "'resp_1'" in error["message"] and "another key's" in error["message"]
    status, error = answer(InvalidArgument("after", "'x' is not an input item of this response"))
    assert status == 400 and error["param"] == "after" and "'x'" in error["message"]
    status, error = answer(StoreError("disk full"))
    assert status == 503 and error["code"] == "store_unavailable" and "disk full" in error["message"]
    status, error = answer(ServerError(ErrorKind.BAD_REQUEST, "must be an integer", "starting_after"))
    assert status == 400 and error["param"] == "starting_after"
