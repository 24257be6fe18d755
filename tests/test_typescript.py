"""Property tests: the TypeScript package against the Python one on random inputs, for differences the corpus missed.

The conformance corpus (conformance/, run in each language by its own runner, with no other language beside it)
is where the two runtimes are held to one behaviour. What stays here is a search: one long-lived node process
(runtime/typescript/test/server.ts, compiled by `make ts-build`) answers JSON lines while hypothesis draws
conversations, completions, requests and texts, and both languages must agree exactly. Every difference this file
finds becomes a corpus case (conformance/README.md, "Adding a case") in the commit that fixes it. Under CI the
draws are derandomized (conftest); run longer locally with TS_EXAMPLES=N.
"""

from __future__ import annotations

import json
import os
import subprocess
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conformance_ops import CORPUS, INPUT, expected, sse_frames
from harness import fixed, jsonable, run_events, run_node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from output_items import Dialogue, dialogue, load_reference, play

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
from harmony_responses.bridge import (
    RequestError,
    SSEStreamer,
    build_response,
    chat_completion_chunks,
    counting_ids,
    parse_request,
    request_to_conversation,
    response_snapshot,
    stream_response,
    to_chat_completion,
    to_sse,
    tool_policy,
)
from harmony_responses.bridge.encrypted import ReasoningSeal
from harmony_responses.types import _models

from conftest import ROOT
from strategies import conversation, text, tool

# Unicode keeps assigning characters: Python 3.11's database is Unicode 14, Node's is newer. Python's repr escapes
# a character its database does not know (the parsers quote header words with repr) and `isalnum` rejects it,
# so the texts drawn here leave out characters unassigned in this Python. Neither side is wrong: Python 3.11
# and 3.13 differ from each other the same way.
assigned_text = st.text(st.characters(blacklist_categories=("Cs", "Cn")), max_size=30)


def _known(text: str) -> str:
    return "".join("\ufffd" if unicodedata.category(c) == "Cn" else c for c in text)


VOCABULARY_SIZE = 201088
SERVER = "test/server.js"  # under harness.TS_BUILD
EXAMPLES = int(os.environ.get("TS_EXAMPLES", "60"))
FUNCTIONS = ["render_conversation", "render_conversation_for_completion", "render_conversation_for_training"]


class Node:
    def __init__(self) -> None:
        self.proc = run_node(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

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
def reference() -> Any:
    return load_reference()


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
    return _assigned_only(encoding, tokens), role


def _assigned_only(encoding: HarmonyEncoding, tokens: list[int]) -> list[int]:
    """`tokens`, a run holding a character this Python does not know re-encoded with U+FFFD (see `assigned_text`);
    ids outside the vocabulary stay where they are."""
    out: list[int] = []
    run: list[int] = []
    for token in [*tokens, None]:
        if token is not None and token < VOCABULARY_SIZE:
            run.append(token)
            continue
        text = encoding.decode(run)
        out += run if text == _known(text) else encoding.encode(_known(text), allowed_special="all")
        run = []
        if token is not None:
            out.append(token)
    return out


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
    steps: list[dict[str, Any]] = []
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
    assert theirs == jsonable(ours)
    assert node.ask(op="stream", tokens=tokens, role=role.value if role else None, strict=strict) == jsonable(
        _py_stream(encoding, tokens, role, strict)
    )


# -- the event parser ---------------------------------------------------------------------------------------


def _py_events(encoding: HarmonyEncoding, chunks: list[Any], options: dict[str, Any]) -> dict[str, Any]:
    flags: dict[str, Any] = {k: options.get(k) for k in ("stop_after_tool_call", "stop_at_turn_end", "max_tool_calls")}
    return run_events(encoding, chunks, options["role"], options["mode"], options["tools"], **flags)


def test_the_python_side_answers_the_corpus_events(encoding: HarmonyEncoding) -> None:
    """The live comparison starts from the corpus: its Python side of the event parser (`_py_events`, the
    harness's run) gives every `events` case's expected outputs, so a difference found here is the other
    language's, or a case the corpus lacks."""
    folders = sorted(p.parent for p in (CORPUS / "events").glob(f"*/{INPUT}"))
    assert len(folders) > 300
    for folder in folders:
        case = json.loads((folder / INPUT).read_text(encoding="utf-8"))
        options = {**case, "role": Role(case["role"]) if case["role"] is not None else None}
        assert _py_events(encoding, case["chunks"], options) == expected(folder), folder.name


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
# Issue 8's glitches: glued and doubled roles, punctuated channels, recipients out of place or misspelled, stripped
# headers, a byte order mark, JSON strings holding stop-token spellings, built-in tools, prose.
GLITCH_WORDS = (
    "assistantassistant assistantfinal assistantcommentary assistantanalysis ––commentary final. Analysis commentary? "
    "to=function.f to=functions.functions.f to=functions.f, to=assistant to=f to=python to=browser.search "
    "to=container.exec to=functions.Web bash Sure, code <|constrain|>functions.f"
)
PIECES = [
    *SPELLINGS,
    *HEADER_WORDS.split(),
    *GLITCH_WORDS.split(),
    " ",
    "  ",
    "\n",
    "\u3000",
    "<|constrain|>json",
    "\ufeff",
    "{",
    '"',
    "\\",
    "}",
    '{"a": "',
    "Search",
    "Thinking.",
]
HARMONY_TEXT = st.lists(st.one_of(st.sampled_from(PIECES), assigned_text), max_size=25).map("".join)


# Real gpt-oss completions (tests/realworld) and the peers' cases (tests/peers): the corpus holds each once in one
# feeding; here they are drawn in random chunks and with random options.
REAL_COMPLETIONS = [
    json.loads(line)["completion"]
    for name in ("realworld/completions.jsonl", "peers/cases.jsonl")
    for line in (ROOT / "tests" / name).read_text(encoding="utf-8").split("\n")
    if line.strip()
]


@st.composite
def event_input(draw: st.DrawFn, encoding: HarmonyEncoding) -> tuple[list[Any], dict[str, Any]]:
    """A completion as token ids or as text, in random chunks, with random parser options."""
    kind = draw(st.sampled_from(["tokens", "text", "harmony_text", "real"]))
    if kind in ("harmony_text", "real"):
        text = draw(HARMONY_TEXT) if kind == "harmony_text" else draw(st.sampled_from(REAL_COMPLETIONS))
        pieces: list[Any] = _split(draw, text)
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
        "tools": draw(st.sampled_from([None, ["f"], ["shell", "f"], ["get_weather"], ["f", "Web Search"]])),
        "stop_after_tool_call": draw(st.booleans()),
        "stop_at_turn_end": draw(st.sampled_from([None, True, False])),
        "max_tool_calls": draw(st.sampled_from([None, 1, 2])),
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


# -- the bridge ---------------------------------------------------------------------------------------------

BRIDGE_CASES = sorted(p.parent for p in (ROOT / "tests" / "bridge").glob("*/request.json"))
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "strict": True,
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"],
        "additionalProperties": False,
    },
}
# Requests issue 8 reads calls by: a strict tool (its arguments checked), one call only, at most two calls.
ISSUE8_REQUESTS = [
    json.dumps({"model": "gpt-oss", "input": "hi", "tools": [WEATHER_TOOL]}),
    json.dumps({"model": "gpt-oss", "input": "hi", "tools": [WEATHER_TOOL], "parallel_tool_calls": False}),
    json.dumps({"model": "gpt-oss", "input": "hi", "tools": [{**WEATHER_TOOL, "strict": False}], "max_tool_calls": 2}),
    json.dumps({"model": "gpt-oss", "input": "hi", "tools": [WEATHER_TOOL], "max_tool_calls": 10**20}),
]
REQUESTS = [p / "request.json" for p in BRIDGE_CASES] + [ROOT / "examples" / "responses" / "request.json"]
REQUEST_TEXTS = [p.read_text(encoding="utf-8") for p in REQUESTS]


def test_every_model_reads_its_fields_as_pydantic_does(node: Node) -> None:
    """Required or not, and the default: the TypeScript reading of the schemas against the generated models.

    Not a property test: it checks bridge/schema.ts's imitation of pydantic, and goes with it (issue 19, item 4).
    """
    theirs = node.ask(op="models")
    checked = 0
    for name, fields in theirs.items():
        cls = getattr(_models, name, None)
        if cls is None:  # an inline or aliased schema the Python models name differently
            continue
        ours = [
            [info.alias or key, info.is_required(), None if info.is_required() else jsonable(info.default)]
            for key, info in cls.model_fields.items()
        ]
        assert fields == ours, name
        checked += 1
    assert checked > 60


def _py_bridge(
    encoding: HarmonyEncoding,
    request: str | None,
    pieces: list[Any],
    strict: bool,
    names: Any,
    stopped: bool | None,
    include_usage: bool = False,
    **reading: Any,
) -> dict[str, Any]:
    """`reading`: the builder's `role` and `tools`, when given (the TypeScript side takes the same keys)."""
    body = parse_request(json.loads(request)) if request is not None else None
    try:
        streamer = SSEStreamer(encoding, body, reasoning_names=names, **fixed(strict), **reading)
        sse = streamer.start()
        for piece in pieces:
            sse += streamer.feed_text(piece) if isinstance(piece, str) else streamer.feed(piece)
        sse += streamer.finish(stopped)
        options = {**fixed(strict), **reading, "stopped": stopped}
        typed = "".join(to_sse(stream_response(pieces, encoding, body, **options), reasoning_names=names))
        response = build_response(pieces, encoding, body, **{**fixed(strict), **reading, "stopped": stopped})
        chunks = chat_completion_chunks(
            stream_response(pieces, encoding, body, **{**fixed(strict), **reading, "stopped": stopped}), include_usage
        )
        return {
            "sse": sse,
            "typed": typed,
            "response": json.dumps(response.model_dump(mode="json"), ensure_ascii=False, indent=2),
            "chat": json.dumps(to_chat_completion(response), ensure_ascii=False, indent=2),
            "chunks": [json.dumps(chunk, ensure_ascii=False) for chunk in chunks],
        }
    except HarmonyError as exc:
        return {"error": str(exc)}


CALL = "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
MODEL_TEXT = st.lists(
    st.one_of(
        assigned_text,
        st.sampled_from(
            [
                "<|channel|>analysis<|message|>",
                "<|channel|>final<|message|>",
                "<|start|>assistant<|channel|>commentary<|message|>",
                CALL,
                '{"city": "Paris"}',
                "<|start|>assistant to=browser.search<|channel|>analysis<|message|>",
                "<|end|>",
                "<|call|>",
                "<|return|>",
                "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>",
                "assistantfinal",
                " to=get_weather",
                "\n",
                "é🙂",
                '"\\\x00\x1f\u2028',
                # issue 8: calls without arguments or with bad ones, built-in tools, stripped calls, glitches
                "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|><|call|>",
                '{"city": 5, "unit": "k"}',
                '{"town": "x"',
                "<|start|>assistant<|channel|>analysis to=python code<|message|>print(1)",
                "<|start|>assistant to=container.exec<|channel|>commentary<|message|>",
                "assistantcommentary to=functions.get_weatherjson",
                "<|channel|>––final.<|message|>",
                "\ufeff",
                '"<|end|>"',
                "Sure!",
            ]
        ),
    ),
    max_size=12,
).map("".join)


@st.composite
def bridge_input(draw: st.DrawFn, encoding: HarmonyEncoding) -> tuple[list[Any], dict[str, Any]]:
    """A completion as a server sees it (token ids one at a time, or text in chunks), and how it ends: drawn, or
    a real one (tests/realworld, tests/peers) in random chunks."""
    source = draw(st.sampled_from(["drawn", "rendered", "real"]))
    if source == "drawn":
        written = draw(MODEL_TEXT)
    elif source == "real":
        written = draw(st.sampled_from(REAL_COMPLETIONS))
    else:
        tokens, _ = draw(completion(encoding))
        written = encoding.decode([t for t in tokens if t < VOCABULARY_SIZE])
    if draw(st.booleans()):
        pieces: list[Any] = encoding.encode(written, allowed_special="all")
    else:
        pieces = [p for p in _split(draw, written) if p]
    options = {
        "request": draw(st.sampled_from([None, *REQUEST_TEXTS, *ISSUE8_REQUESTS])),
        "strict": draw(st.booleans()),
        "reasoning_names": draw(st.sampled_from(["spec", "openai"])),
        "stopped": draw(st.sampled_from([None, True, False])),
        "include_usage": draw(st.booleans()),
    }
    return pieces, options


@SETTINGS
@given(data=st.data())
def test_bridge_sse_response_and_chat_agree(node: Node, encoding: HarmonyEncoding, data: st.DataObject) -> None:
    pieces, options = data.draw(bridge_input(encoding))
    ours = _py_bridge(
        encoding,
        options["request"],
        pieces,
        options["strict"],
        options["reasoning_names"],
        options["stopped"],
        options["include_usage"],
    )
    theirs = node.ask(op="bridge", pieces=pieces, **options)
    assert _as_values(theirs) == _as_values(ours)


def _as_values(out: dict[str, Any]) -> dict[str, Any]:
    """A bridge's outputs by the corpus's rule: SSE text frame by frame with each `data:` payload a JSON value,
    JSON texts as values (each runtime writes JSON with its own writer)."""
    texts = {key: sse_frames(out[key]) for key in ("sse", "typed") if isinstance(out.get(key), str)}
    values = {key: json.loads(out[key]) for key in ("response", "chat") if isinstance(out.get(key), str)}
    chunks = {"chunks": [json.loads(c) for c in out["chunks"]]} if isinstance(out.get("chunks"), list) else {}
    return {**out, **texts, **values, **chunks}


def _recovery_module() -> Any:
    import test_recovery_properties  # noqa: PLC0415 (the corruption classes of tests/test_recovery_properties.py)

    return test_recovery_properties


RECOVERY = _recovery_module()


@SETTINGS
@given(
    messages=RECOVERY.turn(),
    corruption=st.sampled_from(RECOVERY.CORRUPTIONS),
    pick=st.integers(0, 10),
    cuts=st.lists(st.integers(1, 400), max_size=12),
    tokens=st.booleans(),
    stopped=st.sampled_from([None, True, False]),
)
def test_corrupted_turns_agree(
    node: Node,
    encoding: HarmonyEncoding,
    messages: list[dict[str, str]],
    corruption: str,
    pick: int,
    cuts: list[int],
    tokens: bool,
    stopped: bool | None,
) -> None:
    """Issue 8's corruption classes (tests/test_recovery_properties.py builds the turns): the same events and the
    same SSE bytes, response and Chat Completions output from both languages, in random chunks or as token ids."""
    completion, _, _ = RECOVERY.render(messages, corruption, pick)
    names = sorted({m["name"] for m in messages if m["kind"] == "call"})
    request = json.dumps({"model": "gpt-oss", "input": "hi", "tools": [{"type": "function", "name": n} for n in names]})
    points = sorted({c for c in cuts if c < len(completion)})
    pieces: list[Any] = [completion[a:b] for a, b in zip([0, *points], [*points, len(completion)], strict=True)]
    if tokens:
        pieces = encoding.encode(completion, allowed_special="all")
    options = {"role": Role.ASSISTANT, "mode": "lenient", "tools": names, "stop_after_tool_call": False,
               "stop_at_turn_end": None}  # fmt: skip
    chunks = [pieces] if tokens else pieces
    theirs = node.ask(op="events", chunks=chunks, **{**options, "role": "assistant"})
    assert theirs == _py_events(encoding, chunks, options), (corruption, completion)
    ours = _py_bridge(encoding, request, pieces, False, "spec", stopped, True)
    theirs = node.ask(op="bridge", request=request, pieces=pieces, strict=False, reasoning_names="spec",
                      stopped=stopped, include_usage=True)  # fmt: skip
    assert _as_values(theirs) == _as_values(ours), (corruption, completion)


# Schemas for the strict-tool check: the bridge tests' tool, and one using most of JSON Schema's keywords.
RICH_SCHEMA: dict[str, Any] = {  # a JSON Schema
    "type": "object",
    "$defs": {"unit": {"type": "string", "enum": ["c", "f"]}},
    "properties": {
        "city": {"type": "string", "minLength": 2, "maxLength": 8, "pattern": "^[A-Z]"},
        "unit": {"$ref": "#/$defs/unit"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7, "multipleOf": 1},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3, "uniqueItems": True},
        "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        "mode": {"const": "fast"},
        "either": {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 3}]},
        "one": {"oneOf": [{"type": "integer"}, {"type": "number"}, {"minimum": 2}]},
        "not_null": {"not": {"type": "null"}},
        "when": {"if": {"type": "string"}, "then": {"minLength": 3}, "else": {"type": "integer"}},
        "has": {"type": "array", "contains": {"type": "integer"}, "maxContains": 2},
        "names": {"type": "object", "propertyNames": {"maxLength": 3}, "minProperties": 1, "maxProperties": 2},
        "nested": {
            "type": "object",
            "properties": {"deep": {"type": ["string", "null"]}},
            "required": ["deep"],
            "additionalProperties": False,
        },
        "loose": {"patternProperties": {"^x": {}}, "additionalProperties": False},
    },
    "required": ["city", "days"],
    "dependentRequired": {"ratio": ["tags"]},
    "additionalProperties": False,
}
SCHEMAS = [WEATHER_TOOL["parameters"], RICH_SCHEMA, {}, {"type": "array", "items": {"type": "number"}, "maxItems": 0}]
KEYS = [*RICH_SCHEMA["properties"], "town", "x1", "zz", "a/b", "t~"]
json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 12), st.sampled_from([0.5, 1.0, 2.5, -1.5]), st.sampled_from(
        ["", "a", "Ab", "Paris", "lowercase", "c", "f", "k", "fast", "xyz", "abcd", "é🙂"]
    )
)  # fmt: skip


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4))


json_value = st.recursive(json_leaf, _containers, max_leaves=12)
argument_texts = st.one_of(
    st.dictionaries(st.sampled_from(KEYS), json_value, max_size=8).map(json.dumps),
    json_value.map(json.dumps),
    st.sampled_from(["", "{", '{"city": "Paris"', "city=Paris", "[1, 2,]", '{"a": NaN}', "1e400", "{}x"]),
)


@SETTINGS
@given(schema=st.sampled_from(SCHEMAS), arguments=argument_texts)
def test_strict_tool_arguments_are_checked_alike(node: Node, schema: dict[str, Any], arguments: str) -> None:
    """The `harmony:validation` report of a strict tool's call: jsonschema's in Python, ajv's in TypeScript, written
    the same (messages, paths, order)."""
    from harmony_responses.bridge.arguments import check_arguments  # noqa: PLC0415

    ours = check_arguments(arguments, schema).to_dict()
    assert node.ask(op="arguments", arguments=arguments, schema=json.dumps(schema)) == jsonable(ours), arguments


def nested(depth: int, wrap: Callable[[object], object], leaf: object) -> object:
    """`leaf` wrapped `depth` times: a value deeper than any reader's nesting limit."""
    for _ in range(depth):
        leaf = wrap(leaf)
    return leaf


# Values a field of a request may be given: right, wrong, and the kinds a lax reader would coerce (both runtimes
# refuse those: spec/mapping/requests.json's `validation` rule).
VALUES = st.sampled_from(
    [None, True, False, 0, 1, 2, 1.0, 1.5, -1, 16, 20, 21, 10**20, "", "x", "3", " 3 ", "1.5", "1e3", "yes", "nan"]
    + ["auto", "none", "required", "low", "medium", "high", "xhigh", "disabled", "default", "text", "function"]
    + [[], {}, [1], ["x"], {"a": "b"}, {"a": 1}, {"type": "function", "name": "get_weather"}, {"name": "get_time"}]
    + [{"type": "allowed_tools", "tools": [{"type": "function", "name": "get_weather"}], "mode": "required"}]
    + [
        {"type": "allowed_tools", "tools": []},
        {"effort": "low", "summary": "auto"},
        {"effort": 5},
        {"verbosity": "low"},
    ]
    + [{"format": {"type": "json_schema", "name": "out", "schema": {"type": "object", "2": 1.0, "1": [1.5]}}}]
    + [{"format": {"type": "json_schema", "description": "d", "schema": {}}}, {"format": {"type": "text"}}]
    + [{"format": {}}, {"format": 5}, {"include_obfuscation": True}, {str(i): "v" for i in range(17)}]
    + [float("nan"), float("inf"), "a\ud800b", {"k\udc00": 1}, ["message.output_text.logprobs"], ["x"]]
    + [nested(70, lambda inner: [inner], 0), {"type": "object", "properties": {"a": {"type": 1.5}}}]
)
ITEMS = st.sampled_from(
    [
        {"type": "message", "role": "user", "content": "Hi"},
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "u"}]},
        {"type": "message", "role": "user", "content": [{"type": "bogus"}]},
        {"type": "message", "role": "user", "content": [{"text": "no type"}]},
        {"type": "message", "role": "user", "content": 5},
        {"type": "message", "role": "user"},
        {"role": "user", "content": "untyped"},
        {"role": "usr", "content": "typo"},
        {"role": "assistant", "content": "untyped answer"},
        {"role": "developer", "content": [{"type": "input_text", "text": "untyped dev"}]},
        {"type": "function_call", "call_id": "c3", "name": "spawn_agent", "namespace": "agents", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c3", "output": "spawned"},
        {"type": "message", "role": "system", "content": "sys"},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
        {"type": "message", "role": "assistant", "content": "earlier", "phase": "commentary"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "o"}, {"type": "refusal", "refusal": "no"}],
        },
        {"type": "message", "role": "bot", "content": "x"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call", "call_id": "", "name": "a b", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "zz", "output": [{"type": "input_text", "text": "t"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "thought"}]},
        {"type": "reasoning", "summary": [], "encrypted_content": "e"},
        {"type": "reasoning", "summary": [], "content": 5},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "raw"}]},
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "s"}],
            "content": [{"type": "reasoning_text", "text": "a"}, {"type": "reasoning_text", "text": ""}],
        },
        {"type": "reasoning", "summary": [], "content": [{"type": "summary_text", "text": "x"}]},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text"}], "id": None},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "get_weather",
            "arguments": "{}",
            "harmony:channel": "analysis",
            "harmony:content_type": None,
        },
        {"type": "function_call", "call_id": "c2", "name": "get_time", "arguments": "{}", "harmony:channel": 5},
        {
            "type": "harmony:browser_call",
            "id": "hbc_1",
            "status": "completed",
            "recipient": "browser.search",
            "arguments": '{"query":"q"}',
            "channel": "analysis",
            "content_type": "code",
        },
        {"type": "harmony:python_call", "recipient": "python", "arguments": "1+1"},
        {"type": "harmony:tool_call", "id": "htc_1", "arguments": "x"},
        {"type": "harmony:container_call", "id": "hcc_1", "recipient": "container.exec", "arguments": "", "channel": 3},
        {"type": "harmony:tool_call", "id": "hbc_1", "recipient": "x.y", "arguments": "", "status": "done"},
        {"type": "harmony:tool_output", "call_id": "hbc_1", "output": "found"},
        {"type": "harmony:tool_output", "call_id": "hbc_1", "output": [{"type": "input_text", "text": "a"}]},
        {"type": "harmony:tool_output", "call_id": "hbc_1", "output": [{"type": "input_image", "image_url": "u"}]},
        {"type": "harmony:tool_output", "call_id": "hbc_1", "output": 5},
        {"type": "harmony:tool_output", "call_id": "", "output": "x"},
        {"type": "harmony:tool_output", "output": "x"},
        {"type": "harmony:tool_output", "call_id": "c1", "output": "x"},
        {"type": "item_reference", "id": "msg_1"},
        {"id": "msg_2"},
        {"type": "compaction", "encrypted_content": "x"},
        {"type": "acme:search", "query": "q"},
        {"type": "x:"},
        {"type": "a:b c"},
        {"type": 5},
        5,
        "text",
    ]
)
FIELDS = [
    *_models.CreateResponseBody.model_fields,
    "seed",
    "user",
    "conversation",
    "prompt",
    "client_metadata",
    "prompt_cache_retention",
]
# Tools besides function tools: a namespace tool (rendered as its own namespace) and tools the server cannot run.
OTHER_TOOLS = st.sampled_from(
    [
        {"type": "namespace", "name": "agents", "description": "Agents.", "tools": [WEATHER_TOOL]},
        {"type": "namespace", "name": "agents", "tools": [{"type": "function", "name": "spawn_agent"}]},
        {"type": "namespace", "name": "a b", "tools": []},
        {"type": "namespace", "name": "agents", "tools": [{"type": "custom", "name": "x"}]},
        {"type": "web_search", "external_web_access": False},
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
        {"type": "local_shell"},
    ]
)


def _tool_list(raw: dict[str, Any]) -> list[Any]:
    """The request's tools so far: an earlier "field" step may have set `tools` to a value that is not a list."""
    tools = raw.get("tools")
    return tools if isinstance(tools, list) else []


@st.composite
def request_text(draw: st.DrawFn) -> str:
    """A bundled request with a few fields changed: valid, coerced or wrong."""
    raw = json.loads(draw(st.sampled_from([*REQUEST_TEXTS, '{"input": "hi"}'])))
    for _ in range(draw(st.integers(0, 3))):
        what = draw(st.sampled_from(["field", "input", "tool", "other tool"]))
        if what == "field":
            raw[draw(st.sampled_from(FIELDS))] = draw(VALUES)
        elif what == "input":
            raw["input"] = draw(st.lists(ITEMS, min_size=1, max_size=3))
        elif what == "other tool":
            raw["tools"] = [*_tool_list(raw), draw(OTHER_TOOLS)]
        else:
            name = draw(st.sampled_from(["get_weather", "get_time", "", "a b", "x" * 65]))
            tool: dict[str, object] = {"type": "function", "name": name}
            tool.update(
                draw(
                    st.fixed_dictionaries({}, optional={"description": VALUES, "parameters": VALUES, "strict": VALUES})
                )
            )
            raw["tools"] = [*_tool_list(raw), tool] if draw(st.booleans()) else [tool]
    return json.dumps(raw)


def _py_request(encoding: HarmonyEncoding, text: str, seal: ReasoningSeal | None = None) -> dict[str, Any]:
    try:
        body = parse_request(json.loads(text))
    except RequestError as exc:
        return {"error": {"code": exc.code, "param": exc.param, "message": exc.message}}
    except TypeError:
        return {"crash": True}
    snapshot = response_snapshot(body, response_id="resp_x", created_at=0, model="m", status="completed", output=[])
    out: dict[str, Any] = {"snapshot": snapshot.model_dump(mode="json")}  # compared as a JSON value
    try:
        conversation = request_to_conversation(body, reasoning=seal.reader() if seal is not None else None)
        policy = tool_policy(body)
    except RequestError as exc:
        return {**out, "error": {"code": exc.code, "param": exc.param, "message": exc.message}}
    prompt = encoding.render_conversation_for_completion(conversation, Role.ASSISTANT)
    return {**out, "prompt": prompt, "policy": [policy.mode, list(policy.allowed)]}


@SETTINGS
@given(raw=request_text())
def test_requests_are_read_coerced_and_refused_alike(node: Node, encoding: HarmonyEncoding, raw: str) -> None:
    ours = _py_request(encoding, raw)
    theirs = node.ask(op="request", request=raw)
    if ours.get("crash"):
        assert theirs.get("error_type") == "TypeError", theirs
        return
    assert theirs == ours


SEAL_KEY = bytes(range(1, 33))
SEALED_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)


@SETTINGS
@given(
    texts=st.lists(st.tuples(SEALED_TEXT, st.sampled_from([None, "json", "code"])), min_size=1, max_size=3),
    change=st.sampled_from(["none", "flip", "foreign", "differs", "same content", "cut"]),
    where=st.integers(0, 10_000),
)
def test_encrypted_reasoning_is_read_alike(
    node: Node, encoding: HarmonyEncoding, texts: list[tuple[str, str | None]], change: str, where: int
) -> None:
    """Reasoning items sealed by Python (and by TypeScript) open alike in both languages, to the token; a changed,
    cut, foreign or disagreeing blob is the same 400 naming the same item in both."""
    seal = ReasoningSeal(SEAL_KEY)
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": "Hi"}]
    for said_text, content_type in texts:
        blob = seal.seal(said_text, "analysis", content_type)
        if change == "flip":
            body = blob.split(".", 1)[1]
            i = where % len(body)
            blob = f"hrr1.{body[:i]}{'A' if body[i] != 'A' else 'B'}{body[i + 1 :]}"
        elif change == "foreign":
            blob = ReasoningSeal(bytes(32)).seal(said_text, "analysis", content_type)
        elif change == "cut":
            blob = blob[: len(blob) - 1 - where % 3]
        item: dict[str, Any] = {"type": "reasoning", "summary": [], "encrypted_content": blob}
        if change in ("differs", "same content"):
            said = said_text if change == "same content" else said_text + "!"
            item["content"] = [{"type": "reasoning_text", "text": said}]
        items.append(item)
    raw = json.dumps({"model": "m", "input": items})
    ours = _py_request(encoding, raw, seal)
    assert node.ask(op="request", request=raw, reasoning_key=SEAL_KEY.hex()) == ours
    if change in ("none", "same content"):
        assert "prompt" in ours, ours
    else:
        assert ours["error"]["code"] == "invalid_encrypted_content", ours
    assert node.ask(op="request", request=raw) == _py_request(encoding, raw)  # no key: refused alike
    said_text, content_type = texts[0]
    made = node.ask(
        op="reasoning_seal", key=SEAL_KEY.hex(), text=said_text, channel="analysis", content_type=content_type
    )
    opened = seal.open(made["blob"])
    assert opened is not None and (opened.text, opened.channel, opened.content_type) == (
        said_text,
        "analysis",
        content_type,
    )
    assert made["opened"] == [said_text, "analysis", content_type]
    theirs = node.ask(op="reasoning_seal", key=SEAL_KEY.hex(), text="", blob=items[1]["encrypted_content"])["opened"]
    mine = seal.open(items[1]["encrypted_content"])
    assert theirs == (None if mine is None else [mine.text, mine.channel, mine.content_type])


def _broken(item: Any, key: str, value: Any) -> Any:
    """An output item with one field changed: a bad shape the two languages must refuse alike."""
    return {**item, key: value} if isinstance(item, dict) else item


BREAKS = st.tuples(
    st.sampled_from(
        [
            "recipient",
            "arguments",
            "channel",
            "content_type",
            "content",
            "call_id",
            "harmony:channel",
            "harmony:content_type",
        ]
    ),
    st.sampled_from([None, 5, [], {"a": 1}, "", [{"type": "reasoning_text"}]]),
)


@SETTINGS
@given(data=dialogue, broken=st.one_of(st.none(), st.tuples(st.integers(0, 50), BREAKS)))
def test_output_as_input_renders_alike(
    node: Node, encoding: HarmonyEncoding, reference: Any, data: Dialogue, broken: Any
) -> None:
    """Requests built from the bridge's own output items (each turn's response sent back), and the same with one
    output item broken: both languages read, render and refuse them alike, to the token."""
    for turn in play(encoding, reference, data, counting_ids()):
        raw = turn.after
        if broken is not None:
            index, (key, value) = broken
            items = list(raw["input"])
            where = index % len(items)
            items[where] = _broken(items[where], key, value)
            raw = {**raw, "input": items}
        text = json.dumps(raw)
        assert node.ask(op="request", request=text) == _py_request(encoding, text)


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
