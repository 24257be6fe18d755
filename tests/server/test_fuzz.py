"""Schema-driven HTTP fuzz: request bodies drawn from the endpoints' schemas, some of them broken on purpose.

Responses bodies come from `CreateResponseBody` in the published OpenAPI document; Chat Completions
bodies from the JSON Schema of the server's own `ChatCompletionRequest`. A share of them get a value
replaced by arbitrary JSON. Every answer must be a 200 whose body (or every streamed event) validates,
or a 400 with the spec's error body: never a 500. `HARMONY_RESPONSES_FUZZ_EXAMPLES` sets the size.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from responses_checker import assert_valid_response, check_stream, document

from harmony_responses.server.chat import ChatCompletionRequest

from serverkit import Server, sse_events

EXAMPLES = int(os.environ.get("HARMONY_RESPONSES_FUZZ_EXAMPLES", "80"))
MAX_DEPTH = 6

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def from_schema(schema: Any, root: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """A strategy for values of a JSON Schema (the subset the two documents use), refs resolved in `root`."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return JSON
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return st.deferred(lambda: from_schema(target, root, depth + 1))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(s, root, depth + 1) for s in schema[key]])
    if "allOf" in schema:
        return from_schema(schema["allOf"][0], root, depth + 1)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, root, depth) for k in kind])
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = [k for k in schema.get("required", []) if k in props]
        return st.fixed_dictionaries(
            {k: from_schema(props[k], root, depth + 1) for k in required},
            optional={k: from_schema(v, root, depth + 1) for k, v in props.items() if k not in required},
        )
    if kind == "array":
        return st.lists(from_schema(schema.get("items"), root, depth + 1), max_size=3)
    if kind == "string":
        return st.text(max_size=min(schema.get("maxLength", 24), 24))
    if kind == "integer":
        return st.integers(schema.get("minimum", -5), schema.get("maximum", 5000))
    if kind == "number":
        return st.floats(schema.get("minimum", -3.0), schema.get("maximum", 3.0), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return JSON


def broken(body: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """Bodies from the schema, or the same with one top-level value swapped for arbitrary JSON."""

    @st.composite
    def swap(draw: st.DrawFn) -> Any:
        value = draw(body)
        if bool(value) and draw(st.booleans()):  # bool(): else mypy types draw() like the dict left of `and`
            key = draw(st.sampled_from(sorted(value)))
            value[key] = draw(JSON)
        return value

    return swap()


def responses_bodies() -> st.SearchStrategy[Any]:
    doc = document()
    return broken(from_schema(doc["components"]["schemas"]["CreateResponseBody"], doc))


def chat_bodies() -> st.SearchStrategy[Any]:
    schema = ChatCompletionRequest.model_json_schema()
    return broken(from_schema(schema, schema))


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    proc = Server("--engine", "demo", "--media", "placeholder", "--default-max-output-tokens", "48")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def client(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def check_error(response: httpx.Response) -> None:
    assert response.status_code == 400, (response.status_code, response.text[:500])
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and isinstance(error["message"], str) and error["message"]


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@FUZZ
@given(body=responses_bodies())
def test_fuzz_responses(client: httpx.Client, body: Any) -> None:
    response = client.post("/v1/responses", json=body)
    event(f"HTTP {response.status_code}")
    if response.status_code != 200:
        check_error(response)
        return
    if isinstance(body, dict) and body.get("stream") is True:
        assert response.text.endswith("data: [DONE]\n\n")
        check_stream(sse_events(response.text))
    else:
        assert_valid_response(response.json())


@FUZZ
@given(body=chat_bodies())
def test_fuzz_chat_completions(client: httpx.Client, body: Any) -> None:
    response = client.post("/v1/chat/completions", json=body)
    event(f"HTTP {response.status_code}")
    if response.status_code != 200:
        check_error(response)
        return
    if isinstance(body, dict) and body.get("stream") is True:
        assert response.text.endswith("data: [DONE]\n\n")
    else:
        assert response.json()["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
