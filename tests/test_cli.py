"""`harmony-responses render` and `tools`: output, flags, and one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harmony_responses import Conversation, HarmonyEncoding, RenderConversationConfig, Role, render_tool_namespace
from harmony_responses.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "conversation.json"
TOOLS = ROOT / "examples" / "tools.json"


def _example(encoding: HarmonyEncoding) -> Conversation:
    return Conversation.from_json(EXAMPLE.read_text())


def test_render_for_completion(encoding: HarmonyEncoding, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(EXAMPLE), "--next-role", "assistant"]) == 0
    expected = encoding.render_conversation_for_completion(_example(encoding), Role.ASSISTANT)
    out = capsys.readouterr().out
    assert out == encoding.decode_utf8(expected) + "\n"
    assert "Calls to these tools must go to the commentary channel: 'functions'." in out
    assert out.endswith("<|start|>assistant\n")


def test_render_tokens_and_flags(encoding: HarmonyEncoding, capsys: pytest.CaptureFixture[str]) -> None:
    convo = _example(encoding)
    assert main(["render", str(EXAMPLE), "--tokens"]) == 0
    assert json.loads(capsys.readouterr().out) == encoding.render_conversation(convo)
    assert main(["render", str(EXAMPLE), "--tokens", "--training", "--no-drop-analysis"]) == 0
    keep = RenderConversationConfig(auto_drop_analysis=False)
    assert json.loads(capsys.readouterr().out) == encoding.render_conversation_for_training(convo, keep)


def test_tools(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools", str(TOOLS)]) == 0
    out = capsys.readouterr().out
    assert out == render_tool_namespace("functions", json.loads(TOOLS.read_text())) + "\n"
    assert "days?: number | null," in out and "type get_time = () => any;" in out
    assert main(["tools", str(TOOLS), "--namespace", "weather", "--description", "Weather\nservice"]) == 0
    assert capsys.readouterr().out.startswith("## weather\n\n// Weather\n// service\nnamespace weather {")


@pytest.mark.parametrize(
    ("command", "payload", "message"),
    [
        ("render", "{not json", "$: not valid JSON"),
        ("render", '{"messages": {}}', "$.messages: expected a list of messages"),
        ("render", '{"messages": [{"role": "robot", "content": "x"}]}', "$.messages[0].role: expected one of"),
        (
            "render",
            '{"messages": [{"role": "user", "content": [{"type": "image"}]}]}',
            "$.messages[0].content[0].type:",
        ),
        (
            "render",
            '{"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
            "$.messages[0].content[0].text: Input should be a valid string",
        ),
        ("render", '{"messages": [{"role": "user", "content": "x", "channel": 3}]}', "$.messages[0].channel: expected"),
        ("render", '{"messages": [{"role": "tool", "content": "x"}]}', "Tools should have a name!"),
        ("tools", '{"tools": 3}', "$.tools: expected a list of tools"),
        ("tools", '[{"type": "function", "description": "no name"}]', "$[0].name: expected a string"),
        ("tools", '[{"name": "f", "parameters": []}]', "$[0].parameters: expected a JSON Schema object"),
    ],
)
def test_bad_input_is_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, payload: str, message: str
) -> None:
    path = tmp_path / "input.json"
    path.write_text(payload)
    assert main([command, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"harmony-responses: {path}: ")
    assert message in err


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", str(tmp_path / "absent.json")]) == 2
    assert "cannot read file" in capsys.readouterr().err
