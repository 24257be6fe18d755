"""Where the conformance corpus's inputs came from: `conformance_tool.py import` writes them once, as data.

Each source yields (case folder under conformance/, input.json). The inputs are the repository's own: the
grammar corpus (tests/corpus), the peers' and real-world completions (tests/peers, tests/realworld), the bridge
cases (tests/bridge, examples/), the reference's render fixtures (../shared, copied in), the requests and
completions tests/test_typescript.py draws from, and the bad-request tables of tests/test_bad_requests.py.
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import conformance_ops as ops  # noqa: E402
from test_typescript import BRIDGE_CASES, ISSUE8_REQUESTS, nested  # noqa: E402

from harmony_responses import Conversation, RenderConversationConfig  # noqa: E402

ROOT = HERE.parent
Case = tuple[str, dict[str, Any]]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


def _slug(text: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out[:60]


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _events(chunks: list[Any], role: str | None, mode: str, tools: list[str] | None, **more: Any) -> dict[str, Any]:
    case = {"op": "events", "chunks": chunks, "role": role, "mode": mode, "tools": tools}
    return {**case, "stop_after_tool_call": False, "stop_at_turn_end": None, "max_tool_calls": None, **more}


def _bridge(request: Any, pieces: list[Any], **more: Any) -> dict[str, Any]:
    case = {"op": "bridge", "request": request, "pieces": pieces, "strict": False, "reasoning_names": "spec"}
    return {**case, "stopped": None, "include_usage": True, **more}


def render_cases() -> Iterator[tuple[str, dict[str, Any]]]:
    shared = ROOT.parent / "shared" / "fixtures" / "harmony"
    reference = json.loads((shared / "reference" / "cases.json").read_text(encoding="utf-8"))
    for i, c in enumerate(reference):
        case = {"op": "render", "function": c["function"], "auto_drop_analysis": c.get("auto_drop_analysis")}
        case |= {"message": c["message"]} if c["function"] == "render" else {"conversation": c["conversation"]}
        if "next_turn_role" in c and c["next_turn_role"] is not None:
            case["next_turn_role"] = c["next_turn_role"]
        yield f"render/reference-{i:02d}-{_slug(c['reference_file'] or 'none')}", case
    corpus = _jsonl(shared / "corpus" / "render.jsonl")
    small = [c for c in corpus if len(json.dumps(c)) < 6000]
    for c in small[:: max(1, len(small) // 30)][:30]:
        case = {"op": "render", "function": c["function"], "auto_drop_analysis": c.get("auto_drop_analysis")}
        case["conversation"] = c["conversation"]
        if c.get("next_turn_role") is not None:
            case["next_turn_role"] = c["next_turn_role"]
        yield f"render/{c['id']}", case
    yield from drawn_render_cases()


def drawn_render_cases() -> Iterator[tuple[str, dict[str, Any]]]:
    """Conversations drawn once by tests/strategies.py (their JSON is data now)."""
    from hypothesis import HealthCheck, given, settings  # noqa: PLC0415
    from hypothesis import strategies as st  # noqa: PLC0415

    from strategies import conversation  # noqa: PLC0415

    drawn: list[Conversation] = []

    @settings(max_examples=60, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(conversation)
    def draw(convo: Conversation) -> None:
        if len(drawn) < 24 and convo.messages:
            drawn.append(convo)

    draw()
    del st
    functions = ["render_conversation", "render_conversation_for_completion", "render_conversation_for_training"]
    roles = ["assistant", "user", "system", "tool", "developer"]
    for i, convo in enumerate(drawn):
        case = {"op": "render", "function": functions[i % 3], "auto_drop_analysis": [None, True, False][i % 3 // 1]}
        case["conversation"] = json.loads(convo.to_json())
        if case["function"] == "render_conversation_for_completion":
            case["next_turn_role"] = roles[i % len(roles)]
        yield f"render/drawn-{i:02d}", case


# -- the command line's cases (tests/test_typescript.py ran them in both languages before the corpus) ----


HEADERS = [
    "<|channel|>analysis<|message|>think<|end|>The answer",  # read as the answer, a message with no channel
    '<|channel|>final <|constrain|>json<|message|>{"a":1}<|return|>',
    "<|channel|>analysis json<|message|>{}<|end|><|start|>assistant<|channel|>notes code<|message|>x<|return|>",
]


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
    argvs: list[list[str]] = [
        [],
        ["-h"],
        ["--version"],
        ["frob"],
        ["render"],
        ["render", "-h"],
        ["tools", "--help"],
        ["tools"],
    ]
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
    return argvs + _prompt_cases(tmp)


PROMPT_REQUESTS = {
    "p_items": {
        "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
        "input": [
            {"type": "message", "role": "user", "content": "Weather in Paris? é"},
            {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Tool."}]},
            {
                "type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}",
                "harmony:channel": "analysis", "harmony:content_type": None,
            },
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {
                "type": "harmony:python_call", "id": "hpc_1", "recipient": "python", "arguments": "1+1",
                "channel": "analysis", "content_type": "code",
            },
            {"type": "harmony:tool_output", "call_id": "hpc_1", "output": "2"},
            {"type": "message", "role": "assistant", "phase": "final_answer", "content": "Sunny."},
            {"type": "message", "role": "user", "content": "Thanks"},
        ],
        "temperature": 0.5,
        "max_output_tokens": 16,
    },
    "p_string": {"input": "hi", "reasoning": {"effort": "low"}},
    "p_unknown_call": {"input": [{"type": "harmony:tool_output", "call_id": "x", "output": "y"}]},
    "p_bad_item": {"input": [{"type": "harmony:browser_call", "recipient": 5, "arguments": ""}]},
    "p_truncation": {"input": "hi", "truncation": "auto"},
    "p_unknown_field": {"input": "hi", "users": "u"},
    "p_list": [],
}  # fmt: skip


def _prompt_cases(tmp: Path) -> list[list[str]]:
    argvs: list[list[str]] = [["prompt"], ["prompt", "-h"], ["prompt", "--request"]]
    for name, raw in PROMPT_REQUESTS.items():
        path = str(tmp / f"{name}.json")
        Path(path).write_text(json.dumps(raw), encoding="utf-8")
        argvs += [["prompt", "--request", path], ["prompt", "--request", path, "--tokens"]]
    argvs += [
        ["prompt", "--request", str(tmp / "bad_json.json")],
        ["prompt", "--request", str(tmp / "missing.json")],
        ["prompt", "--request", str(tmp)],
        ["prompt", "--req", str(tmp / "p_string.json"), "--tok"],
        ["prompt", "--request", str(tmp / "p_string.json"), "extra"],
    ]
    return argvs


COMPLETIONS = {
    "good": "<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>final<|message|>Hi é<|return|>",
    "newline": "<|channel|>final<|message|>Hi<|return|>\n",
    "crlf": "<|channel|>final<|message|>a\r\nb<|end|>",
    "glitch": "hello<|start|>assistant assistant<|channel|>final<|channel|>x<|message|>ok<|end|>junk",
    "call": "<|channel|>commentary to=get_weather <|constrain|>json<|message|>{}<|call|>",
    "header_word": "<|channel|>final json extra<|message|>x<|end|>",
    "stripped": "analysisThinking.assistantfinalAnswer.",
    "plain": "Just text 🙂",
    "empty": "",
    "cut": "<|channel|>final<|message|>half",
    # issue 8's classes
    "junk_header": "Sure thing<|channel|>––final.<|message|>x<|end|>",
    "glued_role": "<|channel|>analysis<|message|>a<|end|>"
    "<|start|>assistantassistant<|channel|>final<|message|>b<|return|>",
    "headerless": "The answer is 4.<|return|>",
    "after_end": "<|channel|>analysis<|message|>a<|end|>\nThe answer.",
    "stripped_call": 'analysisNeed it.assistantcommentary to=functions.get_weatherjson{"city":"Oslo"}',
    "bom": "\ufeff<|channel|>final<|message|>hi<|return|>",
    "two_calls": '<|channel|>commentary to=functions.get_weather json<|message|>{"city":"A"}<|call|>'
    '<|start|>assistant<|channel|>commentary to=get_weather json<|message|>{"town":"B"}<|call|>',
    "invented": "<|channel|>commentary to=functions.get_weather json<|message|>{}<|call|>"
    "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny<|end|>",
    "json_spelling": '<|channel|>commentary to=functions.get_weather json<|message|>{"city":"<|end|>"}<|call|>',
    "empty_args": "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|><|call|>",
    "builtin": '<|channel|>analysis to=browser.search code<|message|>{"query":"x"}<|call|>',
    "open_call": '<|channel|>commentary to=functions.get_weather json<|message|>{"city":"Ber',
}
TOKEN_FILES = {
    "tokens": "[200005, 17196, 200008, 12194, 200007]",
    "tokens_bad": "[1, true]",
    "tokens_float": "[1.5]",
    "tokens_obj": '{"a": 1}',
    "tokens_invalid": "[200005, 17196, 200008, 999999999, 200007]",
    "tokens_json": "[1, 2",
    "tokens_nan": "[1, NaN]",
    "tokens_deep": "[" * 70 + "]" * 70,
    "tokens_bigint": "[200005, 17196, 200008, 123456789012345678901234567890]",
}
BAD_REQUESTS = {
    "req_ref": {"input": [{"type": "item_reference", "id": "msg_1"}]},
    "req_tool": {"tools": [{"type": 5}]},
    "req_effort": {"input": "hi", "reasoning": {"effort": "xhigh"}},
    "req_image": {
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]
    },
    "req_list": [],
    "req_union": {"input": [{"type": "message", "role": "user", "content": 5}]},
    "req_role": {"input": [{"type": "message", "role": [], "content": "x"}]},
    "req_untyped": {"input": [{"role": "usr", "content": "x"}]},
    "req_sampled": {"input": "hi", "temperature": 0.5},
    "req_seed": {"input": "hi", "seed": 3},
    "req_unknown": {"input": "hi", "users": "u"},
    "req_surrogate": {"input": "a\ud800"},
    "req_deep": {"input": "hi", "metadata": nested(70, lambda inner: {"k": inner}, {})},
    "req_schema": {"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {"a": float("nan")}}]},
}
GOOD_REQUESTS = {
    "req_budget": {"input": "hi", "max_output_tokens": 16},
    "req_stream": {"input": "hi", "stream": True},
}
ISSUE8_CLI_REQUESTS = {f"req_issue8_{i}": json.loads(text) for i, text in enumerate(ISSUE8_REQUESTS)}


def _parse_and_respond_cases(tmp: Path) -> list[list[str]]:
    argvs: list[list[str]] = [["parse"], ["parse", "-h"], ["respond"], ["respond", "-h"], ["respond", "--request", "x"]]
    for name, body in COMPLETIONS.items():
        path = str(tmp / f"{name}.txt")
        Path(path).write_text(body, encoding="utf-8", newline="")
        argvs += [
            ["parse", path],
            ["parse", path, "--mode", "lenient", "--events"],
            ["parse", path, "--mode=lenient", "--role", "none", "--tool", "get_weather", "--tool", "f"],
        ]
    for name, body in TOKEN_FILES.items():
        path = str(tmp / f"{name}.json")
        Path(path).write_text(body, encoding="utf-8")
        argvs += [["parse", path, "--tokens"], ["parse", path, "--tokens", "--mode", "lenient", "--events"]]
    argvs += [
        ["parse", str(tmp / "missing.txt")],
        ["parse", str(tmp)],
        ["parse", str(tmp / "good.txt"), "--mode", "loose"],
        ["parse", str(tmp / "good.txt"), "--role", "bot"],
        ["parse", str(tmp / "good.txt"), "--tool"],
    ]
    cases = [*BRIDGE_CASES, ROOT / "examples" / "responses"]
    for case in cases:
        base = ["respond", "--request", str(case / "request.json"), "--completion", str(case / "completion.txt")]
        argvs += [
            [*base, "--fixed-ids"],
            [*base, "--fixed-ids", "--stream"],
            [*base, "--fixed-ids", "--stream", "--reasoning-events", "openai"],
            [*base, "--fixed-ids", "--chat"],
            [*base, "--fixed-ids", "--chat", "--stream"],
        ]
    request = str(ROOT / "examples" / "responses" / "request.json")
    for name in COMPLETIONS:
        argvs.append(["respond", "--request", request, "--completion", str(tmp / f"{name}.txt"), "--fixed-ids"])
    for name in TOKEN_FILES:
        argvs.append(
            ["respond", "--request", request, "--completion", str(tmp / f"{name}.json"), "--tokens", "--fixed-ids"]
        )
    for name, raw in BAD_REQUESTS.items():
        path = str(tmp / f"{name}.json")
        Path(path).write_text(json.dumps(raw), encoding="utf-8")
        argvs.append(["respond", "--request", path, "--completion", str(tmp / "good.txt")])
    long_text = (
        "<|channel|>analysis<|message|>"
        + "thinking hard " * 40
        + "<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>"
    )
    Path(tmp / "long.txt").write_text(long_text, encoding="utf-8")
    for name, raw in GOOD_REQUESTS.items():
        path = str(tmp / f"{name}.json")
        Path(path).write_text(json.dumps(raw), encoding="utf-8")
        for completion in ("good.txt", "long.txt", "cut.txt"):
            base = ["respond", "--request", path, "--completion", str(tmp / completion), "--fixed-ids"]
            argvs += [base, [*base, "--chat"]]
    for name, raw in ISSUE8_CLI_REQUESTS.items():  # strict tool, one call only, at most two calls
        path = str(tmp / f"{name}.json")
        Path(path).write_text(json.dumps(raw), encoding="utf-8")
        for completion in ("two_calls", "invented", "empty_args", "stripped_call", "open_call", "glued_role"):
            base = ["respond", "--request", path, "--completion", str(tmp / f"{completion}.txt"), "--fixed-ids"]
            argvs += [base, [*base, "--chat"], [*base, "--stream", "--finish", "length"], [*base, "--finish", "stop"]]
    for finish in ("stop", "length", "eos"):
        base = ["respond", "--request", request, "--completion", str(tmp / "open_call.txt"), "--fixed-ids"]
        argvs += [[*base, "--finish", finish], [*base, "--chat", "--stream", f"--finish={finish}"]]
    tokens = ["--completion", str(tmp / "tokens.json"), "--tokens", "--finish", "stop", "--fixed-ids"]
    argvs.append(["respond", "--request", request, *tokens])
    (tmp / "bad_utf8.txt").write_bytes(b"<|channel|>final<|message|>a\xe2\x28b<|end|>")
    (tmp / "bad_utf8.json").write_bytes(b'\xff{"messages": []}')
    argvs += [
        ["parse", str(tmp / "bad_utf8.txt")],
        ["render", str(tmp / "bad_utf8.json")],
        ["respond", "--request", str(tmp / "bad_utf8.json"), "--completion", str(tmp / "good.txt")],
        ["respond", "--request", request, "--completion", str(tmp / "bad_utf8.txt")],
        ["respond", "--request", "-", "--completion", "-"],
        ["respond", "--request", str(tmp / "missing.json"), "--completion", str(tmp / "good.txt")],
        ["respond", "--request", str(tmp), "--completion", str(tmp / "good.txt")],
        ["respond", "--request", str(tmp / "tokens_json.json"), "--completion", str(tmp / "good.txt")],
        ["respond", "--request", request, "--completion", str(tmp / "missing.txt")],
        ["respond", "--request", request, "--completion", str(tmp / "good.txt"), "--reasoning-events", "x"],
        ["respond", "--req", request, "--comp", str(tmp / "good.txt"), "--fixed-ids", "--stream"],
    ]
    return argvs


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _example_request() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(_text(ROOT / "examples" / "responses" / "request.json"))
    return loaded


def _tables() -> Any:
    import test_typescript  # noqa: PLC0415 (the requests, completions and items the property tests draw from)

    return test_typescript


def _request(name: str, raw: Any) -> Case:
    """A request case; the folder (prompt/ or request_error/) is chosen by what the request gives."""
    return name, {"op": "request", "body": json.dumps(raw)}


def request_cases() -> Iterator[Case]:
    t = _tables()
    for path in sorted((ROOT / "tests" / "bridge").glob("*/request.json")):
        yield _request(f"bridge-{path.parent.name}", json.loads(_text(path)))
    example = _example_request()
    yield _request("example", example)
    for i, text in enumerate(t.ISSUE8_REQUESTS):
        yield _request(f"issue8-{i}", json.loads(text))
    for name, raw in {**PROMPT_REQUESTS, **BAD_REQUESTS, **GOOD_REQUESTS}.items():
        yield _request(f"cli-{_slug(name)}", raw)
    user = {"type": "message", "role": "user", "content": "Hi"}
    for i, item in enumerate(t.ITEMS.elements):
        yield _request(f"item-{i:02d}", {"model": "m", "input": [user, item]})
    for i, other in enumerate(t.OTHER_TOOLS.elements):
        yield _request(f"other-tool-{i}", {"model": "m", "input": "hi", "tools": [t.WEATHER_TOOL, other]})
    values = list(t.VALUES.elements)
    for i, field in enumerate(t.FIELDS):
        for j in (0, 1):
            value = values[(i * 7 + j * 13) % len(values)]
            yield _request(f"field-{_slug(field)}-{j}", {**example, field: value})
    yield from bad_request_tables(example)
    yield _request(
        "clients-example",
        {
            "model": "m",
            "input": [{"role": "developer", "content": "d"}, {"role": "user", "content": "hi"}],
            "tools": [
                t.WEATHER_TOOL,
                {"type": "namespace", "name": "agents", "tools": [t.WEATHER_TOOL]},
                {"type": "web_search"},
            ],
            "tool_choice": {"type": "function", "name": "agents.get_weather"},
            "client_metadata": {"a": "b"},
            "user": "u",
            "prompt_cache_key": "k",
        },
    )
    yield _request(
        "json-schema-no-name", {"model": "m", "input": "hi", "text": {"format": {"type": "json_schema", "schema": {}}}}
    )


def _params(function: Any) -> list[tuple[Any, ...]]:
    values: list[Any] = function.pytestmark[0].args[1]
    return [v if isinstance(v, tuple) else (v,) for v in values]


def bad_request_tables(example: dict[str, Any]) -> Iterator[Case]:
    import test_bad_requests as b  # noqa: PLC0415

    for i, (item, *_) in enumerate(_params(b.test_an_unhashable_tag_is_a_400_not_a_type_error)):
        yield _request(f"unhashable-tag-{i}", {"input": [item]})
    for i, (raw, *_) in enumerate(_params(b.test_a_lone_surrogate_in_any_string_is_refused_by_name)):
        yield _request(f"lone-surrogate-{i}", raw)
    for levels in (31, 32, 127):
        yield _request(f"schema-depth-{levels}", b._with_tool_schema(b._nested_schema(levels)))
    for i, (item, *_) in enumerate(_params(b.test_input_errors_name_the_real_path_and_what_was_expected)):
        yield _request(f"input-path-{i}", {"input": [item]})
    for i, (raw, *_) in enumerate(_params(b.test_other_fields_name_their_path)):
        yield _request(f"field-path-{i}", raw)
    for i, (extra, *_) in enumerate(_params(b.test_a_field_nobody_honours_is_a_400_naming_it)):
        yield _request(f"not-honoured-{i}-{_slug(next(iter(extra)))}", {**example, **extra})
    for i, (neutral, *_) in enumerate(_params(b.test_a_value_that_asks_for_nothing_is_accepted)):
        yield _request(f"neutral-{i}-{_slug(next(iter(neutral)))}", {**example, **neutral})


def _corpus_cases() -> list[Any]:
    import corpus_tool  # noqa: PLC0415

    return list(corpus_tool.load_all())


def parse_cases() -> Iterator[Case]:
    """The reference API's parser on rendered conversations (strict and not) and on the bridge's completions."""
    encoding = ops.load_encoding()
    shared = ROOT.parent / "shared" / "fixtures" / "harmony"
    reference = json.loads(_text(shared / "reference" / "cases.json"))
    for i, c in enumerate(reference):
        if c["function"] != "render_conversation":
            continue
        tokens = c["expected_tokens"]
        for strict in (True, False):
            yield (
                f"parse/reference-{i:02d}-{'strict' if strict else 'lenient'}",
                {"op": "parse", "tokens": tokens, "role": None, "strict": strict},
            )  # noqa: E501
    for name, text in COMPLETIONS.items():
        tokens = encoding.encode(text, allowed_special="all")
        for strict in (True, False):
            yield (
                f"parse/completion-{_slug(name)}-{'strict' if strict else 'lenient'}",
                {"op": "parse", "tokens": tokens, "role": "assistant", "strict": strict},
            )  # noqa: E501
    for name, case in render_cases():
        if not name.startswith("render/drawn-"):
            continue
        convo = Conversation.from_json(json.dumps(case["conversation"]))
        try:
            tokens = encoding.render_conversation(convo, RenderConversationConfig(auto_drop_analysis=False))
        except Exception:  # noqa: BLE001 (a conversation the renderer refuses has no tokens to parse)
            continue
        cut = tokens[2 : max(3, len(tokens) - 3)]  # as if the prompt ended with <|start|>assistant, and cut short
        yield f"parse/{name.split('/')[1]}-whole", {"op": "parse", "tokens": tokens, "role": None, "strict": True}
        yield f"parse/{name.split('/')[1]}-cut", {"op": "parse", "tokens": cut, "role": "assistant", "strict": False}


def stream_cases() -> Iterator[Case]:
    """The reference API's streaming parser, token by token, on the CLI's completions (strict and not)."""
    for name, case in parse_cases():
        if name.startswith("parse/completion-"):
            yield name.replace("parse/", "stream/", 1), {**case, "op": "stream"}


def events_cases() -> Iterator[Case]:
    for c in _corpus_cases():
        args = c.parse_args()
        base = f"events/corpus-{c.file.removesuffix('.txt')}-{_slug(c.name)}"
        yield base, _events([c.input], args["role"], args["mode"], args["tools"])
        yield f"{base}-chunked", _events(_chunks(c.input, 3), args["role"], args["mode"], args["tools"])
    for c in _jsonl(ROOT / "tests" / "peers" / "cases.jsonl"):
        yield f"events/peer-{_slug(c['id'])}", _events([c["completion"]], c["role"], "lenient", c["tools"])
    for i, c in enumerate(_jsonl(ROOT / "tests" / "realworld" / "completions.jsonl")):
        chunks = _chunks(c["completion"], 7) if i % 2 else [c["completion"]]
        more = {"stop_at_turn_end": True} if i % 3 == 0 else {}
        yield f"events/realworld-{_slug(c['id'])}", _events(chunks, c["role"], "lenient", c["tools"], **more)
        if "tokens" in c:
            yield f"events/realworld-{_slug(c['id'])}-tokens", _events([c["tokens"]], c["role"], "lenient", c["tools"])
    for name, text in COMPLETIONS.items():
        for mode in ("strict", "lenient"):
            yield f"events/completion-{_slug(name)}-{mode}", _events([text], "assistant", mode, ["get_weather"])
        tokens = [[token] for token in _tokens(text)]  # token ids, one a chunk
        yield f"events/completion-{_slug(name)}-tokens", _events(tokens, "assistant", "lenient", ["get_weather"])
    for i, text in enumerate(HEADERS):
        yield f"events/header-{i}", _events(_chunks(text, 1), "assistant", "lenient", None)
    yield (
        "events/stop-after-tool-call",
        _events([COMPLETIONS["two_calls"]], "assistant", "lenient", ["get_weather"], stop_after_tool_call=True),
    )  # noqa: E501
    yield (
        "events/max-tool-calls-1",
        _events([COMPLETIONS["two_calls"]], "assistant", "lenient", ["get_weather"], max_tool_calls=1),
    )  # noqa: E501
    yield (
        "events/stop-at-turn-end-false",
        _events([COMPLETIONS["glitch"]], "assistant", "lenient", None, stop_at_turn_end=False),
    )  # noqa: E501


# Inputs written for the rules nothing above reaches (each case's events show its `recovered` rule).
RULE_INPUTS = {
    "empty-channel": "<|start|>assistant<|channel|><|message|>hi<|end|>",
    "extra-stop": "<|channel|>final<|message|>a<|end|><|end|><|start|>assistant<|channel|>final<|message|>b<|end|>",
    "extra-stop-outside": "<|return|><|start|>assistant<|channel|>final<|message|>b<|return|>",
    "missing-channel-marker": "<|start|>assistant final<|message|>x<|end|>",
    "missing-channel-marker-commentary": "<|start|>assistant commentary to=functions.f<|message|>{}<|call|>",
    "stray-control": "<|channel|>final<|message|>a<|end|><|message|><|start|>assistant<|channel|>final<|message|>b<|end|>",  # noqa: E501
    "stray-constrain": "<|channel|>final<|message|>a<|end|><|constrain|><|start|>assistant<|channel|>final<|message|>b<|end|>",  # noqa: E501
}


def rule_cases() -> Iterator[Case]:
    for name, text in RULE_INPUTS.items():
        for mode in ("lenient", "strict"):
            yield f"events/rule-{name}-{mode}", _events([text], "assistant", mode, ["f"], stop_at_turn_end=False)
    final = _tokens("<|channel|>final<|message|>ok<|return|>")
    for mode in ("lenient", "strict"):
        yield (
            f"events/rule-invalid-token-{mode}",
            _events([[*final[:3], 999_999_999, *final[3:]]], "assistant", mode, None),
        )  # noqa: E501


def bridge_cases() -> Iterator[Case]:
    t = _tables()
    example = _example_request()
    folders = sorted(p.parent for p in (ROOT / "tests" / "bridge").glob("*/request.json"))
    for folder in [*folders, ROOT / "examples" / "responses"]:
        request = json.loads(_text(folder / "request.json"))
        completion = _text(folder / "completion.txt")
        name = f"bridge/{_slug(folder.name)}"
        yield name, _bridge(request, [completion])
        yield f"{name}-chunked-openai", _bridge(request, _chunks(completion, 5), reasoning_names="openai")
        yield f"{name}-tokens-stop", _bridge(request, _tokens(completion), stopped=True, strict=True)
    for name, text in COMPLETIONS.items():
        yield f"bridge/completion-{_slug(name)}", _bridge(example, [text])
        yield (
            f"bridge/completion-{_slug(name)}-length",
            _bridge(example, _chunks(text, 4), stopped=False, include_usage=False),
        )
        yield f"bridge/completion-{_slug(name)}-tokens", _bridge(example, _tokens(text), stopped=True, strict=True)
    for i, request_text in enumerate(t.ISSUE8_REQUESTS):
        for name in ("two_calls", "invented", "empty_args", "stripped_call", "open_call", "glued_role"):
            yield (
                f"bridge/issue8-{i}-{_slug(name)}",
                _bridge(json.loads(request_text), [COMPLETIONS[name]], stopped=True),
            )  # noqa: E501
    for c in _jsonl(ROOT / "tests" / "peers" / "cases.jsonl"):
        tools = [{"type": "function", **tool} for tool in c.get("tool_defs", [])]
        request = {"model": "gpt-oss", "tools": tools} if tools else {"model": "gpt-oss"}
        yield (
            f"bridge/peer-{_slug(c['id'])}",
            _bridge(request, [c["completion"]], stopped=c["engine_stop"], role=c["role"], tools=c["tools"]),
        )  # noqa: E501
    for i, c in enumerate(_jsonl(ROOT / "tests" / "realworld" / "completions.jsonl")):
        if i % 3:
            continue
        tools = [{"type": "function", **tool} for tool in c.get("tool_defs", [])]
        request = {"model": "gpt-oss", "tools": tools} if tools else {"model": "gpt-oss"}
        yield (
            f"bridge/realworld-{_slug(c['id'])}",
            _bridge(request, _chunks(c["completion"], 7), stopped=c["engine_stop"], role=c["role"], tools=c["tools"]),
        )  # noqa: E501
    for i, text in enumerate(HEADERS):
        yield f"bridge/header-{i}", _bridge({"model": "gpt-oss", "input": "Hi"}, [text], include_usage=False)


def _tokens(text: str) -> list[int]:
    tokens: list[int] = ops.load_encoding().encode(text, allowed_special="all")
    return tokens


def arguments_cases() -> Iterator[Case]:
    t = _tables()
    texts = ["", "{", '{"city": "Paris"', "city=Paris", "[1, 2,]", '{"a": NaN}', "1e400", "{}x", "{}", "[]", "5"]
    texts += ['{"city": "Paris"}', '{"city": 5, "unit": "k"}', '{"town": "x"}', '{"city": "Paris", "days": 3}']
    texts += ['{"city": "Pa", "days": 0, "ratio": 2, "tags": ["a", "a"], "pair": [1, "x", 3], "mode": "slow"}']
    texts += ['{"city": "lowercase", "days": 1.5, "either": 2, "one": 2.5, "not_null": null, "when": "ab"}']
    texts += ['{"city": "Ab", "days": 2, "has": [1, 2, 3], "names": {"abcd": 1}, "nested": {}, "loose": {"y": 1}}']
    for i, schema in enumerate(t.SCHEMAS):
        for j, text in enumerate(texts):
            if i in (2, 3) and j % 3:
                continue
            yield f"arguments/schema{i}-{j:02d}", {"op": "arguments", "arguments": text, "schema": schema}


def _cli_case(argv: list[str], tmp: Path) -> dict[str, Any] | None:
    """`argv` with its files carried in the case: a path in `tmp` becomes `{dir}/name`, a repository file is
    copied in under a name of its own; None for standard input, which a case cannot hold."""
    case: dict[str, Any] = {"op": "cli", "argv": [], "files": {}, "binary_files": {}}
    if "-" in argv:
        return None
    for arg in argv:
        path = Path(arg)
        if arg == str(tmp):
            case["argv"].append("{dir}")
            continue
        if arg.startswith(str(tmp) + "/"):
            name = arg[len(str(tmp)) + 1 :]
        elif arg.startswith(str(ROOT) + "/"):
            name = f"{path.parent.name}-{path.name}"  # tests/bridge/tools/request.json: tools-request.json
        else:
            case["argv"].append(arg)
            continue
        case["argv"].append("{dir}/" + name)
        if path.is_file():
            data = path.read_bytes()
            try:
                case["files"][name] = data.decode("utf-8")
            except UnicodeDecodeError:
                case["binary_files"][name] = base64.b64encode(data).decode("ascii")
    for key in ("files", "binary_files"):
        if not case[key]:
            del case[key]
    return case


def cli_cases() -> Iterator[Case]:
    encoding = ops.load_encoding()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        argvs = _cases(tmp) + _parse_and_respond_cases(tmp)
        seen: set[str] = set()
        for argv in argvs:
            case = _cli_case(argv, tmp)
            if case is None:
                continue
            try:
                ops.run(encoding, case)
            except Exception:  # noqa: BLE001 (the Python CLI crashes on these: a bug to fix, not a case to keep)
                print(f"skipped, the Python CLI crashes: {case['argv']}", file=sys.stderr)
                continue
            words = [a.removeprefix("{dir}/") for a in case["argv"] if a not in ("--request", "--completion")]
            stem = _slug(" ".join(words))[:56].strip("-") or "no-arguments"
            name, count = stem, 1
            while name in seen:
                count += 1
                name = f"{stem}-{count}"
            seen.add(name)
            yield f"cli/{name}", case


SEAL_KEY = bytes(range(1, 33))


def sealed_cases() -> Iterator[Case]:
    """Reasoning sealed once (the nonce is random, so the blobs are data), opened with the key, changed or not."""
    from harmony_responses.bridge.encrypted import ReasoningSeal  # noqa: PLC0415

    seal = ReasoningSeal(SEAL_KEY)
    user = {"type": "message", "role": "user", "content": "Hi"}
    blob = seal.seal("Need the weather. é🙂", "analysis", None)
    coded = seal.seal('{"q": 1}', "analysis", "json")
    body = blob.split(".", 1)[1]
    flipped = f"{blob.split('.', 1)[0]}.{body[:9]}{'A' if body[9] != 'A' else 'B'}{body[10:]}"
    blobs = {
        "plain": (blob, None),
        "content-type": (coded, None),
        "same-content": (blob, "Need the weather. é🙂"),
        "differs": (blob, "Something else."),
        "flipped": (flipped, None),
        "foreign": (ReasoningSeal(bytes(32)).seal("x", "analysis", None), None),
        "cut": (blob[:-2], None),
        "not-a-blob": ("hello", None),
    }
    for name, (sealed, said) in blobs.items():
        item: dict[str, Any] = {"type": "reasoning", "summary": [], "encrypted_content": sealed}
        if said is not None:
            item["content"] = [{"type": "reasoning_text", "text": said}]
        raw = {"model": "m", "input": [user, item, {**user, "content": "More"}]}
        name_, case = _request(f"sealed-{name}", raw)
        yield name_, {**case, "reasoning_key": SEAL_KEY.hex()}
        if name == "plain":
            yield _request("sealed-no-key", raw)


def header_back_cases() -> Iterator[Case]:
    """The items of a response whose headers lenient parsing keeps, sent back as input: the prompt they give."""
    encoding = ops.load_encoding()
    user = {"type": "message", "role": "user", "content": "Hi"}
    for i, text in enumerate(HEADERS):
        output = ops.run(encoding, _bridge({"model": "gpt-oss", "input": "Hi"}, [text]))["response"]["output"]
        body = {"model": "gpt-oss", "input": [user, *output, {**user, "content": "More"}]}
        yield _request(f"header-{i}-back", body)


SAFETY_TEXTS = {
    "plain": "Just text, nothing to see.",
    "control": "before <|start|>assistant<|channel|>final<|message|>after",
    "reserved": "a <|reserved_200018|> b",
    "half": "<| and |> apart",
    "glued": "assistantfinal The answer.",
    "recipient": "call to=functions.get_x now",
    "code-span": "`<|end|>` inside code, <|end|> outside",
    "fence": "```\n<|call|>\n```\nthen <|call|>",
    "word-joiner": "<\u2060|end|\u2060>",
    "escaped": "<\u2060|start|\u2060>assistant",
    "header-words": "assistant commentary json analysis",
    "newlines": "<|return|>\n<|return|>\n",
    "braces": '{"a": "<|message|>"}',
    "astral": "🙂 <|end|> é",
    "astral-glued": "🙂🙂 assistantcommentary to=functions.f json",
    "empty": "",
}
NAMESPACE_TOOLS = {
    "chat-list": (
        "functions",
        '[{"type": "function", "function": {"name": "get_weather", "description": "Weather.\\nNow.", '
        '"parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["a", "b"], '
        '"default": "a"}}, "required": ["city"]}}}]',
        None,
    ),
    "flat": ("functions", '[{"type": "function", "name": "f", "description": "d", "parameters": {}}]', "Tools."),
    "floats": (
        "ns",
        '[{"name": "f", "parameters": {"type": "object", "properties": {"2": {"type": "number", "default": 1.0}, '
        '"1": {"type": "integer", "default": 12345678901234567890}}}}]',
        "Tools\r\nhere",
    ),
    "no-params": ("browser", '[{"name": "search"}, {"name": "open", "description": "Open a page."}]', None),
    "empty": ("empty", "[]", "Nothing here."),
    "nested": (
        "functions",
        '[{"name": "g", "parameters": {"type": "object", "properties": {"o": {"type": "object", "properties": '
        '{"x": {"type": "array", "items": {"type": "string"}}}}, "u": {"anyOf": [{"type": "string"}, '
        '{"type": "null"}]}}, "required": ["o"]}}]',
        None,
    ),
}


def small_op_cases() -> Iterator[Case]:
    for name, text in SAFETY_TEXTS.items():
        yield f"safety/{name}", {"op": "safety", "text": json.loads(f'"{text}"') if "\\u" in text else text}
    for name, (space, tools, description) in NAMESPACE_TOOLS.items():
        yield f"namespace/{name}", {"op": "namespace", "name": space, "tools": tools, "description": description}


def all_cases() -> Iterator[Case]:
    yield from render_cases()
    yield from parse_cases()
    yield from stream_cases()
    yield from events_cases()
    yield from rule_cases()
    yield from bridge_cases()
    yield from arguments_cases()
    yield from cli_cases()
    yield from small_op_cases()
    encoding = ops.load_encoding()
    for name, case in [*request_cases(), *header_back_cases(), *sealed_cases()]:
        kind = "request_error" if "error" in ops.run(encoding, case) else "prompt"
        yield f"{kind}/{name}", case


def write_inputs(force: bool) -> list[Path]:
    written: list[Path] = []
    seen: set[str] = set()
    for name, case in all_cases():
        if name in seen:
            raise SystemExit(f"two cases are named {name}")
        seen.add(name)
        folder = ops.CORPUS / name
        if folder.exists() and not force:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ops.INPUT).write_text(ops.dump_json(case), encoding="utf-8")
        written.append(folder)
    return written
