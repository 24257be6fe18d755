"""`harmony-responses respond`: the response JSON, the SSE stream and the Chat Completions form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from responses_checker import assert_valid_response, check_stream

from harmony_responses import HarmonyEncoding
from harmony_responses.bridge import parse_sse
from harmony_responses.cli import main

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "responses"
ARGS = ["respond", "--request", str(EXAMPLE / "request.json"), "--completion", str(EXAMPLE / "completion.txt")]


def test_prints_a_valid_response(capsys: pytest.CaptureFixture[str], encoding: object) -> None:
    assert main([*ARGS, "--fixed-ids"]) == 0
    response = json.loads(capsys.readouterr().out)
    assert_valid_response(response)
    assert [o["type"] for o in response["output"]] == ["reasoning", "message", "function_call"]
    assert response["usage"]["input_tokens"] > 100  # the rendered prompt's length


@pytest.mark.parametrize("names", ["spec", "openai"])
def test_prints_the_sse_stream(capsys: pytest.CaptureFixture[str], encoding: object, names: str) -> None:
    assert main([*ARGS, "--stream", "--fixed-ids", "--reasoning-events", names]) == 0
    wire = capsys.readouterr().out
    assert wire.endswith("data: [DONE]\n\n")
    assert ("response.reasoning_text.delta" in wire) == (names == "openai")
    check_stream([e.model_dump(mode="json") for e in parse_sse(wire)])


def test_token_input_gives_the_same_response(
    capsys: pytest.CaptureFixture[str], encoding: object, tmp_path: Path
) -> None:
    assert main([*ARGS, "--fixed-ids"]) == 0
    by_text = json.loads(capsys.readouterr().out)

    assert isinstance(encoding, HarmonyEncoding)
    ids = encoding.encode((EXAMPLE / "completion.txt").read_text(encoding="utf-8"), allowed_special="all")
    (tmp_path / "ids.json").write_text(json.dumps(ids), encoding="utf-8")
    args = [*ARGS[:-1], str(tmp_path / "ids.json"), "--tokens", "--fixed-ids"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out) == by_text


def test_chat_forms(capsys: pytest.CaptureFixture[str], encoding: object) -> None:
    assert main([*ARGS, "--chat"]) == 0
    chat = json.loads(capsys.readouterr().out)
    assert chat["choices"][0]["finish_reason"] == "tool_calls"
    assert main([*ARGS, "--chat", "--stream"]) == 0
    frames = capsys.readouterr().out.split("\n\n")
    assert frames[-2] == "data: [DONE]"
    chunks = [json.loads(f.removeprefix("data: ")) for f in frames[:-2]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_a_request_the_model_cannot_take_exits_2_with_the_error_body(
    capsys: pytest.CaptureFixture[str], encoding: object, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"input": [{"type": "item_reference", "id": "msg_1"}]}), encoding="utf-8")
    assert main(["respond", "--request", str(bad), "--completion", str(EXAMPLE / "completion.txt")]) == 2
    error = json.loads(capsys.readouterr().err)["error"]
    assert (error["code"], error["param"]) == ("item_reference_not_found", "input[0].id")


def test_a_completion_whose_stop_token_the_engine_left_out(
    capsys: pytest.CaptureFixture[str], encoding: object, tmp_path: Path
) -> None:
    """Engines leave a stop token's text out (llama.cpp and Ollama print nothing for it, vLLM excludes it by
    default): text ending inside a call is a finished call unless `--finish length` says the budget ran out."""
    text = "<|channel|>analysis<|message|>Weather.<|end|><|start|>assistant"
    text += '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Berlin"}'
    path = tmp_path / "completion.txt"
    path.write_text(text, encoding="utf-8")
    args = ["respond", "--request", str(EXAMPLE / "request.json"), "--completion", str(path), "--chat"]
    assert main(args) == 0
    choice = json.loads(capsys.readouterr().out)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Berlin"}
    assert main([*args, "--finish", "length"]) == 0
    assert json.loads(capsys.readouterr().out)["choices"][0]["finish_reason"] == "length"
    assert main([*args[:-1], "--finish", "stop"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "completed"
