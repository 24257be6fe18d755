"""The openai SDK's `code_interpreter` tool against `serve --engine demo --code-interpreter` (real bubblewrap kernels).

`responses.create(tools=[{"type": "code_interpreter", "container": {"type": "auto"}}])` completes a turn whose
`code_interpreter_call` the SDK parses as its own type, streamed and not, a second turn continues the same
container by `previous_response_id`, and the SDK's Containers API lists and reads the file the code wrote.
Everything the server sent through the recording proxy is checked against the schemas and their overrides.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from clientkit import Recorder
from openai import OpenAI
from openai.types.responses import ResponseCodeInterpreterToolCall
from responses_checker import assert_valid_event, assert_valid_response, check_stream
from services.bubblewrap import ensure_bwrap

from serverkit import Server

pytestmark = pytest.mark.clients

TOOLS = [{"type": "code_interpreter", "container": {"type": "auto"}}]


@pytest.fixture(scope="module")
def interpreter() -> Iterator[Server]:
    ensure_bwrap()
    proc = Server("--engine", "demo", "--code-interpreter")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def recorder(interpreter: Server) -> Iterator[Recorder]:
    recorder = Recorder(interpreter.url)
    try:
        yield recorder
        for exchange in recorder.exchanges:
            if exchange.events:
                for event in exchange.events:
                    assert_valid_event(event)
                check_stream(exchange.events)
            elif exchange.status == 200 and exchange.method == "POST" and exchange.path == "/v1/responses":
                assert_valid_response(exchange.response)
    finally:
        recorder.close()


def _client(recorder: Recorder) -> OpenAI:
    return OpenAI(base_url=recorder.url + "/v1", api_key="unused", max_retries=0)


def test_code_interpreter_completes_a_turn(recorder: Recorder) -> None:
    client = _client(recorder)
    first = client.responses.create(
        model="gpt-oss",
        input="Compute this with Python:\n```python\ntotal = sum(range(101))\ntotal\n```",
        tools=TOOLS,  # type: ignore[arg-type]
        include=["code_interpreter_call.outputs"],
    )
    assert first.status == "completed"
    call = next(item for item in first.output if item.type == "code_interpreter_call")
    assert isinstance(call, ResponseCodeInterpreterToolCall)
    assert call.status == "completed" and call.code is not None and "sum(range(101))" in call.code
    assert call.outputs is not None and call.outputs[0].type == "logs" and call.outputs[0].logs == "5050"
    assert "5050" in first.output_text

    second = client.responses.create(
        model="gpt-oss",
        input="And now:\n```python\nwith open('/mnt/data/total.txt', 'w') as f:\n    f.write(str(total * 2))\n```",
        tools=TOOLS,  # type: ignore[arg-type]
        previous_response_id=first.id,
    )
    again = next(item for item in second.output if item.type == "code_interpreter_call")
    assert isinstance(again, ResponseCodeInterpreterToolCall)
    assert again.container_id == call.container_id and again.status == "completed"
    files = client.containers.files.list(call.container_id)
    (written,) = [f for f in files.data if f.path == "/mnt/data/total.txt"]
    assert written.bytes == 5
    content = client.containers.files.content.retrieve(written.id, container_id=call.container_id)
    assert content.read() == b"10100"


def test_code_interpreter_streams(recorder: Recorder) -> None:
    client = _client(recorder)
    kinds: list[str] = []
    with client.responses.stream(
        model="gpt-oss",
        input="Run:\n```python\nprint('streamed', 2 ** 10)\n```",
        tools=TOOLS,  # type: ignore[arg-type]
    ) as stream:
        for event in stream:
            kinds.append(event.type)
        final = stream.get_final_response()
    assert "response.code_interpreter_call.interpreting" in kinds
    assert "response.code_interpreter_call_code.done" in kinds
    assert final.status == "completed" and "streamed 1024" in final.output_text
    call = next(item for item in final.output if item.type == "code_interpreter_call")
    assert isinstance(call, ResponseCodeInterpreterToolCall) and call.status == "completed"
