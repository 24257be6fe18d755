"""Each engine adapter against a fake engine process speaking that engine's wire format.

The fakes split token ids across chunks, cut JSON lines across TCP writes, split UTF-8 characters
across tokens (and, like llama.cpp, drop the held-back ids), end with a stop token as the last piece
(or, like llama.cpp and Ollama, silently), and fail before and during the stream on request. The
adapter's outputs go through the server's own `ResponseRun`, so the checks are on the final response.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any

import pytest

from harmony_responses import load_harmony_encoding
from harmony_responses.bridge.items import NullSink
from harmony_responses.server.engines.base import (
    Engine,
    EngineOutput,
    EngineRejected,
    EngineTimeout,
    EngineUnavailable,
    Finished,
    FinishReason,
    Text,
    Tokens,
)
from harmony_responses.server.engines.llamacpp import LlamaCppEngine
from harmony_responses.server.engines.ollama import OllamaEngine
from harmony_responses.server.engines.openai_completions import OpenAICompletionsEngine
from harmony_responses.server.engines.sglang import SGLangEngine
from harmony_responses.server.respond import ResponseRun, parse_body, plan_request
from harmony_responses.server.settings import MediaPolicy

from serverkit import FakeEngine

ENC = load_harmony_encoding("HarmonyGptOss")
FINAL = "Héllo wörld 👋🏽 — naïve café 🎉 日本"
REASONING = "Thinking about café ☕ and 日本語 before answering."
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
}

# adapter name → (the fake's path prefix, adapter factory); one fake process serves every wire format.
ADAPTERS: dict[str, tuple[str, Callable[[str, float], Engine]]] = {  # name: (fake engine route, adapter factory)
    "vllm": (
        "vllm",
        lambda url, t: OpenAICompletionsEngine(url, flavor="vllm", model="m", timeout=t, max_connections=8),
    ),
    "vllm-text-only": (
        "vllm-text-only",
        lambda url, t: OpenAICompletionsEngine(url, flavor="vllm", model="m", timeout=t, max_connections=8),
    ),
    "sglang-completions": (
        "sglang",
        lambda url, t: OpenAICompletionsEngine(url, flavor="sglang", model="m", timeout=t, max_connections=8),
    ),
    "sglang-cumulative": ("sglang", lambda url, t: SGLangEngine(url, timeout=t, max_connections=8)),
    "sglang-incremental": ("sglang-incremental", lambda url, t: SGLangEngine(url, timeout=t, max_connections=8)),
    "llamacpp": ("llamacpp", lambda url, t: LlamaCppEngine(url, ENC, timeout=t, max_connections=8)),
    "ollama": ("ollama", lambda url, t: OllamaEngine(url, ENC, model="gpt-oss:20b", timeout=t, max_connections=8)),
}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeEngine]:
    proc = FakeEngine("all")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(params=sorted(ADAPTERS))
def adapter(request: pytest.FixtureRequest, fake: FakeEngine) -> tuple[str, FakeEngine]:
    return request.param, fake


def engine_for(adapter: tuple[str, FakeEngine], timeout: float = 10.0) -> Engine:
    name, fake = adapter
    prefix, factory = ADAPTERS[name]
    return factory(f"{fake.url}/{prefix}", timeout)


def body(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-oss", "input": text, **extra}


async def collect(engine: Engine, raw: dict[str, Any], budget: int = 400) -> tuple[ResponseRun, list[EngineOutput]]:
    plan = plan_request(parse_body(raw), ENC, media=MediaPolicy.REJECT, budget=budget)
    run = ResponseRun(plan, ENC, NullSink(), model="gpt-oss")
    run.start()
    outputs: list[EngineOutput] = []
    try:
        async for output in engine.generate(plan.engine_request):
            outputs.append(output)
            if isinstance(output, Finished):
                run.finish(output)
            else:
                run.feed(output)
    finally:
        await engine.aclose()
    return run, outputs


def texts(run: ResponseRun) -> dict[str, str]:
    response = run.response()
    assert response is not None
    out = {}
    for item in response.output:
        data = item.model_dump(mode="json")
        if data["type"] == "function_call":
            out["call"] = f"{data['name']} {data['arguments']} {data['status']}"
        else:
            out[data["type"]] = "".join(p["text"] for p in data["content"])
    return out


def test_answer_survives_split_ids_and_split_utf8(adapter: tuple[str, FakeEngine]) -> None:
    run, outputs = asyncio.run(collect(engine_for(adapter), body("Say hi.")))
    response = run.response()
    assert response is not None and response.status == "completed"
    assert texts(run) == {"reasoning": REASONING, "message": FINAL}
    assert isinstance(outputs[-1], Finished) and outputs[-1].reason is FinishReason.STOP
    kinds = {type(o) for o in outputs[:-1]}
    name = adapter[0]
    assert kinds == ({Text} if name in ("ollama", "vllm-text-only") else {Tokens}), kinds
    if Tokens in kinds:
        assert any(len(o.ids) > 1 for o in outputs if isinstance(o, Tokens)) or name == "llamacpp"


def test_tool_call_ends_with_call_even_when_the_engine_stops_silently(adapter: tuple[str, FakeEngine]) -> None:
    run, outputs = asyncio.run(collect(engine_for(adapter), body("Weather? SCENARIO=tool", tools=[WEATHER])))
    response = run.response()
    assert response is not None and response.status == "completed", response
    assert texts(run)["call"] == 'get_weather {"location":"Zürich"} completed'
    if adapter[0] in ("llamacpp", "ollama"):  # <|call|> is an end-of-generation token there: no text, no id
        sent = [t for o in outputs if isinstance(o, Tokens) for t in o.ids]
        assert ENC.encode("<|call|>", allowed_special="all")[0] not in sent
        assert all("<|call|>" not in o.text for o in outputs if isinstance(o, Text))


def test_budget_reaches_the_engine_and_ends_incomplete(adapter: tuple[str, FakeEngine]) -> None:
    run, outputs = asyncio.run(collect(engine_for(adapter), body("Long please SCENARIO=long"), budget=20))
    response = run.response()
    assert response is not None and response.status == "incomplete"
    assert response.incomplete_details is not None and response.incomplete_details.reason == "max_output_tokens"
    assert outputs[-1] == Finished(FinishReason.LENGTH)
    if adapter[0] not in ("ollama", "vllm-text-only"):
        assert sum(len(o.ids) for o in outputs if isinstance(o, Tokens)) <= 20


@pytest.mark.parametrize(
    ("scenario", "error", "status"),
    [("error_before", EngineUnavailable, 500), ("reject", EngineRejected, 400)],
)
def test_errors_before_streaming(
    adapter: tuple[str, FakeEngine], scenario: str, error: type[Exception], status: int
) -> None:
    with pytest.raises(error) as info:
        asyncio.run(collect(engine_for(adapter), body(f"SCENARIO={scenario}")))
    assert getattr(info.value, "status", None) == status
    assert "fake engine" in str(info.value)


@pytest.mark.parametrize("scenario", ["error_mid", "cut_mid", "no_finish"])
def test_failures_mid_stream_raise_after_some_output(adapter: tuple[str, FakeEngine], scenario: str) -> None:
    seen: list[EngineOutput] = []

    async def main() -> None:
        engine = engine_for(adapter)
        plan = plan_request(parse_body(body(f"SCENARIO={scenario}")), ENC, media=MediaPolicy.REJECT, budget=400)
        try:
            async for output in engine.generate(plan.engine_request):
                seen.append(output)
        finally:
            await engine.aclose()

    with pytest.raises(EngineUnavailable):
        asyncio.run(main())
    assert seen and not any(isinstance(o, Finished) for o in seen)


def test_stall_mid_stream_times_out(adapter: tuple[str, FakeEngine]) -> None:
    started = time.monotonic()
    with pytest.raises(EngineTimeout):
        asyncio.run(collect(engine_for(adapter, timeout=0.2), body("SCENARIO=stall_mid")))
    assert time.monotonic() - started < 5


def test_closing_the_stream_aborts_the_engine_request(adapter: tuple[str, FakeEngine]) -> None:
    _name, fake = adapter
    fake.reset()

    async def main() -> float:
        engine = engine_for(adapter)
        plan = plan_request(parse_body(body("SCENARIO=slow")), ENC, media=MediaPolicy.REJECT, budget=400)
        outputs: AsyncGenerator[EngineOutput, None] = engine.generate(plan.engine_request)
        for _ in range(3):
            await outputs.__anext__()
        assert engine.active == 1
        closed_at = time.time()
        await outputs.aclose()
        assert engine.active == 0
        await engine.aclose()
        return closed_at

    closed_at = asyncio.run(main())
    stats = fake.wait_idle()
    assert stats["active"] == 0 and stats["cancelled"] == 1, stats
    assert stats["disconnect_times"][0] - closed_at < 0.1


def test_request_fields_avoid_each_engines_traps(adapter: tuple[str, FakeEngine]) -> None:
    name, fake = adapter
    fake.reset()
    raw = body("Use it. SCENARIO=tool", tools=[WEATHER], tool_choice={"type": "function", "name": "get_weather"})
    raw.update(temperature=0.3, top_p=0.9)
    run, _outputs = asyncio.run(collect(engine_for(adapter), raw, budget=300))
    assert texts(run)["call"] == 'get_weather {"location":"Zürich"} completed'
    sent = fake.stats()["requests"][-1]
    schema = WEATHER["parameters"]
    if name.startswith("vllm"):
        assert sent["max_tokens"] < 300 and sent["skip_special_tokens"] is False and sent["return_token_ids"] is True
        assert sent["structured_outputs"] == {"json": schema} and "guided_json" not in sent
        assert sent["stop_token_ids"] == [200002, 200012] and sent["temperature"] == 0.3 and sent["top_p"] == 0.9
    elif name == "sglang-completions":
        assert sent["max_tokens"] < 300 and sent["skip_special_tokens"] is False and sent["no_stop_trim"] is True
        assert json.loads(sent["json_schema"]) == schema
    elif name.startswith("sglang"):
        params = sent["sampling_params"]
        assert params["max_new_tokens"] < 300 and params["skip_special_tokens"] is False
        assert json.loads(params["json_schema"]) == schema and params["temperature"] == 0.3
    elif name == "llamacpp":
        assert sent["n_predict"] < 300 and sent["return_tokens"] is True and sent["json_schema"] == schema
        assert (sent["top_k"], sent["min_p"], sent["repeat_penalty"], sent["temperature"]) == (0, 0.0, 1.0, 0.3)
    else:
        assert sent["raw"] is True and sent["options"]["num_predict"] < 300 and sent["format"] == schema
        assert sent["prompt"].endswith("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>")
