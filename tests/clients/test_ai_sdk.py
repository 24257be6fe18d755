"""Vercel AI SDK (`ai` 6 + `@ai-sdk/openai` 3, `openai.responses()`): generateText, streamText, a tool loop with
stopWhen: stepCountIs(3), a store: false tool loop, Output.object. The last two need encrypted reasoning (h16b)
and structured outputs (h16c): each case is its own test, so the report says which hold."""

from __future__ import annotations

import json
from typing import Any

import pytest
from clientkit import HERE, Recorder, node_clients, proxy, responses_of, run, server  # noqa: F401

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def results(server: Any) -> dict[str, Any]:  # noqa: F811
    recorder = Recorder(server.url)
    try:
        folder = node_clients()
        script = folder / "ai_sdk.mjs"
        script.write_text((HERE / "ai_sdk.mjs").read_text())  # run beside its node_modules
        printed = run(["node", str(script), recorder.url], cwd=folder)
        out: dict[str, Any] = json.loads(printed.strip().splitlines()[-1])
        out["_sent"] = [e.request for e in recorder.posted()]
        out["_responses"] = responses_of(recorder)
        return out
    finally:
        recorder.close()


def test_generate_text(results: dict[str, Any]) -> None:
    assert results["generateText"]["ok"], results["generateText"]
    assert "You said: Say hello." in results["generateText"]["text"]
    assert any("type" not in item for body in results["_sent"] for item in body["input"])


def test_stream_text(results: dict[str, Any]) -> None:
    assert results["streamText"]["ok"], results["streamText"]
    assert "Say hello in a stream." in results["streamText"]["text"]


@pytest.mark.parametrize("case", ["toolLoop", "toolLoopStoreFalse"])
def test_tool_loop(results: dict[str, Any], case: str) -> None:
    got = results[case]
    assert got["ok"], got
    assert got["toolResults"] == ["sunny in demo"] or any("sunny in" in str(t) for t in got["toolResults"]), got
    assert "received from weather" in got["text"], got


def test_output_object(results: dict[str, Any]) -> None:
    got = results["outputObject"]
    assert got["ok"], got
    assert set(got["object"]) == {"city", "sunny"}


def test_everything_answered_is_valid(results: dict[str, Any]) -> None:
    from responses_checker import assert_valid_response

    for response in results["_responses"]:
        assert_valid_response(response)
