"""The TypeScript package against the Python one: same tokens, messages, parser states, texts and CLI output.

One long-lived node process (runtime/typescript/test/server.ts, compiled by `make ts-build`) answers JSON
lines; hypothesis draws conversations and completions and both languages must agree exactly. Under CI the
draws are derandomized (conftest); run longer locally with TS_EXAMPLES=N.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harmony_responses import (
    Conversation,
    HarmonyEncoding,
    HarmonyError,
    RenderConversationConfig,
    Role,
    StreamableParser,
    detect_leak,
    escape_control_tokens,
    escape_control_tokens_json,
    render_tool_namespace,
    unescape_control_tokens,
)
from harmony_responses import cli as py_cli
from harmony_responses.stream import Event, HarmonyStreamParser, ParsedMessage

from conftest import ROOT
from strategies import conversation, text, tool

SERVER = ROOT / "generated" / "typescript" / "dist" / "runtime" / "typescript" / "test" / "server.js"
EXAMPLES = int(os.environ.get("TS_EXAMPLES", "60"))
FUNCTIONS = ["render_conversation", "render_conversation_for_completion", "render_conversation_for_training"]


class Node:
    def __init__(self) -> None:
        if not SERVER.is_file():
            raise RuntimeError(f"{SERVER} is missing: run `make ts-build` (make test does)")
        env = {**os.environ, "COLUMNS": "80"}
        self.proc = subprocess.Popen(
            ["node", str(SERVER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=env,
        )

    def ask(self, **request: Any) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the node process ended"
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    server = Node()
    yield server
    server.close()


SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _py_render(encoding: HarmonyEncoding, convo: Conversation, function: str, role: Role, drop: bool | None) -> Any:
    config = None if drop is None else RenderConversationConfig(auto_drop_analysis=drop)
    try:
        if function == "render_conversation_for_completion":
            return {"tokens": encoding.render_conversation_for_completion(convo, role, config)}
        if function == "render_conversation_for_training":
            return {"tokens": encoding.render_conversation_for_training(convo, config)}
        return {"tokens": encoding.render_conversation(convo, config)}
    except HarmonyError as exc:
        return {"error": str(exc)}


@SETTINGS
@given(
    convo=conversation,
    function=st.sampled_from(FUNCTIONS),
    role=st.sampled_from(list(Role)),
    drop=st.one_of(st.none(), st.booleans()),
)
def test_render_agrees(
    node: Node, encoding: HarmonyEncoding, convo: Conversation, function: str, role: Role, drop: bool | None
) -> None:
    payload = convo.to_json()  # the reference's JSON form drops unset (None) fields: both sides read it back
    ours = _py_render(encoding, Conversation.from_json(payload), function, role, drop)
    theirs = node.ask(
        op="render", conversation=payload, function=function, next_turn_role=role.value, auto_drop_analysis=drop
    )
    theirs.pop("error_type", None)
    assert theirs == ours


@st.composite
def completion(draw: st.DrawFn, encoding: HarmonyEncoding) -> tuple[list[int], Role | None]:
    """A rendered conversation's tokens, as a completion: whole, or cut, or with tokens dropped or added."""
    convo = draw(conversation)
    try:
        tokens = encoding.render_conversation(convo, RenderConversationConfig(auto_drop_analysis=False))
    except HarmonyError:
        tokens = []
    role = None
    if draw(st.booleans()) and len(tokens) > 2:
        tokens, role = tokens[2:], Role.ASSISTANT  # as if the prompt ended with <|start|>assistant
    for _ in range(draw(st.integers(0, 3))):
        where = draw(st.integers(0, len(tokens)))
        kind = draw(st.sampled_from(["cut", "drop", "insert"]))
        if kind == "cut":
            tokens = tokens[:where]
        elif kind == "drop" and where < len(tokens):
            del tokens[where]
        else:
            special = draw(st.sampled_from([200002, 200003, 200005, 200006, 200007, 200008, 200012, 200018, 201089]))
            tokens.insert(where, draw(st.one_of(st.just(special), st.integers(0, 199_997))))
    return tokens, role


def _observe(parser: StreamableParser) -> dict[str, Any]:
    role = parser.current_role
    return {
        "state": parser.state.value,
        "current_role": role.value if role is not None else None,
        "current_channel": parser.current_channel,
        "current_recipient": parser.current_recipient,
        "current_content_type": parser.current_content_type,
        "last_content_delta": parser.last_content_delta,
        "current_content": parser.current_content,
        "messages": [m.to_dict() for m in parser.messages],
        "state_data": parser.state_data,
    }


def _py_stream(encoding: HarmonyEncoding, tokens: list[int], role: Role | None, strict: bool) -> dict[str, Any]:
    parser = StreamableParser(encoding, role, strict=strict)
    steps = []
    for token in tokens:
        try:
            parser.process(token)
        except HarmonyError as exc:
            return {"steps": steps, "error": str(exc)}
        steps.append(_observe(parser))
    try:
        parser.process_eos()
    except HarmonyError as exc:
        return {"steps": steps, "eos_error": str(exc)}
    return {"steps": steps, "messages": [m.to_dict() for m in parser.messages]}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


@SETTINGS
@given(data=st.data(), strict=st.booleans())
def test_parse_and_stream_agree(node: Node, encoding: HarmonyEncoding, data: st.DataObject, strict: bool) -> None:
    tokens, role = data.draw(completion(encoding))
    try:
        ours: dict[str, Any] = {
            "messages": [
                m.to_dict() for m in encoding.parse_messages_from_completion_tokens(tokens, role, strict=strict)
            ]
        }
    except HarmonyError as exc:
        ours = {"error": str(exc)}
    theirs = node.ask(op="parse", tokens=tokens, role=role.value if role else None, strict=strict)
    theirs.pop("error_type", None)
    assert theirs == _jsonable(ours)
    assert node.ask(op="stream", tokens=tokens, role=role.value if role else None, strict=strict) == _jsonable(
        _py_stream(encoding, tokens, role, strict)
    )


# -- the event parser ---------------------------------------------------------------------------------------


def _event_dict(event: Event) -> dict[str, Any]:
    """An event as `parse --events` prints it (the TypeScript side answers in this form)."""
    out: dict[str, Any] = {"type": event.type}
    for key in event.__dataclass_fields__:
        value = getattr(event, key)
        out[key] = value.to_dict() if isinstance(value, ParsedMessage) else value
    return _jsonable(out)


def _py_events(encoding: HarmonyEncoding, chunks: list[Any], options: dict[str, Any]) -> dict[str, Any]:
    parser = HarmonyStreamParser(
        encoding,
        options["role"],
        options["mode"],
        options["tools"],
        stop_after_tool_call=options["stop_after_tool_call"],
        stop_at_turn_end=options["stop_at_turn_end"],
    )
    events: list[Event] = []
    try:
        for chunk in chunks:
            events += parser.feed_text(chunk) if isinstance(chunk, str) else parser.feed_tokens(chunk)
        events += parser.close()
    except HarmonyError as exc:
        return {"events": [_event_dict(e) for e in events], "error": str(exc)}
    return {"events": [_event_dict(e) for e in events]}


def _split(draw: st.DrawFn, sequence: Any) -> list[Any]:
    """`sequence` in pieces at random places (none, every place, or a few)."""
    size = len(sequence)
    how = draw(st.sampled_from(["whole", "each", "some"]))
    if how == "whole" or size < 2:
        return [sequence]
    if how == "each":
        return [sequence[i : i + 1] for i in range(size)]
    cuts = sorted(set(draw(st.lists(st.integers(1, size - 1), max_size=6))))
    return [sequence[a:b] for a, b in zip([0, *cuts], [*cuts, size], strict=True)]


SPELLINGS = ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>", "<|constrain|>"]
HEADER_WORDS = (
    "assistant user tool analysis commentary final to=functions.f to=shell functions.f json shelljson x é 🙂 <|"
)
PIECES = [*SPELLINGS, *HEADER_WORDS.split(), " ", "  ", "\n", "\u3000", "<|constrain|>json"]
HARMONY_TEXT = st.lists(st.one_of(st.sampled_from(PIECES), text), max_size=25).map("".join)


@st.composite
def event_input(draw: st.DrawFn, encoding: HarmonyEncoding) -> tuple[list[Any], dict[str, Any]]:
    """A completion as token ids or as text, in random chunks, with random parser options."""
    kind = draw(st.sampled_from(["tokens", "text", "harmony_text"]))
    if kind == "harmony_text":
        pieces: list[Any] = _split(draw, draw(HARMONY_TEXT))
        role = draw(st.sampled_from([None, Role.ASSISTANT]))
    else:
        tokens, role = draw(completion(encoding))
        if kind == "tokens":
            pieces = _split(draw, tokens)
        else:
            try:
                pieces = _split(draw, encoding.decode(tokens))
            except HarmonyError:  # an id outside the vocabulary
                pieces = _split(draw, tokens)
    options = {
        "role": role,
        "mode": draw(st.sampled_from(["strict", "lenient"])),
        "tools": draw(st.sampled_from([None, ["f"], ["shell", "f"], ["get_weather"]])),
        "stop_after_tool_call": draw(st.booleans()),
        "stop_at_turn_end": draw(st.booleans()),
    }
    return pieces, options


@SETTINGS
@given(data=st.data())
def test_event_parser_agrees(node: Node, encoding: HarmonyEncoding, data: st.DataObject) -> None:
    chunks, options = data.draw(event_input(encoding))
    ours = _py_events(encoding, chunks, options)
    role = options["role"]
    theirs = node.ask(op="events", chunks=chunks, **{**options, "role": role.value if role else None})
    assert theirs == ours


@SETTINGS
@given(
    name=st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True),
    tools=st.lists(tool, max_size=3),
    desc=st.one_of(st.none(), text),
)
def test_tool_namespace_agrees(node: Node, name: str, tools: list[Any], desc: str | None) -> None:
    payload = json.dumps([t.model_dump() for t in tools])
    assert node.ask(op="tools", name=name, tools=payload, description=desc) == {
        "text": render_tool_namespace(name, tools, description=desc)
    }


def _utf16(text: str, index: int) -> int:
    return len(text[:index].encode("utf-16-le")) // 2


LEAKY = st.lists(
    st.one_of(
        text,
        st.sampled_from(
            [
                "<|",
                "|>",
                "<|start|>",
                "<|reserved_200018|>",
                "assistantfinal",
                " to=functions.get_x",
                "`",
                "```",
                "\n",
                " json",
                " analysis",
                "assistant",
                "commentary",
                "\u2060",
                "<\u2060|",
                " ",
                "{",
            ]
        ),
    ),
    max_size=12,
).map("".join)


@SETTINGS
@given(value=LEAKY)
def test_safety_agrees(node: Node, value: str) -> None:
    leaks = [
        {"kind": k.kind, "start": _utf16(value, k.start), "end": _utf16(value, k.end), "text": k.text}
        for k in detect_leak(value)
    ]
    assert node.ask(op="safety", text=value) == {
        "escaped": escape_control_tokens(value),
        "unescaped": unescape_control_tokens(value),
        "json": escape_control_tokens_json(value),
        "leaks": leaks,
    }


# -- the CLI ------------------------------------------------------------------------------------------------


def _py_cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("COLUMNS", "80")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = py_cli.main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
        except Exception:  # the Python CLI crashes on these: only the exit code is compared
            return {"code": 1}
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


CONVERSATIONS = {
    "ok": '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "channel": "final", "content": "Yo"}]}',  # noqa: E501
    "tools": json.dumps(
        {
            "messages": [
                {"role": "system", "content": [{"type": "system_content", "conversation_start_date": "2025-01-01"}]},
                {
                    "role": "developer",
                    "content": [
                        {
                            "type": "developer_content",
                            "instructions": "Be brief.",
                            "tools": {
                                "functions": {
                                    "name": "functions",
                                    "tools": [
                                        {
                                            "name": "f",
                                            "description": "d",
                                            "parameters": {
                                                "type": "object",
                                                "properties": {
                                                    "2": {"type": "number", "default": 1.0},
                                                    "1": {"type": "integer", "default": 12345678901234567890},
                                                },
                                            },
                                        }
                                    ],
                                }
                            },
                        }
                    ],
                },
                {"role": "assistant", "channel": "analysis", "content": "think"},
                {"role": "assistant", "channel": "final", "content": "done"},
            ]
        }
    ),
    "bad_json": '{"messages": [\n  {"role": "user", "content": "x"},\n]}',
    "bad_json2": '{"messages": [{"role": "user" "content": "x"}]}',
    "bad_json3": '{"messages": "\u00e9\x01"}',
    "bad_json4": "",
    "bad_json5": '{"a": 1} x',
    "bad_json6": '{"a": "\\q"}',
    "bad_json7": '{"a": "\\u12"}',
    "bad_json8": '{"a" 1}',
    "bad_json9": "{'a': 1}",
    "bad_json10": "[1, 2",
    "bad_json11": '"abc',
    "bom": '\ufeff{"messages": []}',
    "no_messages": '{"msgs": []}',
    "bad_role": '{"messages": [{"role": "bot", "content": "x"}]}',
    "bad_role2": '{"messages": [{"role": {"a": [1, 2.5, null, true]}, "content": "x"}]}',
    "bad_content": '{"messages": [{"role": "user", "content": 5}]}',
    "bad_item": '{"messages": [{"role": "user", "content": [{"type": "image"}]}]}',
    "bad_text": '{"messages": [{"role": "user", "content": [{"type": "text"}]}]}',
    "bad_sys": '{"messages": [{"role": "system", "content": [{"type": "system_content", "reasoning_effort": "low"}]}]}',
    "bad_sys2": '{"messages": [{"role": "system", "content": [{"type": "system_content", "channel_config": {"valid_channels": ["a", 5], "channel_required": true}}]}]}',  # noqa: E501
    "bad_sys3": '{"messages": [{"role": "system", "content": [{"type": "system_content", "channel_config": {"valid_channels": ["a"], "channel_required": "maybe"}}]}]}',  # noqa: E501
    "bad_sys4": '{"messages": [{"role": "system", "content": [{"type": "system_content", "tools": {"f": {"name": "f", "tools": [{"name": "a"}]}}}]}]}',  # noqa: E501
    "bad_dev": '{"messages": [{"role": "developer", "content": [{"type": "developer_content", "tools": []}]}]}',
    "bad_name": '{"messages": [{"role": "user", "name": 5, "content": "x"}]}',
    "misplaced": '{"messages": [{"role": "user", "content": [{"type": "system_content"}]}]}',
    "tool_no_name": '{"messages": [{"role": "tool", "content": "x"}]}',
    "yes_bool": '{"messages": [{"role": "system", "content": [{"type": "system_content", "channel_config": {"valid_channels": ["a"], "channel_required": "Yes"}}]}]}',  # noqa: E501
}
TOOLS = {
    "list": '[{"type": "function", "function": {"name": "get_weather", "description": "Weather.\\nNow.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["a", "b"], "default": "a"}}, "required": ["city"]}}}]',  # noqa: E501
    "namespace": '{"name": "ns", "description": "Tools\\r\\nhere", "tools": [{"name": "x"}]}',
    "bad": '{"tools": 5}',
    "bad_tool": "[5]",
    "bad_name": '[{"function": {"name": 5}}]',
    "bad_desc": '[{"name": "a", "description": 5}]',
    "bad_params": '[{"name": "a", "parameters": []}]',
}


def _cases(tmp: Path) -> list[list[str]]:
    argvs: list[list[str]] = [[], ["-h"], ["frob"], ["render"], ["render", "-h"], ["tools", "--help"], ["tools"]]
    for name, body in CONVERSATIONS.items():
        path = tmp / f"{name}.json"
        path.write_text(body, encoding="utf-8")
        argvs += [["render", str(path)], ["render", str(path), "--tokens", "--next-role", "assistant"]]
    ok = str(tmp / "ok.json")
    argvs += [
        ["render", ok, "--training"],
        ["render", ok, "--no-drop-analysis", "--next-role=user"],
        ["render", ok, "--next-role", "bot"],
        ["render", ok, "--next-role"],
        ["render", ok, "--t"],
        ["render", ok, "--tok"],
        ["render", ok, "--training=yes"],
        ["render", ok, "extra"],
        ["render", ok, "--bogus"],
        ["render", str(tmp / "missing.json")],
        ["render", str(tmp)],
        ["render", str(tmp / "tools.json"), "--no-drop"],
    ]
    for name, body in TOOLS.items():
        path = tmp / f"tools_{name}.json"
        path.write_text(body, encoding="utf-8")
        argvs += [["tools", str(path)], ["tools", str(path), "--namespace", "x", "--description", "D"]]
    return argvs


def test_cli_render_and_tools_agree(node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argvs = _cases(tmp_path)
    for argv in argvs:
        ours = _py_cli(argv, monkeypatch)
        theirs = node.ask(op="cli", argv=argv)
        if ours == {"code": 1}:
            assert theirs["code"] == 1, argv
            continue
        assert theirs == ours, argv
    assert len(argvs) > 80
