"""The request is read once into a frozen plan: its tools' schemas are dumped once per request, and the prompt,
the engine request and the response builder all read the same plan (issue 19, item 5). One plan step
(`respond.plan_for`) serves every endpoint that samples: Responses over HTTP and WebSocket, and Chat Completions."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from harmony_responses import load_harmony_encoding
from harmony_responses.bridge import EventSink, ToolPlan
from harmony_responses.server import respond
from harmony_responses.server.app import create_app
from harmony_responses.server.engines.base import Finished, FinishReason, Tokens
from harmony_responses.server.engines.demo import DemoEngine
from harmony_responses.server.respond import ResponseRun, parse_body, plan_request
from harmony_responses.server.settings import MediaPolicy, Settings
from harmony_responses.store import MemoryStore
from harmony_responses.types import FunctionToolParam

from serverkit import asgi_post

ENC = load_harmony_encoding("HarmonyGptOss")
PARAMETERS: Any = type(FunctionToolParam.model_validate({"name": "f", "parameters": {}}).parameters)

BODY: dict[str, Any] = {
    "input": "weather in Paris?",
    "tools": [
        {"type": "function", "name": "get_weather", "strict": True, "parameters": {"type": "object"}},
        {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}},
        {
            "type": "namespace",
            "name": "ns",
            "description": "d",
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
        },
    ],
}
COMPLETION = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>'


@pytest.fixture
def dumps(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts every dump of a tool's `parameters` model."""
    count = [0]
    original = PARAMETERS.model_dump

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(PARAMETERS, "model_dump", counting)
    yield count


def _run_one_request() -> ResponseRun:
    plan = plan_request(parse_body(BODY), ENC, media=MediaPolicy.REJECT, budget=200)
    sink = EventSink()
    run = ResponseRun(plan, ENC, sink, model="m")
    run.start()
    run.feed(Tokens(ENC.encode(COMPLETION, allowed_special="all")))
    run.finish(Finished(FinishReason.STOP, 200012))
    sink.take()
    return run


def test_each_tool_schema_is_dumped_once_per_request(dumps: list[int]) -> None:
    """Three declared functions: three dumps, for the prompt, the engine's tools, the strict check and every
    snapshot of the response (before the plan: 4 places, 11 dumps for this request, and `_tools`
    and `_check_schemas` ran twice each)."""
    run = _run_one_request()
    response = run.response()
    assert response is not None and response.status == "completed"
    assert [t.name for t in response.tools] == ["get_weather", "get_time"]
    assert dumps[0] == 3


def test_the_plan_is_frozen_and_read_by_every_part() -> None:
    plan = plan_request(parse_body(BODY), ENC, media=MediaPolicy.REJECT, budget=200)
    tools = plan.tools
    assert isinstance(tools, ToolPlan) and tools is plan.parts.tools
    assert tools.policy.allowed == ("get_weather", "get_time", "ns.f") and plan.policy is tools.policy
    assert tools.functions == ("get_weather", "get_time") and tools.namespaces == {"ns"}
    assert set(tools.strict) == {"get_weather"}
    assert all(spec.parameters is tools.schemas[spec.name] for spec in plan.engine_request.tools)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tools.policy = tools.policy  # type: ignore[misc]
    with pytest.raises(TypeError):
        tools.schemas["x"] = None  # type: ignore[index]


FUNCTIONS: list[dict[str, Any]] = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
]
REQUESTS: dict[str, dict[str, Any]] = {
    "/v1/responses": {"input": "weather in Paris?", "tools": [{"type": "function", **f} for f in FUNCTIONS]},
    "/v1/chat/completions": {
        "messages": [{"role": "user", "content": "weather in Paris?"}],
        "tools": [{"type": "function", "function": f} for f in FUNCTIONS],
        "max_completion_tokens": 300,
        "seed": 7,
    },
}


@pytest.mark.parametrize("path", REQUESTS)
def test_every_endpoint_plans_once_by_the_one_plan_step(
    path: str, dumps: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request to either endpoint goes through `plan_for` once, which plans it once (`plan_request`), and each
    of its two tools' schemas is dumped once. Chat's own fields reach the plan: its budget and its seed."""
    plans: list[respond.Plan] = []
    original = respond.plan_request

    def counting(*args: Any, **kwargs: Any) -> respond.Plan:
        plans.append(original(*args, **kwargs))
        return plans[-1]

    monkeypatch.setattr(respond, "plan_request", counting)
    app = create_app(Settings(), engine=DemoEngine(ENC), encoding=ENC, store=MemoryStore())
    status, body = asgi_post(app, path, REQUESTS[path])
    answer = json.loads(body)
    assert status == 200, answer
    assert len(plans) == 1 and dumps[0] == len(FUNCTIONS)
    (plan,) = plans
    assert [spec.name for spec in plan.engine_request.tools] == ["get_weather", "get_time"]
    if path == "/v1/chat/completions":
        assert answer["object"] == "chat.completion"
        assert plan.engine_request.sampling.seed == 7 and plan.engine_request.max_tokens == 300
