"""`harmony-responses demo` (what `make run` runs): a real server, the openai SDK as the client, a transcript."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from harmony_responses.demo import prompt_tail, timeline

from serverkit import ENV_PREFIX


def _run_demo() -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    return subprocess.run(
        [sys.executable, "-m", "harmony_responses.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def test_demo_runs_a_session_through_a_real_server_and_stops_it() -> None:
    run = _run_demo()
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    turns = re.findall(r"── turn (\d) · ([^─]+)", out)
    assert [n for n, _ in turns] == ["1", "2", "3", "4", "5"], out
    assert "function_call get_weather(" in out  # the demo engine called the declared tool
    assert 'received from get_weather: {"temp_c": 18' in out  # and answered its output
    assert out.count('previous_response_id="resp_') == 3  # the output, a continuation and the streamed turn
    events = [line for line in out.splitlines() if line.startswith("events ")]
    assert len(events) == 1 and "output_text.delta ×" in events[0] and events[0].endswith("completed")
    # The prompt shown for each turn is the one the server rendered: its token count is the server's.
    assert "not the one the server rendered" not in out
    assert len(re.findall(r"completed · \d+ prompt tokens", out)) == 5
    assert "make serve" in out and "--engine vllm:" in out and "OPENAI_BASE_URL" in out
    assert "the server has stopped" in out
    url = re.search(r"listening on (http://\S+)", out)
    assert url is not None
    port = int(url.group(1).rsplit(":", 1)[1])
    import socket

    with socket.socket() as probe:  # the server is gone: its port refuses
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_transcript_helpers() -> None:
    assert timeline(["response.created", "response.output_text.delta", "response.output_text.delta"]) == (
        "created → output_text.delta ×2"
    )
    long = "<|start|>system<|message|>" + "x" * 400 + "<|end|><|start|>user<|message|>hi<|end|><|start|>assistant"
    assert prompt_tail(long) == "…<|start|>user<|message|>hi<|end|><|start|>assistant"
    assert prompt_tail("short") == "short"
