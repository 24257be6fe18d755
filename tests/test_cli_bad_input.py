"""The command line on bad input, tried as a new user would (issue 9, items 5-12 and 18).

Every mistake is one line on standard error naming the file (and the flag), the JSON path and what
was expected, with exit code 2; nothing is a traceback, nothing is silently lost. Most commands run
in-process through `main` (standard input given as bytes); a closed pipe, raw standard input and a
missing vocabulary run in a subprocess, as a user runs them.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harmony_responses import Conversation, HarmonyEncoding
from harmony_responses.cli import main

ROOT = Path(__file__).resolve().parents[1]
REQUEST = ROOT / "examples" / "responses" / "request.json"
COMPLETION = ROOT / "examples" / "responses" / "completion.txt"
CONVERSATION = ROOT / "examples" / "conversation.json"


Run = Callable[..., subprocess.CompletedProcess[str]]


def subprocess_cli(
    *args: str | Path, stdin: bytes = b"", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "harmony_responses.cli", *map(str, args)],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, encoding: HarmonyEncoding) -> Run:
    """`main(args)` in this process, standard input from bytes: exit status, standard output and error."""

    def run(*args: str | Path, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        status = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), status, out, err)

    return run


def one_line_error(run: subprocess.CompletedProcess[str], *says: str, status: int = 2) -> str:
    assert run.returncode == status, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("harmony-responses: "), run.stderr
    for words in says:
        assert words in run.stderr, run.stderr
    return run.stderr


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


# -- 6. a token file that is not a list of integers ----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "path", "found"),
    [
        ("5", "$", "found an integer"),
        ('"hello"', "$", "found a string"),
        ('{"a": 1}', "$", "found an object"),
        ("[[1, 2]]", "$[0]", "found an array"),
        ("[1.5]", "$[0]", "found 1.5"),
        ("[true]", "$[0]", "found a boolean"),
        ("[200005, null]", "$[1]", "found null"),
    ],
)
def test_respond_checks_token_files_as_parse_does(
    cli: Run, tmp_path: Path, content: str, path: str, found: str
) -> None:
    ids = write(tmp_path, "ids.json", content)
    for args in (("respond", "--request", REQUEST, "--completion", ids, "--tokens"), ("parse", ids, "--tokens")):
        run = cli(*args)
        one_line_error(run, f"{ids}: {path}: expected a JSON list of token ids", found)
        assert run.stdout == ""
    assert "--completion" in cli("respond", "--request", REQUEST, "--completion", ids, "--tokens").stderr


# -- 7. a token id outside the vocabulary --------------------------------------------------------------------


def test_respond_names_a_token_id_outside_the_vocabulary(cli: Run, tmp_path: Path, encoding: HarmonyEncoding) -> None:
    ids = encoding.encode("<|channel|>final<|message|>Hello world<|return|>", allowed_special="all")
    bad = write(tmp_path, "ids.json", json.dumps([*ids[:4], 1_000_000_000, *ids[4:]]))
    run = cli("respond", "--request", REQUEST, "--completion", bad, "--tokens")
    one_line_error(run, f"--completion {bad}: $[4]: token id 1000000000 is not in the vocabulary")
    assert run.stdout == ""


# -- 8. invalid UTF-8 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [("render",), ("tools",), ("parse",), ("parse", "--tokens"), ("parse", "--mode", "lenient")],
)
def test_invalid_utf8_is_one_line_in_every_command(cli: Run, tmp_path: Path, command: tuple[str, ...]) -> None:
    bad = write(tmp_path, "bad.json", b"\xff{}")
    one_line_error(cli(command[0], bad, *command[1:]), f"{bad}: $: not UTF-8: invalid byte at offset 0")
    run = cli(command[0], "-", *command[1:], stdin=b"<|channel|>final<|message|>hi \xff<|end|>")
    one_line_error(run, "<stdin>: $: not UTF-8: invalid byte at offset 30")
    assert run.stdout == ""  # never passed through into the JSON Lines


def test_invalid_utf8_on_real_standard_input_is_not_passed_through() -> None:
    run = subprocess_cli("parse", "-", "--mode", "lenient", stdin=b"<|channel|>final<|message|>hi \xff<|end|>")
    one_line_error(run, "<stdin>: $: not UTF-8: invalid byte at offset 30")
    assert run.stdout == ""


def test_respond_reports_invalid_utf8_under_its_flag(cli: Run, tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.txt", b"\xfe")
    one_line_error(cli("respond", "--request", bad, "--completion", COMPLETION), f"--request {bad}: $: not UTF-8")
    one_line_error(cli("respond", "--request", REQUEST, "--completion", bad), f"--completion {bad}: $: not UTF-8")


# -- 9. deep JSON and wrongly typed tool fields --------------------------------------------------------------

DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    "args",
    [
        ("render", "{file}"),
        ("tools", "{file}"),
        ("parse", "{file}", "--tokens"),
        ("respond", "--request", "{file}", "--completion", str(COMPLETION)),
        ("respond", "--request", str(REQUEST), "--completion", "{file}", "--tokens"),
    ],
)
def test_json_nested_5000_deep_is_one_line_with_its_path(cli: Run, tmp_path: Path, args: tuple[str, ...]) -> None:
    deep = write(tmp_path, "deep.json", DEEP)
    run = cli(*(a.format(file=deep) for a in args))
    one_line_error(run, f"{deep}: $" + "[0]" * 64 + ": nested deeper than 64 levels")


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"name": 5, "tools": []}, "$.name"),
        ({"description": ["x"], "tools": []}, "$.description"),
        ([{"name": 5}], "$[0].name"),
        ([{"name": "f", "description": {"a": 1}}], "$[0].description"),
        ([{"type": "function", "function": {"name": None}}], "$[0].function.name"),
    ],
)
def test_tools_with_a_non_string_name_or_description(cli: Run, tmp_path: Path, payload: Any, path: str) -> None:
    file = write(tmp_path, "tools.json", json.dumps(payload))
    one_line_error(cli("tools", file), f"{file}: {path}: expected a string")


# -- 10. a closed pipe ---------------------------------------------------------------------------------------


def _read_a_little_then_close(args: list[str]) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "harmony_responses.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(100)
    proc.stdout.close()  # as `| head -c 100` does
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


def test_output_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    long = "<|channel|>final<|message|>" + "All work and no play. " * 1500 + "<|return|>"
    completion = write(tmp_path, "long.txt", long)  # its events run far beyond a pipe's 64 kB buffer
    convo = Conversation.from_json(CONVERSATION.read_text(encoding="utf-8"))
    convo.messages = convo.messages * 100
    big = write(tmp_path, "big.json", convo.to_json())
    for args in (
        ["respond", "--request", str(REQUEST), "--completion", str(completion), "--stream"],
        ["parse", str(completion), "--events"],
        ["render", str(big), "--tokens"],
    ):
        status, err = _read_a_little_then_close(args)
        assert (status, err) == (141, ""), (args, status, err)


# -- 11. standard input twice, files named with their flag, a missing vocabulary -----------------------------


def test_respond_refuses_standard_input_for_both_inputs(cli: Run) -> None:
    run = cli("respond", "--request", "-", "--completion", "-", stdin=REQUEST.read_bytes())
    one_line_error(run, "--request and --completion both read standard input")
    assert run.stdout == ""


def test_respond_file_errors_name_the_file_and_the_flag(cli: Run, tmp_path: Path) -> None:
    absent = tmp_path / "absent.json"
    one_line_error(
        cli("respond", "--request", absent, "--completion", COMPLETION), f"--request {absent}: $: cannot read"
    )
    one_line_error(
        cli("respond", "--request", REQUEST, "--completion", absent), f"--completion {absent}: $: cannot read"
    )
    bad = write(tmp_path, "bad.json", "{nope")
    one_line_error(cli("respond", "--request", bad, "--completion", COMPLETION), f"--request {bad}: $: not valid JSON")


def test_a_missing_vocabulary_is_not_blamed_on_the_input(tmp_path: Path) -> None:
    env = {"TIKTOKEN_ENCODINGS_BASE": str(tmp_path / "no-vocab")}
    for args in (("render", CONVERSATION), ("respond", "--request", REQUEST, "--completion", COMPLETION)):
        err = one_line_error(
            subprocess_cli(*args, env=env), "cannot load the vocabulary", "TIKTOKEN_ENCODINGS_BASE", status=1
        )
        assert str(args[-1]) not in err


# -- 12. lenient parse says what it set aside ----------------------------------------------------------------


def test_lenient_parse_reports_set_aside_text_on_stderr(cli: Run) -> None:
    run = cli("parse", "-", "--role", "none", "--mode", "lenient", stdin=b"junk<|start|>assistant<|message|>x<|end|>zz")
    assert run.returncode == 0
    # Text after `<|end|>` with no `<|start|>` is read as the next message (a repair); "junk" is set aside.
    assert [json.loads(line)["content"][0]["text"] for line in run.stdout.splitlines()] == ["x", "zz"]
    assert "text_before_start x1" in run.stderr and "text_after_end x1" in run.stderr
    assert "4 characters set aside" in run.stderr
    assert "--events" in run.stderr and run.stderr.count("\n") == 1
    clean = cli("parse", "-", stdin=b"<|channel|>final<|message|>x<|return|>")
    assert clean.returncode == 0 and clean.stderr == ""


# -- 18. a lone surrogate in a conversation JSON -------------------------------------------------------------


def test_a_lone_surrogate_in_a_conversation_is_refused(cli: Run, tmp_path: Path) -> None:
    payload = '{"messages": [{"role": "user", "content": "a\\ud800b"}]}'
    file = write(tmp_path, "convo.json", payload)
    one_line_error(cli("render", file), f"{file}: $.messages[0].content: lone surrogate")
    with pytest.raises(ValueError, match=r"\$\.messages\[0\]\.content: lone surrogate"):
        Conversation.from_json(payload)


# -- 5, in `respond`: the token budget is kept, `stream: true` streams ---------------------------------------


def _request(tmp_path: Path, **fields: Any) -> Path:
    return write(tmp_path, "request.json", json.dumps({**json.loads(REQUEST.read_text(encoding="utf-8")), **fields}))


@pytest.mark.parametrize("budget", [20, 26, 60])
def test_respond_cuts_the_completion_at_max_output_tokens(cli: Run, tmp_path: Path, budget: int) -> None:
    run = cli("respond", "--request", _request(tmp_path, max_output_tokens=budget), "--completion", COMPLETION)
    assert run.returncode == 0, run.stderr
    response = json.loads(run.stdout)
    assert response["usage"]["output_tokens"] == budget
    assert (response["status"], response["incomplete_details"]) == ("incomplete", {"reason": "max_output_tokens"})
    assert response["max_output_tokens"] == budget


def test_respond_within_the_budget_completes(cli: Run, tmp_path: Path) -> None:
    run = cli("respond", "--request", _request(tmp_path, max_output_tokens=1000), "--completion", COMPLETION)
    response = json.loads(run.stdout)
    assert response["status"] == "completed" and response["usage"]["output_tokens"] < 1000


def test_respond_refuses_what_it_cannot_honour(cli: Run, tmp_path: Path) -> None:
    for field, value in (("seed", 1), ("store", True), ("temperature", 0.3), ("users", "u")):
        run = cli("respond", "--request", _request(tmp_path, **{field: value}), "--completion", COMPLETION)
        assert run.returncode == 2 and run.stdout == ""
        assert json.loads(run.stderr)["error"]["param"] == field


def test_stream_true_in_the_request_streams(cli: Run, tmp_path: Path) -> None:
    run = cli("respond", "--request", _request(tmp_path, stream=True), "--completion", COMPLETION)
    assert run.returncode == 0 and run.stdout.startswith("event: response.created\n")
    assert run.stdout.endswith("data: [DONE]\n\n")
