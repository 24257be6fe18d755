"""The typed path (`stream_response`, `to_sse`) made cheap without changing what it yields (issue 20).

Three shortcuts, each checked against the slow way it replaces: a delta event built from its item's
sample equals `model_construct`'s; a delta frame written from a template equals the serializer's; and
`to_sse` of a fresh `stream_response` (frames straight from the bridge) yields, frame for frame, what
framing each typed event yields.
"""

from __future__ import annotations

from typing import Any

import pytest

from harmony_responses import HarmonyEncoding
from harmony_responses.bridge import counting_ids, stream_response, to_sse
from harmony_responses.bridge.items import KINDS, _delta_event
from harmony_responses.bridge.sse import _frame, frame
from harmony_responses.types import StreamingEvent

TRICKY = ["", "plain", 'quote " and \\ backslash', "tab\tnew\nline\r", "\x00\x1f\x7f", "é ü — 日本 🙂", "</script>"]

COMPLETIONS = [
    "<|channel|>analysis<|message|>Think about it.<|end|><|start|>assistant<|channel|>final<|message|>Hi — "
    'there "friend"<|return|>',
    '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Zürich"}<|call|>',
    "<|channel|>final<|message|>cut by the budget",
    "junk before<|channel|>final<|message|>after junk<|return|>",
]


class _Item:
    id = "msg_1"
    output_index = 2


def _delta_classes() -> list[Any]:
    return sorted({k.delta for k in KINDS.values() if k.delta is not None}, key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", _delta_classes(), ids=lambda c: c.__name__)
def test_a_delta_built_from_its_sample_equals_model_construct(cls: Any) -> None:
    make = _delta_event(cls, _Item())  # type: ignore[arg-type]
    content = {"content_index": 0} if "content_index" in cls.model_fields else {}
    fields = {"type", "sequence_number", "delta", "item_id", "output_index", *content}
    kind = cls.model_fields["type"].default
    for n, text in enumerate(TRICKY):
        fast: Any = make(n, text)
        slow = cls.model_construct(set(fields), type=kind, sequence_number=n, delta=text, item_id="msg_1",
                                   output_index=2, **content)  # fmt: skip
        assert fast == slow and repr(fast) == repr(slow)
        assert fast.model_fields_set == slow.model_fields_set and fast.model_extra == slow.model_extra
        assert fast.model_dump_json() == slow.model_dump_json()
        fast.delta = "changed"  # each event is its own: changing one leaves the others alone
        again: Any = make(n, text)
        assert again.delta == text


@pytest.mark.parametrize("cls", _delta_classes(), ids=lambda c: c.__name__)
@pytest.mark.parametrize("names", ["spec", "openai"])
def test_a_delta_frame_from_its_template_equals_the_serializer(cls: Any, names: Any) -> None:
    make = _delta_event(cls, _Item())  # type: ignore[arg-type]
    for n, text in enumerate(TRICKY * 2):
        event = make(n * 7, text)
        assert frame(event, names) == _frame(event, names)
    given = make(1, "x").model_copy(update={"obfuscation": "abc"})  # an optional field given: the serializer's way
    given.__pydantic_fields_set__.add("obfuscation")
    assert frame(given, names) == _frame(given, names) and "obfuscation" in frame(given, names)


def _typed(completion: list[Any], encoding: HarmonyEncoding, **options: Any) -> list[StreamingEvent]:
    return list(stream_response(completion, encoding, ids=counting_ids(), created_at=1, clock=lambda: 0.0, **options))


@pytest.mark.parametrize("completion", COMPLETIONS)
@pytest.mark.parametrize("names", ["spec", "openai"])
def test_to_sse_of_a_fresh_stream_is_the_frames_of_its_events(
    completion: str, names: Any, encoding: HarmonyEncoding
) -> None:
    tokens = encoding.encode(completion, allowed_special="all")
    for given in (tokens, [completion]):  # token ids, and text chunks
        events: list[Any] = list(given)
        slow = list(to_sse(iter(_typed(events, encoding)), reasoning_names=names))  # framing each typed event
        fused = list(
            to_sse(
                stream_response(events, encoding, ids=counting_ids(), created_at=1, clock=lambda: 0.0),
                reasoning_names=names,
            )
        )
        assert fused == slow
        for stopped in (True, False):
            slow = list(to_sse(iter(_typed(events, encoding, stopped=stopped))))
            fresh = stream_response(
                events, encoding, ids=counting_ids(), created_at=1, clock=lambda: 0.0, stopped=stopped
            )
            assert list(to_sse(fresh)) == slow


def test_a_stream_read_from_is_framed_event_by_event(encoding: HarmonyEncoding) -> None:
    tokens = encoding.encode(COMPLETIONS[0], allowed_special="all")
    stream = stream_response(tokens, encoding, ids=counting_ids(), created_at=1, clock=lambda: 0.0)
    first = next(stream)
    rest = list(to_sse(stream))
    assert [frame(first), *rest] == list(to_sse(iter(_typed(tokens, encoding))))
    taken = stream_response(tokens, encoding)
    list(to_sse(taken))
    assert list(taken) == []  # to_sse consumed it, as it consumes any iterator
