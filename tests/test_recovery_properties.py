"""Lenient recovery, as properties over generated completions and as a bounded fuzz run.

- Any assistant turn built from valid messages, corrupted by one class of real-world glitch (issue 8's
  classes: header junk, recipients, roles, missing headers, stripped tokens, a header cut short, calls,
  arguments, a byte order mark; issue 17's: a misspelled `<|message|>`, a call's header without it, a
  content type after a doubled channel marker, a channel word spliced into the content type, an unknown
  channel, a message to the assistant itself, the recipient and content type before the channel),
  streamed through the bridge in random chunks of text, gives spec-valid events in spec order, the same
  response as fed whole (and the same SSE bytes on the fast path), and loses no text: every message body
  and every piece of junk the corruption added is in an output item or in the text of a repair; and
  hidden text (an unknown channel's, a message to the assistant itself) is in no `message` item and not
  in Chat `content`.
- Fuzz: random token ids (control, reserved and out-of-vocabulary ids among ordinary ones) and random text
  full of control-token spellings go through lenient parsing (tokens, text, bytes) and the bridge (typed
  events and SSE) without an exception. The input counts are printed; `HARMONY_FUZZ_INPUTS` raises them
  for a longer local run, `HARMONY_PROPERTY_EXAMPLES` the property's examples.

Under CI (`CI` set) hypothesis runs derandomized, and the fuzz run uses fixed seeds.
"""

from __future__ import annotations

import json
import os
import random
import re
from typing import Any

from hidden_text import assert_hidden_text_not_shown
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from responses_checker import check_stream

from harmony_responses import HarmonyEncoding
from harmony_responses.bridge import (
    ResponseStreamer,
    SSEStreamer,
    counting_ids,
    parse_request,
    stream_response,
    stream_sse,
    to_chat_completion,
    to_sse,
)
from harmony_responses.stream import HarmonyStreamParser
from harmony_responses.types import CreateResponseBody

A = "<|start|>assistant"
SPELLINGS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"]
_RESERVED = {"assistant", "user", "system", "developer", "tool", "analysis", "commentary", "final", "json", "code"}
_RESERVED |= {"browser", "python", "container", "all"}

# Bodies: letters, digits, punctuation and spaces, never a control-token spelling; starting with a capital
# letter so that, with the tokens stripped, no body can be read as more header words.
_chars = st.characters(min_codepoint=32, max_codepoint=0x24F, blacklist_characters="<|>\\", blacklist_categories=["Cs"])
body = st.builds(
    lambda first, rest: first + rest, st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), st.text(_chars, max_size=25)
)
name = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(lambda n: n not in _RESERVED)
arguments = st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), body, max_size=2).map(json.dumps)

KINDS = ("analysis", "preamble", "call")
CORRUPTIONS = (
    "none",
    "junk_before_channel",
    "channel_punctuation",
    "stray_channel",
    "recipient_in_role",
    "missing_prefix",
    "glued_json",
    "doubled_role",
    "text_after_end",
    "stripped",
    "cut_in_header",
    "invented_result",
    "empty_arguments",
    "byte_order_mark",
    "text_after_call",
    "json_spelling",
    # issue 17's classes
    "message_spelling",
    "header_without_message",
    "content_type_after_channel",
    "spliced_type",
    "thinking_channel",
    "self_addressed",
    "late_channel",
)
HIDING = ("thinking_channel", "self_addressed")  # the target's body is hidden text: never in a message item


@st.composite
def turn(draw: st.DrawFn) -> list[dict[str, str]]:
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=5))
    if draw(st.booleans()):
        kinds.append("final")
    out = []
    for kind in kinds:
        if kind == "call":
            out.append({"kind": kind, "name": draw(name), "body": draw(arguments)})
        else:
            out.append({"kind": kind, "body": draw(body)})
    return out


def render(messages: list[dict[str, str]], corruption: str, pick: int) -> tuple[str, list[str], list[str]]:
    """The completion text (after the prompt's `<|start|>assistant`), the bodies it fully holds, and the junk
    the corruption added (both must be found in the response)."""
    parts: list[str] = []
    junk: list[str] = []
    calls = [i for i, m in enumerate(messages) if m["kind"] == "call"]
    target = calls[pick % len(calls)] if calls else pick % len(messages)
    for i, m in enumerate(messages):
        start = "" if i == 0 else A
        kind, text = m["kind"], m["body"]
        if kind == "call" and i == target and corruption == "empty_arguments":
            text = m["body"] = ""
        if kind == "call" and i == target and corruption == "json_spelling":
            text = m["body"] = json.dumps({"note": "ends with <|end|> or <|call|>"})
        channel = {"analysis": "analysis", "preamble": "commentary", "call": "commentary", "final": "final"}[kind]
        to = f" to=functions.{m['name']} <|constrain|>json" if kind == "call" else ""
        stop = {"analysis": "<|end|>", "preamble": "<|end|>", "call": "<|call|>", "final": "<|return|>"}[kind]
        head = f"<|channel|>{channel}{to}"
        marker = "<|message|>"
        if i == target:
            if corruption == "junk_before_channel":
                junk.append("Sure thing, one moment")
                start = start + " " + junk[-1] if start else junk[-1]
            elif corruption == "channel_punctuation":
                head = head.replace(f"<|channel|>{channel}", f"<|channel|>––{channel}.")
            elif corruption == "stray_channel":
                head = "<|channel|>commentary" + head
            elif corruption == "recipient_in_role" and kind == "call" and start:
                start, head = start + to.split(" <|")[0], f"<|channel|>{channel} <|constrain|>json"
            elif corruption == "missing_prefix" and kind == "call":
                head = head.replace("to=functions.", "to=")
            elif corruption == "glued_json" and kind == "call":
                head = head.replace(" <|constrain|>json", "json")
            elif corruption == "doubled_role" and start:
                start += "assistant"
            elif corruption == "message_spelling":
                marker = "<message|>"
            elif corruption == "header_without_message" and kind == "call":
                marker = " "
            elif corruption == "content_type_after_channel" and kind == "call":
                head = head.replace(" <|constrain|>json", " <|constrain|><|channel|><|constrain|>json")
            elif corruption == "spliced_type" and kind == "call":
                head = head.replace(" <|constrain|>json", " <|constrain|>commentary json")
            elif corruption == "thinking_channel" and kind in ("analysis", "preamble"):
                head = "<|channel|>thinking"
            elif corruption == "self_addressed" and kind == "preamble":
                head = "<|channel|>commentary to=assistant"
            elif corruption == "late_channel" and kind == "call":
                head = f"{to}<|channel|>{channel}"
        if corruption == "text_after_end" and kind == "final" and i > 0 and messages[i - 1]["kind"] != "call":
            parts.append(text)  # the final answer written without its header
            continue
        parts.append(f"{start}{head}{marker}{text}{stop}")
        if corruption == "invented_result" and kind == "call" and i == target:
            parts.append(f"<|start|>functions.{m['name']} to=assistant<|channel|>commentary<|message|>Made up<|end|>")
            junk.append("Made up")
    if corruption == "text_after_call" and messages[-1]["kind"] == "call":
        junk.append("It worked.")
        parts.append(junk[-1])
    completion = "".join(parts)
    if corruption == "stripped":
        completion = re.sub("|".join(re.escape(s) for s in SPELLINGS), "", completion)
    if corruption == "byte_order_mark":
        completion = "\ufeff" + completion
    held = [m["body"] for m in messages]
    if corruption == "cut_in_header" and len(parts) > 1:
        cut = completion.rfind("<|channel|>") + len("<|channel|>") + 2
        completion = completion[:cut]
        held = held[:-1]
    return completion, [h for h in held if h.strip()], junk


def request_for(messages: list[dict[str, str]]) -> CreateResponseBody:
    names = sorted({m["name"] for m in messages if m["kind"] == "call"})
    return parse_request({"model": "gpt-oss", "input": "hi", "tools": [{"type": "function", "name": n} for n in names]})


def serve(completion: list[str], body: CreateResponseBody) -> list[Any]:
    return list(stream_response(completion, _ENCODING[0], body, ids=counting_ids(), created_at=0, clock=lambda: 0.0))


_ENCODING: list[HarmonyEncoding] = []


def haystack(response: dict[str, Any]) -> str:
    pieces = []
    for item in response["output"]:
        pieces += [part.get("text", "") for part in item.get("content") or []]
        pieces.append(item.get("arguments") or "")
    pieces += [r["text"] for r in response.get("harmony:repairs", [])]
    return "\n".join(pieces)


PROPERTY_EXAMPLES = int(os.environ.get("HARMONY_PROPERTY_EXAMPLES", "60"))


@settings(
    max_examples=PROPERTY_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    messages=turn(),
    corruption=st.sampled_from(CORRUPTIONS),
    pick=st.integers(0, 10),
    cuts=st.lists(st.integers(1, 400), max_size=12),
)
def test_a_corrupted_turn_streams_valid_events_the_same_in_any_chunks_and_loses_no_text(
    encoding: HarmonyEncoding, messages: list[dict[str, str]], corruption: str, pick: int, cuts: list[int]
) -> None:
    _ENCODING[:] = [encoding]
    completion, bodies, junk = render(messages, corruption, pick)
    body = request_for(messages)
    points = sorted({c for c in cuts if c < len(completion)})
    chunks = [completion[a:b] for a, b in zip([0, *points], [*points, len(completion)], strict=True)]
    streamed = serve(chunks, body)
    check_stream([e.model_dump(mode="json") for e in streamed])
    whole = serve([completion], body)
    final = streamed[-1].response.model_dump(mode="json")
    assert final == whole[-1].response.model_dump(mode="json"), (corruption, completion)
    fast = "".join(stream_sse(chunks, encoding, body, ids=counting_ids(), created_at=0, clock=lambda: 0.0))
    assert fast == "".join(to_sse(streamed))
    found = haystack(final)
    for text in [*bodies, *junk]:
        assert text.strip() in found, (corruption, text, completion, found)
    if corruption in HIDING:
        assert_hidden_text_not_shown(completion, final, to_chat_completion(streamed[-1].response))
    if corruption in ("none", "junk_before_channel", "channel_punctuation", "stray_channel", "missing_prefix",
                      "message_spelling", "header_without_message", "content_type_after_channel", "spliced_type",
                      "late_channel"):  # fmt: skip
        kinds = [m["kind"] for m in messages]
        expected = [{"analysis": "reasoning", "preamble": "message", "call": "function_call", "final": "message"}[k]
                    for k in kinds]  # fmt: skip
        assert [i["type"] for i in final["output"]] == expected, (corruption, completion)


# -- a bounded fuzz run -------------------------------------------------------------------------------

FUZZ_INPUTS = int(os.environ.get("HARMONY_FUZZ_INPUTS", "2000"))
_SPECIAL_IDS = [199998, 199999, 200000, 200001, 200002, 200003, 200004, 200005, 200006, 200007, 200008, 200012]
_WORDS = ["assistant", "analysis", "commentary", "final", "to=functions.f", "to=", "json", "code", "user", "{", '"',
          "}", " ", "\n", "\ufeff", "functions.f", "browser.search", "python", "––", "?", "assistantfinal"]  # fmt: skip


def _random_tokens(rng: random.Random) -> list[int]:
    out = []
    for _ in range(rng.randrange(0, 60)):
        roll = rng.random()
        if roll < 0.35:
            out.append(rng.choice(_SPECIAL_IDS))
        elif roll < 0.45:
            out.append(rng.randrange(200013, 201089))  # reserved
        elif roll < 0.47:
            out.append(rng.choice([-1, 201089, 10**9]))  # no token at all
        else:
            out.append(rng.randrange(0, 199998))
    return out


def _random_text(rng: random.Random) -> str:
    pieces = [rng.choice(SPELLINGS + _WORDS) if rng.random() < 0.7 else chr(rng.randrange(32, 0x3000)) for _ in
              range(rng.randrange(0, 40))]  # fmt: skip
    return "".join(pieces)


def _chunks(rng: random.Random, text: str) -> list[str]:
    points = sorted({rng.randrange(1, len(text)) for _ in range(rng.randrange(0, 6))}) if len(text) > 1 else []
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def test_fuzz_lenient_parsing_and_the_bridge_raise_nothing(encoding: HarmonyEncoding) -> None:
    rng = random.Random(8)
    tools = ["f", "get_weather"]
    counted = {"token sequences": 0, "texts": 0}
    for n in range(FUZZ_INPUTS):
        tokens = _random_tokens(rng)
        role = rng.choice([None, "assistant"])
        parser = HarmonyStreamParser(encoding, role, "lenient", tools, stop_at_turn_end=rng.random() < 0.5)
        for token in tokens:
            parser.feed_tokens([token])
        parser.close()
        streamer = ResponseStreamer(encoding, None, tools=tools, role=role, ids=counting_ids())
        streamer.start()
        for token in tokens:
            streamer.feed(token)
        events = streamer.finish(rng.choice([None, True, False]))
        assert events[-1].type in ("response.completed", "response.incomplete")
        sse = SSEStreamer(encoding, None, tools=tools, role=role, ids=counting_ids())
        sse.start()
        for token in tokens:
            sse.feed(token)
        assert sse.finish().endswith("data: [DONE]\n\n")
        counted["token sequences"] += 1

        text = _random_text(rng)
        for chunks in ([text], _chunks(rng, text)):
            parser = HarmonyStreamParser(encoding, role, "lenient", tools, stop_at_turn_end=True)
            for chunk in chunks:
                parser.feed_text(chunk)
            parser.close()
            streamer = ResponseStreamer(encoding, None, tools=tools, role=role, ids=counting_ids())
            events = streamer.start()
            for chunk in chunks:
                events += streamer.feed_text(chunk)
            events += streamer.finish(rng.choice([None, True, False]))
            if n % 50 == 0:  # now and then, the whole stream against the spec (slow)
                check_stream([e.model_dump(mode="json") for e in events])
        data = text.encode()
        parser = HarmonyStreamParser(encoding, role, "lenient", tools)
        cut = rng.randrange(0, len(data) + 1)
        parser.feed_bytes(data[:cut])
        parser.feed_bytes(data[cut:])
        parser.close()
        counted["texts"] += 1
    print(f"fuzz: {counted['token sequences']} token sequences and {counted['texts']} texts, no exception")
    assert counted["token sequences"] == counted["texts"] == FUZZ_INPUTS
