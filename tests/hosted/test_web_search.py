"""Web search through gpt-oss's browser tool, run by a real server against real processes on 127.0.0.1.

The model is a fake vLLM (or Ollama, whose stop token never arrives) that uses the browser one step per request,
reading the tool messages the server put in its prompt (`SCENARIO=browse*`, tests/fake_engines/fakemodel.py); the
search service is a fake SearXNG and the pages come from a static page server (tests/services/fake_web.py). The
servers that must reach the page server are told so (`--hosted-allow 127.0.0.1`): by default loopback is refused.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from responses_checker import assert_valid_response, check_stream
from websockets.sync.client import connect

from serverkit import FakeEngine, Server, sse_events
from webkit import Web, fake_web, post, serving

WEB_SEARCH = {"type": "web_search"}
SOURCES = ["web_search_call.action.sources"]


@pytest.fixture(scope="module")
def web() -> Iterator[Web]:
    with fake_web() as found:
        yield found


@pytest.fixture(scope="module")
def vllm() -> Iterator[FakeEngine]:
    fake = FakeEngine("vllm")
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture(scope="module")
def allowed(web: Web, vllm: FakeEngine) -> Iterator[Server]:
    """A server that may reach the fake page server (the operator allowed loopback)."""
    args = ("--engine", f"vllm:{vllm.url}", "--web-search", web.search_url, "--hosted-allow", "127.0.0.1")
    with serving(*args, "--store", "memory") as server:
        yield server


@pytest.fixture(scope="module")
def default(web: Web, vllm: FakeEngine) -> Iterator[Server]:
    """A server with the default policy: the search service it was configured with, and public addresses only."""
    with serving("--engine", f"vllm:{vllm.url}", "--web-search", web.search_url, "--store", "memory") as server:
        yield server


def calls(output: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in output if item["type"] == "web_search_call"]


def answer(output: list[dict[str, Any]]) -> dict[str, Any]:
    (message,) = [item for item in output if item["type"] == "message"]
    part: dict[str, Any] = message["content"][0]
    return part


def test_a_streamed_search_opens_finds_and_cites(allowed: Server, web: Web, vllm: FakeEngine) -> None:
    vllm.reset()
    body = {"input": "SCENARIO=browse zebras?", "tools": [WEB_SEARCH], "include": SOURCES, "stream": True}
    reply = post(allowed, body)
    assert reply.status_code == 200, reply.text
    events = sse_events(reply.text)
    check_stream(events)  # every event valid (overrides applied), web_search_call events in OpenAI's order
    final = events[-1]["response"]
    assert final["status"] == "completed"
    found = calls(final["output"])
    assert [c["action"]["type"] for c in found] == ["search", "open_page", "find_in_page"]
    assert [c["status"] for c in found] == ["completed"] * 3
    harmony = web.pages_url + "/pages/harmony.html"
    assert found[0]["action"]["query"] == "harmony zebras"
    assert {"type": "url", "url": harmony} in found[0]["action"]["sources"]
    assert found[1]["action"]["url"] == harmony and found[2]["action"] == {
        "type": "find_in_page",
        "pattern": "zebras",
        "url": harmony,
    }
    assert "harmony zebras" in web.queries()
    # The page as the model read it: numbered lines, links marked, script dropped, brackets in text replaced.
    page = found[1]["harmony:hosted"]["output"]
    assert page.startswith(f"[1] The Harmony format ({harmony})\n**viewing lines [0 - ")
    assert "【0†the \nL" in page and "channels page】" in page  # wrapped at 80 columns, as the model's browser wraps
    assert "【1†another site†example.org】" in page  # a link off the page's domain names it
    assert "[Image 0: a diagram]" in page and "hidden script text" not in page and "〖" in page
    assert "\nL0: " in page
    # The answer's citation of the opened page is a url_citation spanning it.
    part = answer(final["output"])
    (citation,) = part["annotations"]
    assert citation["type"] == "url_citation" and citation["url"] == harmony
    assert part["text"][citation["start_index"] : citation["end_index"]].startswith("【1†L")
    # One completion, continued: each engine prompt extends the one before (the prefix cache's case).
    prompts = [r["prompt"] for r in vllm.stats()["requests"]]
    assert len(prompts) == 4
    for before, after in zip(prompts, prompts[1:], strict=False):
        assert after[: len(before)] == before
    assert final["usage"]["input_tokens"] == sum(len(p) for p in prompts)


def test_a_whole_response_is_stored_and_continues_as_its_items_sent_back(allowed: Server, vllm: FakeEngine) -> None:
    first = post(allowed, {"input": "SCENARIO=browse zebras?", "tools": [WEB_SEARCH]})
    assert first.status_code == 200, first.text
    response = first.json()
    assert_valid_response(response)
    assert len(calls(response["output"])) == 3 and "include" not in json.dumps(response["output"])
    assert "sources" not in calls(response["output"])[0]["action"]  # not included: not listed
    stored = httpx.get(f"{allowed.url}/v1/responses/{response['id']}", timeout=10).json()
    assert stored["output"] == response["output"]
    vllm.reset()
    second = {"type": "message", "role": "user", "content": "Thanks. And now?"}
    chained = post(allowed, {"previous_response_id": response["id"], "input": [second], "tools": [WEB_SEARCH]})
    assert chained.status_code == 200, chained.text
    steps = len(vllm.stats()["requests"])  # the fake browses again in this turn (its scenario is in the first turn)
    sent_back = [{"type": "message", "role": "user", "content": "SCENARIO=browse zebras?"}, *response["output"], second]
    again = post(allowed, {"input": sent_back, "tools": [WEB_SEARCH], "store": False})
    assert again.status_code == 200, again.text
    prompts = [r["prompt"] for r in vllm.stats()["requests"]]
    assert prompts[0] == prompts[steps]  # the stored chain and the items sent back render the same tokens
    assert len(prompts) == 2 * steps and prompts[steps - 1] == prompts[-1]  # and so do their continuations


def test_the_models_fetch_of_loopback_is_refused_by_default(default: Server, web: Web) -> None:
    target = web.pages_url + "/pages/harmony.html"
    before = len(web.page_requests())
    reply = post(default, {"input": f"SCENARIO=browse_url URL={target}", "tools": [WEB_SEARCH]})
    assert reply.status_code == 200, reply.text
    output = reply.json()["output"]
    (call,) = calls(output)
    assert call["status"] == "failed" and call["action"] == {"type": "open_page", "url": target}
    told = call["harmony:hosted"]["output"]
    assert "refused" in told and "127.0.0.1 is a loopback address" in told
    assert "refused" in answer(output)["text"]
    assert len(web.page_requests()) == before  # nothing reached the page server
    # ...while the search service the operator configured is reached.
    searched = post(default, {"input": "SCENARIO=browse_forever", "tools": [WEB_SEARCH], "max_tool_calls": 1})
    assert calls(searched.json()["output"])[0]["status"] == "completed"


def test_the_operator_allows_loopback_explicitly(allowed: Server, web: Web) -> None:
    target = web.pages_url + "/pages/redirect"
    reply = post(allowed, {"input": f"SCENARIO=browse_url URL={target}", "tools": [WEB_SEARCH]})
    (call,) = calls(reply.json()["output"])
    assert call["status"] == "completed"
    assert call["harmony:hosted"]["output"].startswith("[0] The Harmony format (" + web.pages_url)  # redirect followed


def test_max_tool_calls_ends_the_loop(allowed: Server) -> None:
    reply = post(
        allowed, {"input": "SCENARIO=browse_forever", "tools": [WEB_SEARCH], "max_tool_calls": 2, "stream": True}
    )
    events = sse_events(reply.text)
    check_stream(events)
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert [c["status"] for c in calls(final["output"])] == ["completed", "completed", "failed", "failed"]
    assert "at most 2 tool calls" in calls(final["output"])[2]["harmony:hosted"]["output"]


def test_offline_web_search_opens_hits_without_fetching(allowed: Server, web: Web) -> None:
    before = len(web.page_requests())
    tool = {"type": "web_search", "external_web_access": False, "search_context_size": "low"}
    reply = post(allowed, {"input": "SCENARIO=browse zebras?", "tools": [tool]})
    output = reply.json()["output"]
    assert [c["status"] for c in calls(output)] == ["completed"] * 3
    assert "About harmony zebras" in calls(output)[1]["harmony:hosted"]["output"]  # the hit's own snippet
    assert len(web.page_requests()) == before
    target = post(allowed, {"input": f"SCENARIO=browse_url URL={web.pages_url}/pages/notes.txt", "tools": [tool]})
    (call,) = calls(target.json()["output"])
    assert call["status"] == "failed" and "live web access is off" in call["harmony:hosted"]["output"]


def test_allowed_domains_filter_the_hits_and_the_pages(allowed: Server, web: Web) -> None:
    tool = {"type": "web_search", "filters": {"allowed_domains": ["example.org"]}}
    body = {"input": "SCENARIO=browse_forever", "tools": [tool], "max_tool_calls": 1, "include": SOURCES}
    searched = post(allowed, body)
    sources = calls(searched.json()["output"])[0]["action"]["sources"]
    assert sources == [{"type": "url", "url": "https://example.org/elsewhere"}]
    opened = post(allowed, {"input": f"SCENARIO=browse_url URL={web.pages_url}/pages/notes.txt", "tools": [tool]})
    (call,) = calls(opened.json()["output"])
    assert call["status"] == "failed" and "outside the domains" in call["harmony:hosted"]["output"]


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"type": "web_search", "user_location": {"type": "approximate", "city": "Paris"}}, "tools[0].user_location"),
        ({"type": "web_search", "search_context_size": "huge"}, "tools[0].search_context_size"),
        ({"type": "web_search", "filters": {"blocked_domains": ["x.org"]}}, "tools[0].filters"),
        ({"type": "web_search", "safe_search": True}, "tools[0].safe_search"),
    ],
)
def test_fields_not_honoured_are_refused_by_name(allowed: Server, tool: dict[str, Any], param: str) -> None:
    reply = post(allowed, {"input": "hi", "tools": [tool]})
    assert reply.status_code == 400, reply.text
    assert reply.json()["error"]["param"] == param


def test_a_server_without_web_search_keeps_the_hosted_tools_policy(vllm: FakeEngine) -> None:
    with serving("--engine", f"vllm:{vllm.url}", "--store", "memory") as server:
        reply = post(server, {"input": "hi", "tools": [WEB_SEARCH], "include": SOURCES})
        assert reply.status_code == 400 and reply.json()["error"]["param"] == "include[0]"
        listed = post(server, {"input": "hi", "tools": [WEB_SEARCH]}).json()
        assert listed["harmony:unavailable_tools"][0]["type"] == "web_search"


def test_background_and_websocket_responses_run_the_loop(allowed: Server) -> None:
    started = post(allowed, {"input": "SCENARIO=browse zebras?", "tools": [WEB_SEARCH], "background": True})
    assert started.status_code == 200, started.text
    rid = started.json()["id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        polled = httpx.get(f"{allowed.url}/v1/responses/{rid}", timeout=10).json()
        if polled["status"] not in ("queued", "in_progress"):
            break
        time.sleep(0.1)
    assert polled["status"] == "completed" and len(calls(polled["output"])) == 3
    with connect(allowed.url.replace("http://", "ws://") + "/v1/responses") as socket:
        body = {"type": "response.create", "model": "gpt-oss", "input": "SCENARIO=browse z", "tools": [WEB_SEARCH]}
        socket.send(json.dumps(body))
        events: list[dict[str, Any]] = []
        while not events or events[-1]["type"] not in ("response.completed", "response.failed", "error"):
            events.append(json.loads(socket.recv(timeout=60)))
    check_stream(events)
    assert len(calls(events[-1]["response"]["output"])) == 3


def test_an_engine_that_drops_the_stop_token_continues_too(web: Web) -> None:
    ollama = FakeEngine("ollama")
    try:
        args = ("--engine", f"ollama:{ollama.url}?model=gpt-oss", "--web-search", web.search_url)
        with serving(*args, "--hosted-allow", "127.0.0.1", "--store", "memory") as server:
            reply = post(server, {"input": "SCENARIO=browse zebras?", "tools": [WEB_SEARCH], "stream": True})
            events = sse_events(reply.text)
            check_stream(events)
            final = events[-1]["response"]
            assert final["status"] == "completed", final
            assert [c["status"] for c in calls(final["output"])] == ["completed"] * 3
            assert answer(final["output"])["annotations"][0]["url"] == web.pages_url + "/pages/harmony.html"
    finally:
        ollama.stop()


def test_the_demo_engine_searches_when_asked_and_metrics_count_the_calls(web: Web) -> None:
    args = ("--web-search", web.search_url, "--hosted-allow", "127.0.0.1", "--store", "memory")
    with serving(*args) as server:
        reply = post(server, {"input": "Please search the web for zebras", "tools": [WEB_SEARCH], "stream": True})
        events = sse_events(reply.text)
        check_stream(events)
        output = events[-1]["response"]["output"]
        assert [c["action"]["type"] for c in calls(output)] == ["search", "open_page", "find_in_page"]
        assert "zebras" in answer(output)["text"] and answer(output)["annotations"]
        plain = post(server, {"input": "Hello there", "tools": [WEB_SEARCH]}).json()
        assert not calls(plain["output"])  # not asked to search: it answers
        counted = httpx.get(server.url + "/metrics", timeout=10).text
        assert 'harmony_responses_hosted_calls_total{kind="web_search",outcome="completed"} 3.0' in counted
        assert 'harmony_responses_hosted_call_seconds_count{kind="web_search"} 3.0' in counted


def test_shutdown_during_a_tool_call_still_ends_the_stream(web: Web, vllm: FakeEngine) -> None:
    args = ("--engine", f"vllm:{vllm.url}", "--web-search", web.search_url, "--hosted-allow", "127.0.0.1")
    server = Server(*args, "--store", "memory", "--shutdown-timeout", "1")
    try:
        target = web.pages_url + "/pages/slow.html"
        body = {"model": "gpt-oss", "input": f"SCENARIO=browse_url URL={target}", "tools": [WEB_SEARCH], "stream": True}
        with httpx.stream("POST", server.url + "/v1/responses", json=body, timeout=60) as reply:
            lines = reply.iter_lines()
            for line in lines:
                if "response.web_search_call.searching" in line:
                    break
            server.popen.send_signal(signal.SIGTERM)
            rest = "\n".join(lines)
        assert '"type":"response.failed"' in rest.replace(" ", "") and "data: [DONE]" in rest
        assert server.popen.wait(30) == 0
    finally:
        server.stop()
