"""`parse_sse` on malformed and unusual streams (issue 9, item 13): WHATWG framing, and every failure an `SSEError`.

Each case raised `AttributeError`, `TypeError`, `RecursionError` or a pydantic error, dropped an event
silently, or refused standard framing before.
"""

from __future__ import annotations

import pytest

from harmony_responses import HarmonyEncoding
from harmony_responses.bridge import SSEError, parse_sse, stream_response, to_sse
from harmony_responses.types import StreamingEvent


@pytest.fixture(scope="module")
def wire(encoding: HarmonyEncoding) -> str:
    completion = [
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hi<|return|>"
    ]
    return "".join(to_sse(stream_response(completion, encoding)))


@pytest.fixture(scope="module")
def events(wire: str) -> list[StreamingEvent]:
    return parse_sse(wire)


def test_the_wire_reads_back(events: list[StreamingEvent]) -> None:
    assert events[0].type == "response.created" and events[-1].type == "response.completed"


@pytest.mark.parametrize(
    "bad",
    [
        "data: [1]\n\n",
        'data: {"type":[1]}\n\n',
        'data: {"type":{"a":1}}\n\n',
        "data: " + "[" * 5000 + "]" * 5000 + "\n\n",
        'data: {"a":' * 3000 + "1" + "}" * 3000 + "\n\n",
        'data: {"type":"response.output_text.delta"}\n\n',
        'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":[1]}}\n\n',
        'data: {"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"x"}}\n\n',
        'data: {"type":"no.such.event","sequence_number":0}\n\n',
        "data: 5\n\n",
        "data: NaN\n\n",
        'data: "\\ud800"\n\n',
        "data:\n\n",
    ],
)
def test_malformed_data_is_an_sse_error_naming_the_line(bad: str) -> None:
    with pytest.raises(SSEError) as caught:
        parse_sse("event: response.created\n" + bad)
    assert str(caught.value).startswith("line 2: ")


@pytest.mark.parametrize("ending", ["\r", "\r\n", "\n"])
def test_every_line_ending(wire: str, events: list[StreamingEvent], ending: str) -> None:
    assert parse_sse(wire.replace("\n", ending)) == events


def test_a_leading_bom_id_and_retry_fields_and_comments(wire: str, events: list[StreamingEvent]) -> None:
    decorated = wire.replace("event: ", ": keep-alive\nid: 42\nretry: 3000\nevent: ")
    assert parse_sse("\ufeff" + decorated) == events
    assert parse_sse([decorated[i : i + 7] for i in range(0, len(decorated), 7)]) == events  # any chunking


def test_a_field_without_colon_is_the_field_with_an_empty_value() -> None:
    with pytest.raises(SSEError, match="line 1: data: not valid JSON"):
        parse_sse("data\n\n")  # `data` alone is an empty data line, and empty is not an event


def test_a_final_event_with_no_blank_line_is_flagged_not_dropped(wire: str, events: list[StreamingEvent]) -> None:
    cut = wire[: wire.index("data: [DONE]")].rstrip("\n")  # the last event, its blank line missing
    with pytest.raises(SSEError, match="ends inside an event") as caught:
        parse_sse(cut)
    assert caught.value.events == events[:-1]  # what was read before is kept


def test_a_stream_cut_before_done_is_flagged(wire: str, events: list[StreamingEvent]) -> None:
    with pytest.raises(SSEError, match=r"ends before data: \[DONE\]") as caught:
        parse_sse(wire[: wire.index("data: [DONE]")])
    assert caught.value.events == events


def test_text_after_done_and_unknown_fields_are_flagged(wire: str) -> None:
    with pytest.raises(SSEError, match="after data: \\[DONE\\]"):
        parse_sse(wire + "event: response.created\ndata: {}\n\n")
    parse_sse(wire + "\n: a comment\n\n")  # blank lines and comments after [DONE] are harmless
    with pytest.raises(SSEError, match="line 1: not an SSE field"):
        parse_sse("hello: there\n\n" + wire)
    with pytest.raises(SSEError, match="line 1: retry expects a number"):
        parse_sse("retry: soon\n\n" + wire)
    with pytest.raises(SSEError, match='line 1: event "response.created" has no data'):
        parse_sse("event: response.created\n\n" + wire)
