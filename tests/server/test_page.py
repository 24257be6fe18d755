"""The page at `/` in a real headless Chromium against a real `serve`: it loads with no console error, the
playground streams an answer (a tool call, its output, the answer as it arrives), and the inspector shows
the repairs of a glitchy completion where they happened, with their rules.

`HARMONY_SCREENSHOTS=DIR` also keeps the two screenshots there (docs/images/ holds the ones in the docs).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from services.chromium import Browser, Page

from harmony_responses.server.page import ASSETS

from serverkit import Server


@pytest.fixture(scope="module")
def served() -> Iterator[Server]:
    server = Server("--engine", "demo:?tps=150", "--store", "memory")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def page(served: Server) -> Iterator[Page]:
    browser = Browser.start()
    try:
        browser.page.navigate(served.url + "/")
        yield browser.page
    finally:
        browser.stop()


def _shots(tmp_path: Path) -> Path:
    return Path(os.environ.get("HARMONY_SCREENSHOTS") or tmp_path)


def test_the_page_and_its_files_are_served_without_a_key_and_the_inspector_with_one() -> None:
    server = Server("--engine", "demo", "--store", "memory", "--api-key", "sk-page")
    try:
        for name in ASSETS:
            path = "/" if name == "index.html" else f"/page/{name}"
            reply = httpx.get(server.url + path, timeout=10)
            assert reply.status_code == 200 and reply.content, path
            assert reply.headers["content-type"].startswith(ASSETS[name])
        assert httpx.get(server.url + "/page/nope.js", timeout=10).status_code == 404
        body = {"request": {"input": "hi"}, "completion": "<|channel|>final<|message|>Hi<|return|>"}
        assert httpx.post(server.url + "/v1/harmony/inspect", json=body, timeout=10).status_code == 401
        keyed = httpx.post(
            server.url + "/v1/harmony/inspect", json=body, headers={"Authorization": "Bearer sk-page"}, timeout=10
        )
        assert keyed.status_code == 200 and keyed.json()["repairs"] == []
        bad = httpx.post(
            server.url + "/v1/harmony/inspect",
            json={"request": {"input": [{"role": "robot", "content": "x"}]}, "completion": [1, "a"]},
            headers={"Authorization": "Bearer sk-page"},
            timeout=10,
        )
        assert bad.status_code == 400 and bad.json()["error"]["param"].startswith("request.input[0]")
    finally:
        server.stop()


def test_the_playground_streams_a_tool_call_and_an_answer(page: Page, tmp_path: Path) -> None:
    assert page.evaluate("document.title") == "harmony-responses"
    page.evaluate("document.getElementById('message').value = \"What's the weather in Paris?\"")
    page.evaluate("document.getElementById('send').click()")
    page.wait_for("document.querySelector('.call') && document.querySelector('.status').textContent.includes('ed ·')")
    assert page.evaluate("document.querySelector('.status').textContent").startswith("completed")
    assert page.evaluate("document.querySelector('.call .name').textContent") == "get_weather"
    assert page.evaluate("document.querySelector('.call .args').textContent") == '{"city": "demo"}'
    page.evaluate("document.querySelector('.turn.assistant form button').click()")
    # The answer grows as its deltas arrive: several lengths are seen before the response completes.
    lengths = page.watch(
        "(() => { const t = document.querySelectorAll('.turn.assistant'); const last = t[t.length - 1];"
        " const a = last && last.querySelector('.answer'); const s = last && last.querySelector('.status');"
        " return [a ? a.textContent.length : 0, s ? s.textContent : ''] })()",
        until=lambda v: "completed" in v[1],
    )
    growing = sorted({n for n, status in lengths if n > 0 and "completed" not in status})
    assert len(growing) >= 2, lengths
    answer = page.evaluate("[...document.querySelectorAll('.turn.assistant .answer')].pop().textContent")
    assert "received from get_weather" in answer and '"temp_c": 18' in answer
    summary = page.evaluate("[...document.querySelectorAll('details.reasoning')].pop()")
    assert summary is not None
    assert page.evaluate("[...document.querySelectorAll('details.reasoning')].every(d => !d.open)")  # folded
    page.screenshot(_shots(tmp_path) / "playground.png")
    assert page.problems == []


def test_the_inspector_shows_the_repairs_of_a_glitchy_completion(page: Page, tmp_path: Path) -> None:
    page.evaluate("document.getElementById('tab-inspector').click()")
    page.evaluate("document.getElementById('load-example').click()")
    page.evaluate("document.getElementById('inspect').click()")
    page.wait_for("!document.getElementById('inspect-result').hidden")
    marks = page.evaluate("[...document.querySelectorAll('#raw-text mark')].map(m => [m.dataset.rule, m.textContent])")
    rules = [rule for rule, _ in marks]
    assert "junk_between_messages" in rules and "missing_start" in rules
    junk = next(text for rule, text in marks if rule == "junk_between_messages")
    assert junk.startswith("assistant")  # the set-aside word itself is highlighted, with its number
    listed = page.evaluate("[...document.querySelectorAll('#repair-list .rule')].map(e => e.textContent)")
    assert listed == rules or sorted(listed) == sorted(rules)
    heads = page.evaluate("[...document.querySelectorAll('#messages .head')].map(e => e.textContent)")
    assert len(heads) == 2 and "to functions.get_weather" in heads[1]
    served = page.evaluate("JSON.parse(document.getElementById('served-response').textContent)")
    assert served["output"][-1]["type"] == "function_call" and served["output"][-1]["name"] == "get_weather"
    chat = page.evaluate("JSON.parse(document.getElementById('served-chat').textContent)")
    assert chat["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    page.screenshot(_shots(tmp_path) / "inspector.png", height=1250)
    assert page.problems == []
