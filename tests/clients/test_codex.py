"""Codex CLI (`@openai/codex`, its binary inside the npm package): `codex exec` with a config that only adds the
provider (wire_api = "responses") completes a turn that runs a tool and answers, and `codex exec resume` continues
it. Codex sends store: false with include: ["reasoning.encrypted_content"] on every turn (h16b's work)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from clientkit import Recorder, node_clients, proxy, responses_of, run, server  # noqa: F401

from serverkit import Server

pytestmark = pytest.mark.clients


# Codex runs the model's commands in its own sandbox, which uses the machine's bubblewrap when it is there (the
# code_interpreter tests install it) and then fails to start its helper; what is tested here is the exchange with
# the server, so the commands run unsandboxed in the test's scratch folder.
UNSANDBOXED = ("--sandbox", "danger-full-access")


def _codex(folder: Path, home: Path, work: Path, *args: str) -> list[dict[str, Any]]:
    codex = str(folder / "node_modules" / ".bin" / "codex")
    argv = [codex, "exec", "--skip-git-repo-check", "--json", *UNSANDBOXED, *args]
    printed = run(argv, cwd=work, env={"CODEX_HOME": str(home)}, timeout=240)
    return [json.loads(line) for line in printed.splitlines() if line.startswith("{")]


def test_exec_runs_a_tool_and_answers_then_resume_continues(proxy: Recorder, tmp_path: Path) -> None:  # noqa: F811
    folder = node_clients()
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        f'[model_providers.harmony]\nname = "harmony-responses"\nbase_url = "{proxy.url}/v1"\nwire_api = "responses"\n'
    )
    select = ["-m", "gpt-oss", "-c", 'model_provider="harmony"']
    first = _codex(folder, home, work, *select, "Run exec_command to list the files, then answer.")
    kinds = [e.get("type") for e in first]
    assert "turn.completed" in kinds, first
    items = [e["item"] for e in first if e.get("type") == "item.completed"]
    assert any(i.get("type") == "command_execution" for i in items), items  # the tool ran
    assert any(i.get("type") == "agent_message" and "received from" in str(i.get("text")) for i in items), items
    thread = next(e["thread_id"] for e in first if e.get("type") == "thread.started")
    second = _codex(folder, home, work, *select, "resume", str(thread), "Now answer once more.")
    assert "turn.completed" in [e.get("type") for e in second], second
    sent = [e.request for e in proxy.posted()]
    assert any(t.get("type") == "namespace" for body in sent for t in body.get("tools", []))
    unavailable = [r.get("harmony:unavailable_tools") for r in responses_of(proxy)]
    assert any(u and u[0]["type"] == "web_search" for u in unavailable), unavailable


def test_a_hosted_tool_is_logged_once_per_type(server: Server) -> None:  # noqa: F811
    body = {"model": "gpt-oss", "input": "hi", "tools": [{"type": "web_search"}, {"type": "local_shell"}]}
    for _ in range(3):
        answered = httpx.post(server.url + "/v1/responses", json=body, timeout=60).json()
        assert [t["type"] for t in answered["harmony:unavailable_tools"]] == ["web_search", "local_shell"]
    said = server.output()
    for kind in ("web_search", "local_shell"):
        assert said.count(f"requests declare {kind} tools") == 1, said[-2000:]
