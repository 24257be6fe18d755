"""OpenAI Agents SDK (`openai-agents`, `OpenAIResponsesModel`): tool loops with Runner.run and Runner.run_streamed,
and a run that continues an earlier one by previous_response_id."""

from __future__ import annotations

import json

import pytest
from clientkit import HERE, Recorder, proxy, python_clients, responses_of, run, server  # noqa: F401

pytestmark = pytest.mark.clients


def test_runner_tool_loops_and_previous_response_id(proxy: Recorder) -> None:  # noqa: F811
    got = json.loads(run([str(python_clients()), str(HERE / "agents_sdk.py"), proxy.url]))
    for case in ("run", "streamed", "previous"):
        assert got[case]["calls"], f"{case}: the tool never ran"
        assert "received from get_weather" in got[case]["final"], got[case]
        assert "sunny in" in got[case]["final"]
    assert "raw_response_event" in got["streamed"]["events"]
    sent = [e.request for e in proxy.posted()]
    # The SDK sends OpenAI's easy input messages (no `type`) and strict function tools.
    assert any(item.get("role") == "user" and "type" not in item for body in sent for item in body["input"])
    assert any(body.get("previous_response_id") == got["previous"]["first"] for body in sent)
    assert all(r["status"] == "completed" for r in responses_of(proxy))
