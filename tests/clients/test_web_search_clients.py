"""Clients whose web search the server runs (`--web-search` against the fake SearXNG of tests/services/fake_web.py):
Codex CLI with its web search left on (it declares `{"type": "web_search", "external_web_access": false}` by
default) completes a turn that searches, and the Agents SDK's `WebSearchTool` completes a run, streamed and not.
The demo engine searches when the browser is declared and the user asks for a search."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clientkit import HERE, ROOT, Recorder, check_exchanges, node_clients, python_clients, responses_of, run

from serverkit import Server

sys.path.insert(0, str(ROOT / "tests" / "hosted"))

from webkit import Web, fake_web  # noqa: E402

pytestmark = pytest.mark.clients


@pytest.fixture(scope="module")
def web() -> Iterator[Web]:
    with fake_web() as found:
        yield found


@pytest.fixture(scope="module")
def searching(web: Web) -> Iterator[Server]:
    """The demo engine with web search; the fake page server is on loopback, so the operator allows it."""
    proc = Server("--engine", "demo", "--web-search", web.search_url, "--hosted-allow", "127.0.0.1")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def recorder(searching: Server) -> Iterator[Recorder]:
    proxy = Recorder(searching.url)
    try:
        yield proxy
        check_exchanges(proxy)  # every response and event the server sent is valid (overrides applied)
    finally:
        proxy.close()


def _web_search_calls(responses: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for r in responses for item in r["output"] if item["type"] == "web_search_call"]


def test_codex_with_web_search_on_completes_a_turn_that_searches(recorder: Recorder, web: Web, tmp_path: Path) -> None:
    folder = node_clients()
    fetched = len(web.page_requests())
    home, work = tmp_path / "codex-home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.toml").write_text(
        f'[model_providers.harmony]\nname = "harmony-responses"\nbase_url = "{recorder.url}/v1"\n'
        'wire_api = "responses"\n'
    )
    argv = [str(folder / "node_modules" / ".bin" / "codex"), "exec", "--skip-git-repo-check", "--json"]
    argv += ["-m", "gpt-oss", "-c", 'model_provider="harmony"', "Search the web for zebras, then answer."]
    printed = run(argv, cwd=work, env={"CODEX_HOME": str(home)}, timeout=240)
    events = [json.loads(line) for line in printed.splitlines() if line.startswith("{")]
    assert "turn.completed" in [e.get("type") for e in events], events
    items = [e["item"] for e in events if e.get("type") == "item.completed"]
    assert any(i.get("type") == "agent_message" and "searched the web" in str(i.get("text")) for i in items), items
    declared = [t for body in (e.request for e in recorder.posted()) for t in body.get("tools", [])]
    assert {"type": "web_search", "external_web_access": False} in declared  # Codex's default, left on
    calls = _web_search_calls(responses_of(recorder))
    assert [c["action"]["type"] for c in calls] == ["search", "open_page", "find_in_page"]
    assert all(c["status"] == "completed" for c in calls)
    assert any("zebras" in q for q in web.queries())
    assert len(web.page_requests()) == fetched  # external_web_access false: hits open from the search's own record


def test_agents_sdk_web_search_tool_completes_a_run(recorder: Recorder) -> None:
    got = json.loads(run([str(python_clients()), str(HERE / "agents_web_search.py"), recorder.url]))
    assert "searched the web" in got["final"] and "searched the web" in got["streamed"]
    searches = [i for i in got["items"] if i["raw"] == "web_search_call"]
    assert len(searches) == 3 and all(i["status"] == "completed" for i in searches), got["items"]
    assert "raw_response_event" in got["events"]
    sent = [e.request for e in recorder.posted()]
    assert all(any(t.get("type") == "web_search" for t in body["tools"]) for body in sent)
    assert all(r["status"] == "completed" for r in responses_of(recorder))
    assert len(_web_search_calls(responses_of(recorder))) == 6
