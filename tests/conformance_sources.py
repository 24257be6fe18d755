"""Where the conformance corpus's inputs came from: `conformance_tool.py import` writes them once, as data.

Each source yields (case folder under conformance/, input.json). The inputs are the repository's own: the
grammar corpus (tests/corpus), the peers' and real-world completions (tests/peers, tests/realworld), the bridge
cases (tests/bridge, examples/), the reference's render fixtures (../shared, copied in), the requests and
completions tests/test_typescript.py draws from, and the bad-request tables of tests/test_bad_requests.py.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import conformance_ops as ops  # noqa: E402

from harmony_responses import Conversation, RenderConversationConfig, load_harmony_encoding  # noqa: E402
from harmony_responses._tables import spec  # noqa: E402

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
    for name, raw in {**t.PROMPT_REQUESTS, **t.BAD_REQUESTS, **t.GOOD_REQUESTS}.items():
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
    encoding = load_harmony_encoding(spec.ENCODING_NAME)
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
    for name, text in _tables().COMPLETIONS.items():
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
    t = _tables()
    for name, text in t.COMPLETIONS.items():
        for mode in ("strict", "lenient"):
            yield f"events/completion-{_slug(name)}-{mode}", _events([text], "assistant", mode, ["get_weather"])
    for i, text in enumerate(t.HEADERS):
        yield f"events/header-{i}", _events(_chunks(text, 1), "assistant", "lenient", None)
    yield (
        "events/stop-after-tool-call",
        _events([t.COMPLETIONS["two_calls"]], "assistant", "lenient", ["get_weather"], stop_after_tool_call=True),
    )  # noqa: E501
    yield (
        "events/max-tool-calls-1",
        _events([t.COMPLETIONS["two_calls"]], "assistant", "lenient", ["get_weather"], max_tool_calls=1),
    )  # noqa: E501
    yield (
        "events/stop-at-turn-end-false",
        _events([t.COMPLETIONS["glitch"]], "assistant", "lenient", None, stop_at_turn_end=False),
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
    for name, text in t.COMPLETIONS.items():
        yield f"bridge/completion-{_slug(name)}", _bridge(example, [text])
        yield (
            f"bridge/completion-{_slug(name)}-length",
            _bridge(example, _chunks(text, 4), stopped=False, include_usage=False),
        )  # noqa: E501
    for i, request_text in enumerate(t.ISSUE8_REQUESTS):
        for name in ("two_calls", "invented", "empty_args", "stripped_call", "open_call", "glued_role"):
            yield (
                f"bridge/issue8-{i}-{_slug(name)}",
                _bridge(json.loads(request_text), [t.COMPLETIONS[name]], stopped=True),
            )  # noqa: E501
    for c in _jsonl(ROOT / "tests" / "peers" / "cases.jsonl"):
        tools = [{"type": "function", **tool} for tool in c.get("tool_defs", [])]
        request = {"model": "gpt-oss", "tools": tools} if tools else {"model": "gpt-oss"}
        yield (
            f"bridge/peer-{_slug(c['id'])}",
            _bridge(request, [c["completion"]], stopped=c["engine_stop"], role=c["role"], tools=c["tools"]),
        )  # noqa: E501
    for i, c in enumerate(_jsonl(ROOT / "tests" / "realworld" / "completions.jsonl")):
        if i % 6:
            continue
        tools = [{"type": "function", **tool} for tool in c.get("tool_defs", [])]
        request = {"model": "gpt-oss", "tools": tools} if tools else {"model": "gpt-oss"}
        yield (
            f"bridge/realworld-{_slug(c['id'])}",
            _bridge(request, _chunks(c["completion"], 7), stopped=c["engine_stop"], role=c["role"], tools=c["tools"]),
        )  # noqa: E501
    for i, text in enumerate(t.HEADERS):
        yield f"bridge/header-{i}", _bridge({"model": "gpt-oss", "input": "Hi"}, [text], include_usage=False)


def _tokens(text: str) -> list[int]:
    tokens: list[int] = load_harmony_encoding(spec.ENCODING_NAME).encode(text, allowed_special="all")
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


def all_cases() -> Iterator[Case]:
    yield from render_cases()
    yield from parse_cases()
    yield from events_cases()
    yield from rule_cases()
    yield from bridge_cases()
    yield from arguments_cases()
    encoding = load_harmony_encoding(spec.ENCODING_NAME)
    for name, case in request_cases():
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
