"""openai SDK paths that need the server's help: input_items read as the SDK's own `ResponseInputMessageItem`,
responses.parse / responses.stream(text_format=...) / chat.completions.parse (structured outputs, h16c), and
background=True with polling, cancel and a resumed stream (h16b)."""

from __future__ import annotations

import time

import pytest
from clientkit import Recorder, proxy, server  # noqa: F401
from openai import OpenAI
from openai.types.responses import ResponseInputMessageItem
from pydantic import BaseModel

pytestmark = pytest.mark.clients


class City(BaseModel):
    city: str
    sunny: bool


def _client(proxy: Recorder) -> OpenAI:  # noqa: F811
    return OpenAI(base_url=proxy.url + "/v1", api_key="unused", max_retries=0)


def test_input_items_validate_as_the_sdks_type(proxy: Recorder) -> None:  # noqa: F811
    client = _client(proxy)
    response = client.responses.create(
        model="gpt-oss",
        input=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello there."},
            {"role": "user", "content": [{"type": "input_text", "text": "And again."}]},
        ],
        store=True,
    )
    page = client.responses.input_items.list(response.id)
    assert len(page.data) == 3
    for item in page.data:
        raw = item.model_dump()
        message = ResponseInputMessageItem.model_validate(raw)  # the SDK's own model, strictly
        assert message.status == "completed"
        assert [part.type for part in message.content] == ["input_text"]
    assert page.data[1].model_dump()["content"][0]["text"] == "Hello there."


def test_responses_parse(proxy: Recorder) -> None:  # noqa: F811
    parsed = _client(proxy).responses.parse(model="gpt-oss", input="A city, as JSON.", text_format=City)
    assert isinstance(parsed.output_parsed, City)


def test_responses_stream_with_text_format(proxy: Recorder) -> None:  # noqa: F811
    with _client(proxy).responses.stream(model="gpt-oss", input="A city, as JSON.", text_format=City) as stream:
        final = stream.get_final_response()
    assert isinstance(final.output_parsed, City)


def test_chat_completions_parse(proxy: Recorder) -> None:  # noqa: F811
    done = _client(proxy).chat.completions.parse(
        model="gpt-oss", messages=[{"role": "user", "content": "A city, as JSON."}], response_format=City
    )
    assert isinstance(done.choices[0].message.parsed, City)


def test_background_poll_cancel_and_resumed_stream(proxy: Recorder) -> None:  # noqa: F811
    client = _client(proxy)
    queued = client.responses.create(model="gpt-oss", input="Hello in the background.", background=True)
    assert queued.status in ("queued", "in_progress", "completed")
    deadline = time.monotonic() + 30
    polled = queued
    while polled.status in ("queued", "in_progress") and time.monotonic() < deadline:
        time.sleep(0.1)
        polled = client.responses.retrieve(queued.id)
    assert polled.status == "completed"
    other = client.responses.create(model="gpt-oss", input="Another one.", background=True)
    cancelled = client.responses.cancel(other.id)
    assert cancelled.status in ("cancelled", "completed")
    streamed = client.responses.create(model="gpt-oss", input="Stream me.", background=True, stream=True)
    first = next(iter(streamed))
    assert first.type == "response.created"
    resumed = client.responses.retrieve(first.response.id, stream=True, starting_after=first.sequence_number)
    kinds = [event.type for event in resumed]
    assert kinds[-1] == "response.completed"
