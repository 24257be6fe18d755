"""`harmony-responses prompt`: the Harmony prompt a request renders to, as text or token ids, and its errors."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from harmony_responses import HarmonyEncoding
from harmony_responses.cli import main

oracle = pytest.importorskip("openai_harmony", reason="openai-harmony is installed by the test extras")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "responses" / "request.json"
REQUEST = {
    "model": "gpt-oss",
    "instructions": "Be brief.",
    "input": [
        {"type": "message", "role": "user", "content": "Search for Paris."},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Search it."}]},
        {
            "type": "harmony:browser_call", "id": "hbc_1", "status": "completed", "recipient": "browser.search",
            "arguments": '{"query":"Paris"}', "channel": "analysis", "content_type": "code",
        },
        {"type": "harmony:tool_output", "call_id": "hbc_1", "output": "Paris is in France."},
    ],
    "temperature": 0.2,  # does not change the prompt: accepted
}  # fmt: skip


def _oracle_tokens() -> list[int]:
    """`REQUEST` as the oracle renders the Harmony messages it stands for."""
    o = oracle
    developer = o.DeveloperContent.new().with_instructions("Be brief.")
    messages = [
        o.Message.from_role_and_content(o.Role.SYSTEM, o.SystemContent.new()),
        o.Message.from_role_and_content(o.Role.DEVELOPER, developer),
        o.Message.from_role_and_content(o.Role.USER, "Search for Paris."),
        o.Message.from_role_and_content(o.Role.ASSISTANT, "Search it.").with_channel("analysis"),
        o.Message.from_role_and_content(o.Role.ASSISTANT, '{"query":"Paris"}')
        .with_recipient("browser.search")
        .with_channel("analysis")
        .with_content_type("code"),
        o.Message.from_author_and_content(o.Author.new(o.Role.TOOL, "browser.search"), "Paris is in France.")
        .with_recipient("assistant")
        .with_channel("analysis"),
    ]
    reference = o.load_harmony_encoding(o.HarmonyEncodingName.HARMONY_GPT_OSS)
    return list(reference.render_conversation_for_completion(o.Conversation.from_messages(messages), o.Role.ASSISTANT))


def _write(tmp_path: Path, data: Any, name: str = "request.json") -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def test_prints_the_prompt_as_text_and_as_tokens(
    encoding: HarmonyEncoding, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, REQUEST)
    expected = _oracle_tokens()
    assert main(["prompt", "--request", path, "--tokens"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out) == expected and out.err == ""
    assert out.out == json.dumps(expected) + "\n"
    assert main(["prompt", "--request", path]) == 0
    text = capsys.readouterr().out
    assert text == encoding.decode_utf8(expected) + "\n"
    assert text.endswith("<|start|>browser.search to=assistant<|channel|>analysis<|message|>Paris is in France.<|end|>"
                         "<|start|>assistant\n")  # fmt: skip


def test_agrees_with_render_of_the_same_messages(
    encoding: HarmonyEncoding, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`render --next-role assistant` of the conversation the request stands for prints the same prompt."""
    conversation: dict[str, Any] = {
        "messages": [
            {"role": "system", "content": [{"type": "system_content"}]},
            {"role": "developer", "content": [{"type": "developer_content", "instructions": "Be brief."}]},
            {"role": "user", "content": "Search for Paris."},
            {"role": "assistant", "channel": "analysis", "content": "Search it."},
            {"role": "assistant", "channel": "analysis", "recipient": "browser.search", "content_type": "code",
             "content": '{"query":"Paris"}'},
            {"role": "tool", "name": "browser.search", "recipient": "assistant", "channel": "analysis",
             "content": "Paris is in France."},
        ]
    }  # fmt: skip
    system = oracle.SystemContent.new().to_dict()
    conversation["messages"][0]["content"] = [{"type": "system_content", **system}]
    assert main(["render", _write(tmp_path, conversation, "conversation.json"), "--next-role", "assistant"]) == 0
    rendered = capsys.readouterr().out
    assert main(["prompt", "--request", _write(tmp_path, REQUEST)]) == 0
    assert capsys.readouterr().out == rendered


def test_the_example_request_agrees_with_respond_s_prompt(
    encoding: HarmonyEncoding, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["prompt", "--request", str(EXAMPLE), "--tokens"]) == 0
    tokens = json.loads(capsys.readouterr().out)
    completion = EXAMPLE.parent / "completion.txt"
    assert main(["respond", "--request", str(EXAMPLE), "--completion", str(completion), "--fixed-ids"]) == 0
    assert json.loads(capsys.readouterr().out)["usage"]["input_tokens"] == len(tokens)


def test_reads_standard_input(
    encoding: HarmonyEncoding, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(json.dumps(REQUEST).encode("utf-8")), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main(["prompt", "--request", "-", "--tokens"]) == 0
    assert json.loads(capsys.readouterr().out) == _oracle_tokens()


@pytest.mark.parametrize(
    ("payload", "param", "code"),
    [
        ({"input": 5}, "input", "invalid_request"),
        ({"input": [{"type": "harmony:tool_output", "call_id": "x", "output": "y"}]}, "input[0].call_id",
         "unknown_call_id"),
        ({"input": [{"type": "harmony:python_call", "arguments": "1"}]}, "input[0].recipient",
         "missing_required_parameter"),
        ({"input": "hi", "truncation": "auto"}, "truncation", "unsupported_parameter"),
        ({"input": "hi", "users": "u"}, "users", "unknown_parameter"),
        ({"input": "hi", "previous_response_id": "resp_1"}, "previous_response_id", "previous_response_not_found"),
        ([], None, "invalid_request"),
    ],
)  # fmt: skip
def test_a_bad_request_prints_its_error_body_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], payload: Any, param: str | None, code: str
) -> None:
    assert main(["prompt", "--request", _write(tmp_path, payload)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    body = json.loads(out.err)
    assert body["error"]["param"] == param and body["error"]["code"] == code
    assert out.err.count("\n") == 1


@pytest.mark.parametrize(
    ("payload", "words"),
    [
        ("{not json", "--request {path}: $: not valid JSON"),
        ('{"input": "a\\ud800"}', "--request {path}: $.input: "),
        (None, "--request {path}: $: cannot read file"),
    ],
)
def test_unreadable_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], payload: str | None, words: str
) -> None:
    path = _write(tmp_path, payload) if payload is not None else str(tmp_path / "missing.json")
    assert main(["prompt", "--request", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith("harmony-responses: " + words.format(path=path)), err
    assert err.count("\n") == 1


def test_needs_its_request_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["prompt"])
    assert exited.value.code == 2
    assert "--request" in capsys.readouterr().err
