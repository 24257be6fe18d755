"""The inspector's bridge run (server/inspect.py): repairs located in the completion's text, ids or text alike."""

from __future__ import annotations

import pytest

from harmony_responses import load_harmony_encoding
from harmony_responses.bridge import RequestError
from harmony_responses.server.inspect import inspect, locate

ENC = load_harmony_encoding("HarmonyGptOss")
JUNK_FIRST = "junk before<|start|>assistant<|channel|>final<|message|>Hello 🌍!<|return|>"


def test_locate_finds_set_aside_text_after_or_before_the_place_a_rule_acted() -> None:
    assert locate("abcXYZdef", 3, "XYZ") == (3, 6)
    assert locate("abcXYZdef", 6, "XYZ") == (3, 6)
    assert locate("abcXYZdef", 4, "") == (4, 4)


def test_text_and_token_ids_give_the_same_repairs_at_the_same_place() -> None:
    by_text = inspect({"request": {"input": "Hi"}, "completion": JUNK_FIRST}, ENC, model="gpt-oss")
    ids = ENC.encode(JUNK_FIRST, allowed_special="all")
    by_ids = inspect({"request": {"input": "Hi"}, "completion": ids}, ENC, model="gpt-oss")
    assert by_text["completion"] == by_ids["completion"] == JUNK_FIRST
    spans = [(r["rule"], r["text_from"], r["text_to"]) for r in by_text["repairs"]]
    assert spans == [(r["rule"], r["text_from"], r["text_to"]) for r in by_ids["repairs"]]
    assert spans and all(JUNK_FIRST[a:b] == "junk before" for _, a, b in spans)
    assert by_text["response"]["output"][-1]["content"][0]["text"] == "Hello 🌍!"
    assert by_text["chat"]["choices"][0]["message"]["content"] == "Hello 🌍!"
    assert by_text["prompt"].endswith("<|start|>assistant")


def test_bad_inspector_input_names_the_field() -> None:
    with pytest.raises(RequestError) as bad_id:
        inspect({"completion": [200000, 10**9]}, ENC, model="gpt-oss")
    assert bad_id.value.param == "completion[1]"
    with pytest.raises(RequestError) as missing:
        inspect({"request": {"input": "x"}}, ENC, model="gpt-oss")
    assert missing.value.param == "completion"
    with pytest.raises(RequestError) as bad_request:
        inspect({"request": {"input": "x", "temperature": "hot"}, "completion": ""}, ENC, model="gpt-oss")
    assert bad_request.value.param == "request.temperature"
