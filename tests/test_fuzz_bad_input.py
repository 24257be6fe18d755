"""Fuzzing bad input (issue 9's bar): mutated requests, SSE streams, completions and CLI input files.

- request parsing, the prompt it renders and the response echoing it raise only `RequestError`;
- `parse_sse` raises only `SSEError`, and what it accepts writes back to the same events;
- a completion, however mangled, streams to a closing event and survives SSE both ways;
- the CLI never lets an exception out (a traceback), and bad input is one line with exit 2.

Bounded: `max_examples` below (times `HARMONY_FUZZ_SCALE`, default 1, for a longer local run:
`HARMONY_FUZZ_SCALE=20 .venv/bin/python -m pytest tests/test_fuzz_bad_input.py`). Under `CI=true` the
hypothesis profile of conftest derandomizes the examples, so CI runs the same cases every time.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harmony_responses import HarmonyEncoding, Role
from harmony_responses.bridge import (
    RequestError,
    SSEError,
    build_response,
    counting_ids,
    parse_request,
    parse_sse,
    request_to_conversation,
    stream_response,
    to_sse,
)
from harmony_responses.cli import main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CASES = ROOT / "tests" / "bridge"
SCALE = int(os.environ.get("HARMONY_FUZZ_SCALE", "1"))


def fuzz(examples: int) -> settings:
    """`examples` cases (times HARMONY_FUZZ_SCALE), no deadline; the profile (CI: derandomized) underneath."""
    return settings(max_examples=examples * SCALE, deadline=None, suppress_health_check=list(HealthCheck))


REQUEST_SEEDS = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(CASES.glob("*/request.json"))] + [
    json.loads((EXAMPLES / "responses" / "request.json").read_text(encoding="utf-8"))
]
COMPLETION_SEEDS = [p.read_text(encoding="utf-8") for p in sorted(CASES.glob("*/completion.txt"))] + [
    (EXAMPLES / "responses" / "completion.txt").read_text(encoding="utf-8")
]

# -- evil values and JSON mutations --------------------------------------------------------------------------

NASTY_TEXT = [
    "", "\ud800", "a\udfffb", "\ufeff", "\x00", "<|start|>", "<|end|>", "<|channel|>", "<|call|>", "to=functions.f",
    "message", "user", "assistant", "developer", "function_call", "function_call_output", "reasoning", "input_text",
    "output_text", "json_schema", "function", "auto", "required", "acme:thing", "item_reference", "x" * 80,
    "data: [DONE]", "\r\n", "é🙂",
]  # fmt: skip
FIELD_NAMES = [
    "type", "role", "content", "text", "name", "description", "parameters", "schema", "format", "input", "tools",
    "tool_choice", "call_id", "arguments", "output", "summary", "reasoning", "effort", "store", "seed", "stream",
    "max_output_tokens", "messages", "recipient", "channel", "include", "metadata", "mode", "strict", "id",
]  # fmt: skip
text = st.one_of(st.text(max_size=12), st.sampled_from(NASTY_TEXT))
key = st.one_of(st.sampled_from(FIELD_NAMES), text)
scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)


class Deep:
    """JSON nested `levels` deep, kept folded until used: the harness itself must not recurse into it."""

    OPEN = ("[", '{"type": ', '{"properties": {"a": ')
    CLOSE = ("]", "}", "}}")

    def __init__(self, levels: int, kind: int) -> None:
        self.levels, self.kind = levels, kind

    def value(self) -> Any:
        value: Any = "x"
        for _ in range(self.levels):
            value = [value] if self.kind == 0 else {"type": value} if self.kind == 1 else {"properties": {"a": value}}
        return value

    def text(self) -> str:
        return self.OPEN[self.kind] * self.levels + '"x"' + self.CLOSE[self.kind] * self.levels


evil = st.one_of(
    st.recursive(scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(key, inner, max_size=3)),
    st.builds(Deep, st.integers(30, 3000), st.integers(0, 2)),
)


def _paths(value: Any) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        out.append(path)
        if isinstance(node, dict):
            stack.extend(((*path, k), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in enumerate(node))
    return sorted(out, key=lambda p: (len(p), repr(p)))


def _copy_along(value: Any, path: tuple[Any, ...]) -> tuple[Any, Any]:
    """A copy of `value` sharing all but the containers on `path`, and the copied parent of its last step."""
    top = copy.copy(value)
    node = top
    for part in path[:-1]:
        node[part] = copy.copy(node[part])
        node = node[part]
    return top, node


def _mutate_once(data: st.DataObject, value: Any) -> Any:
    path = data.draw(st.sampled_from(_paths(value)))
    op = data.draw(st.sampled_from(["replace", "replace", "delete", "add", "wrap", "duplicate"]))
    if not path:
        return data.draw(evil) if op == "replace" else [value] if op == "wrap" else value
    value, parent = _copy_along(value, path)
    last = path[-1]
    if op == "replace":
        parent[last] = data.draw(evil)
    elif op == "delete":
        del parent[last]
    elif op == "wrap":
        parent[last] = data.draw(st.sampled_from([[parent[last]], {data.draw(key): parent[last]}]))
    elif op == "duplicate" and isinstance(parent, list):
        parent.insert(last, parent[last])
    elif isinstance(parent[last], dict):
        parent[last] = {**parent[last], data.draw(key): data.draw(evil)}
    elif isinstance(parent, dict):
        parent[data.draw(key)] = data.draw(evil)
    return value


def mutate_json(data: st.DataObject, value: Any) -> Any:
    for _ in range(data.draw(st.integers(1, 3))):
        value = _mutate_once(data, value)
    return value


def unfold(value: Any) -> Any:
    """The mutated value as plain Python data (`Deep` unfolded)."""
    if isinstance(value, Deep):
        return value.value()
    if isinstance(value, dict):
        return {k: unfold(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unfold(v) for v in value]
    return value


def dumps(value: Any, ensure_ascii: bool) -> str:
    """JSON text of the mutated value (NaN and lone surrogates included), `Deep` written out as text."""
    folded: list[Deep] = []

    def mark(obj: object) -> str:
        assert isinstance(obj, Deep)
        folded.append(obj)
        return f"\0DEEP{len(folded) - 1}\0"

    text = json.dumps(value, ensure_ascii=ensure_ascii, default=mark)
    for i, deep in enumerate(folded):
        text = text.replace(json.dumps(f"\0DEEP{i}\0", ensure_ascii=ensure_ascii), deep.text(), 1)
    return text


INSERTS = ["\n", "\r", "\r\n", "\n\n", ":", "data:", "data: ", "event: ", "id: 1", "retry: x", "[DONE]", "{", "}",
           '"', '"type"', "\ufeff", "<|end|>", "<|start|>assistant", "<|channel|>", "<|message|>", "<|return|>",
           "\\ud800", "\\", "analysis", "final", " to=functions.f", "<|constrain|>json"]  # fmt: skip


def mutate_text(data: st.DataObject, value: str) -> str:
    for _ in range(data.draw(st.integers(1, 4))):
        a = data.draw(st.integers(0, len(value)))
        b = data.draw(st.integers(a, min(len(value), a + 40)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace", "truncate", "repeat"]))
        piece = data.draw(st.one_of(st.sampled_from(INSERTS), st.text(max_size=6)))
        if op == "insert":
            value = value[:a] + piece + value[a:]
        elif op == "delete":
            value = value[:a] + value[b:]
        elif op == "replace":
            value = value[:a] + piece + value[b:]
        elif op == "truncate":
            value = value[:a]
        else:
            value = value[:b] + value[a:b] * data.draw(st.integers(2, 5)) + value[b:]
    return value


# -- requests ------------------------------------------------------------------------------------------------


@fuzz(600)
@given(data=st.data())
def test_mutated_requests_raise_only_request_errors(encoding: HarmonyEncoding, data: st.DataObject) -> None:
    raw = unfold(mutate_json(data, data.draw(st.sampled_from(REQUEST_SEEDS))))
    try:
        body = parse_request(raw)
        prompt = encoding.render_conversation_for_completion(request_to_conversation(body), Role.ASSISTANT)
    except RequestError as exc:
        json.dumps(exc.to_body()).encode("utf-8")  # the 400 body itself is printable
        event(f"refused: {exc.code}")
        return
    event("accepted")
    response = build_response(["<|channel|>final<|message|>ok<|return|>"], encoding, body, input_tokens=len(prompt))
    response.model_dump_json().encode("utf-8")  # what a server sends back echoes the request
    assert response.status == "completed"


# -- SSE -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wires(encoding: HarmonyEncoding) -> list[str]:
    return ["".join(to_sse(stream_response([c], encoding, ids=counting_ids()))) for c in COMPLETION_SEEDS]


@fuzz(600)
@given(data=st.data())
def test_mutated_sse_raises_only_sse_errors(wires: list[str], data: st.DataObject) -> None:
    wire = data.draw(st.sampled_from(wires))
    if data.draw(st.booleans()):
        wire = mutate_text(data, wire)
    else:  # one event's JSON body mutated, the framing intact
        lines = wire.split("\n")
        at = data.draw(st.sampled_from([i for i, line in enumerate(lines) if line.startswith("data: {")]))
        body = mutate_json(data, json.loads(lines[at][len("data: ") :]))
        lines[at] = "data: " + dumps(body, data.draw(st.booleans()))
        wire = "\n".join(lines)
    try:
        events = parse_sse(wire)
    except SSEError as exc:
        assert str(exc).startswith("line ")
        event("refused")
        return
    event("accepted")
    assert parse_sse("".join(to_sse(events))) == events  # what it accepts, it can write back


# -- completions ---------------------------------------------------------------------------------------------


@fuzz(200)
@given(data=st.data())
def test_mutated_completions_always_close_their_stream(encoding: HarmonyEncoding, data: st.DataObject) -> None:
    text = mutate_text(data, data.draw(st.sampled_from(COMPLETION_SEEDS)))
    completion: list[int] | list[str]
    if data.draw(st.booleans()):
        completion = [text[i : i + 5] for i in range(0, len(text), 5)]  # chunked text
    else:
        ids = encoding.encode(text.encode("utf-8", "replace").decode("utf-8"), allowed_special="all")
        at = data.draw(st.integers(0, len(ids)))
        odd = data.draw(st.lists(st.integers(-(2**40), 2**40) | st.integers(199_990, 201_100), max_size=2))
        completion = ids[:at] + odd + ids[at:]
    events = list(stream_response(completion, encoding, ids=counting_ids()))
    assert events[-1].type in ("response.completed", "response.incomplete", "response.failed")
    event(events[-1].type)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert parse_sse("".join(to_sse(events))) == events


# -- the command line ----------------------------------------------------------------------------------------

REQUEST = str(EXAMPLES / "responses" / "request.json")
COMPLETION = str(EXAMPLES / "responses" / "completion.txt")
CONVERSATION = str(EXAMPLES / "conversation.json")
IDS = "token ids of the example completion"
CLI_SEEDS: list[tuple[list[str], str, bool]] = [  # (args, seed file, is JSON); FILE is the mutated input
    (["render", "FILE"], CONVERSATION, True),
    (["render", "FILE", "--next-role", "assistant", "--tokens"], CONVERSATION, True),
    (["render", "FILE", "--training", "--no-drop-analysis"], CONVERSATION, True),
    (["tools", "FILE"], str(EXAMPLES / "tools.json"), True),
    (["tools", "FILE", "--namespace", "x"], str(EXAMPLES / "tools.json"), True),
    (["parse", "FILE"], COMPLETION, False),
    (["parse", "FILE", "--mode", "lenient", "--events"], COMPLETION, False),
    (["parse", "FILE", "--mode", "lenient", "--role", "none", "--tool", "get_weather"], COMPLETION, False),
    (["parse", "FILE", "--tokens", "--mode", "lenient"], IDS, True),
    (["respond", "--request", "FILE", "--completion", COMPLETION], REQUEST, True),
    (["respond", "--request", "FILE", "--completion", COMPLETION, "--chat", "--stream"], REQUEST, True),
    (["respond", "--request", REQUEST, "--completion", "FILE", "--stream"], COMPLETION, False),
    (["respond", "--request", REQUEST, "--completion", "FILE", "--chat"], COMPLETION, False),
    (["respond", "--request", REQUEST, "--completion", "FILE", "--tokens", "--stream"], IDS, True),
]


def _run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(args)
    return status, out.getvalue(), err.getvalue()


@fuzz(400)
@given(data=st.data())
def test_the_cli_never_shows_a_traceback(encoding: HarmonyEncoding, data: st.DataObject) -> None:
    args, seed, is_json = data.draw(st.sampled_from(CLI_SEEDS))
    if seed == IDS:
        content = json.dumps(encoding.encode(Path(COMPLETION).read_text(encoding="utf-8"), allowed_special="all"))
    else:
        content = Path(seed).read_text(encoding="utf-8")
    if is_json and data.draw(st.booleans()):
        payload = dumps(mutate_json(data, json.loads(content)), data.draw(st.booleans()))
        raw = payload.encode("utf-8", "surrogatepass")  # a lone surrogate left unescaped is invalid UTF-8
    else:
        raw = mutate_text(data, content).encode("utf-8", "surrogatepass")
        if data.draw(st.integers(0, 9)) == 0:
            raw = raw[:5] + bytes([data.draw(st.integers(0x80, 0xFF))]) + raw[5:]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "input"
        path.write_bytes(raw)
        status, out, err = _run_cli([str(path) if a == "FILE" else a for a in args])
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        assert status == 2
    assert status in (0, 2), err
    event(f"{args[0]}: exit {status}")
    if status == 2:
        assert err.count("\n") == 1 and (err.startswith("harmony-responses: ") or err.startswith('{"error"')), err
        assert out == "" or args[0] == "respond"
    out.encode("utf-8")  # whatever was printed is valid text
    assert sys.stdout is not None
