"""Encrypted reasoning (`include: ["reasoning.encrypted_content"]`): sealed by the server, opened token-exactly.

The property: random dialogues (valid assistant turns drawn by `output_items`, rendered by openai-harmony, the
oracle) run through the bridge with reasoning sealed; every turn's output items go back as the next request's
input with each reasoning item's `content` left out, so only its `encrypted_content` carries what the model wrote
(store off, as Codex runs). The prompt of that request equals, token for token, the prompt stored state gives (the
same turns continued from their Harmony messages, as `previous_response_id` does) and the oracle's rendering of the
messages the model wrote. A blob with any one byte changed is the spec's 400 naming the item.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from output_items import Dialogue, answer, completion, dialogue, oracle_head, request, user
from output_items import _oracle_prompt as oracle_prompt

from harmony_responses import HarmonyEncoding, Role
from harmony_responses.bridge import KnownCalls, RequestError, ResponseBuilder, conversation_parts, parse_request
from harmony_responses.bridge.encrypted import SEAL_VERSION, ReasoningSeal
from harmony_responses.bridge.items import NullSink
from harmony_responses.server.respond import SERVER_CAPABILITIES

oracle = pytest.importorskip("openai_harmony", reason="openai-harmony is installed by the test extras")

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEY = bytes(range(32))
SEAL = ReasoningSeal(KEY)
INCLUDE = ["reasoning.encrypted_content"]


@pytest.fixture(scope="module")
def reference() -> Any:
    return oracle.load_harmony_encoding(oracle.HarmonyEncodingName.HARMONY_GPT_OSS)


# -- the seal alone ---------------------------------------------------------------------------------------------


def test_a_sealed_reasoning_opens_to_what_was_sealed() -> None:
    blob = SEAL.seal("Let me think. <|end|> is text here", "analysis", "json")
    assert blob.startswith(SEAL_VERSION + ".")
    found = SEAL.open(blob)
    assert found is not None
    assert (found.text, found.channel, found.content_type) == ("Let me think. <|end|> is text here", "analysis", "json")
    assert SEAL.seal("x", "analysis", None) != SEAL.seal("x", "analysis", None)  # a fresh nonce every time
    lone = SEAL.open(SEAL.seal("\ud800 lone surrogate kept", "analysis", None))
    assert lone is not None and lone.text == "\ud800 lone surrogate kept"


def test_a_changed_foreign_expired_or_other_version_blob_does_not_open() -> None:
    blob = SEAL.seal("thought", "analysis", None)
    body = blob.split(".", 1)[1]
    for i in range(len(body)):  # every character of the blob changed in turn, to each of two others
        for other in "AB" if body[i] not in "AB" else "CD":
            assert SEAL.open(f"{SEAL_VERSION}.{body[:i]}{other}{body[i + 1 :]}") is None, (i, other)
    for cut in range(1, 4):  # every length: one a character short of each
        short = ReasoningSeal(KEY).seal("x" * cut, None, None)
        assert SEAL.open(short[:-1]) is None and SEAL.open(short + "A") is None
    assert SEAL.open(blob[:-1]) is None and SEAL.open(blob + "A") is None
    assert ReasoningSeal(bytes(32)).open(blob) is None  # another server's key
    assert ReasoningSeal.from_passphrase("a").open(ReasoningSeal.from_passphrase("b").seal("t", None, None)) is None
    assert SEAL.open("hrr0." + body) is None and SEAL.open(body) is None and SEAL.open("") is None
    assert SEAL.open(SEAL_VERSION + ".!!!") is None
    now = [1_000_000.0]
    aging = ReasoningSeal(KEY, max_age=60, clock=lambda: now[0])
    old = aging.seal("t", "analysis", None)
    now[0] += 61
    assert aging.open(old) is None and SEAL.open(old) is not None  # only a seal with a max age lets it expire


# -- the bridge's read point --------------------------------------------------------------------------------------

USER = {"type": "message", "role": "user", "content": "Weather in Paris?"}


def _sealed_item(text: str, content_type: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": "rs_1", "summary": []}
    item["encrypted_content"] = SEAL.seal(text, "analysis", content_type)
    return item


def _prompt(encoding: HarmonyEncoding, items: list[dict[str, Any]], seal: ReasoningSeal | None = SEAL) -> list[int]:
    body = parse_request(request(items), SERVER_CAPABILITIES)
    parts = conversation_parts(body, reasoning=seal.reader() if seal is not None else None)
    return encoding.render_conversation_for_completion(parts.conversation(), Role.ASSISTANT)


def _error(encoding: HarmonyEncoding, items: list[dict[str, Any]], seal: ReasoningSeal | None = SEAL) -> RequestError:
    with pytest.raises(RequestError) as caught:
        _prompt(encoding, items, seal)
    return caught.value


def test_a_sealed_item_renders_as_its_plain_twin(encoding: HarmonyEncoding) -> None:
    plain = {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "Hm."}]}
    typed = {**plain, "harmony:content_type": "json"}
    assert _prompt(encoding, [USER, _sealed_item("Hm.")]) == _prompt(encoding, [USER, plain])
    assert _prompt(encoding, [USER, _sealed_item("Hm.", "json")]) == _prompt(encoding, [USER, typed])
    both = {**_sealed_item("Hm."), "content": plain["content"]}  # sent back as it came: content and blob agree
    assert _prompt(encoding, [USER, both]) == _prompt(encoding, [USER, plain])
    summary = {**_sealed_item("Hm."), "summary": [{"type": "summary_text", "text": "ignored"}]}
    assert _prompt(encoding, [USER, summary]) == _prompt(encoding, [USER, plain])


def test_a_sealed_item_that_does_not_open_or_disagrees_is_a_400_naming_it(encoding: HarmonyEncoding) -> None:
    item = _sealed_item("Hm.")
    blob = item["encrypted_content"]
    flipped = blob[:-2] + ("A" if blob[-2] != "A" else "B") + blob[-1]
    error = _error(encoding, [USER, {**item, "encrypted_content": flipped}])
    assert (error.code, error.param) == ("invalid_encrypted_content", "input[1].encrypted_content")
    foreign = _error(encoding, [USER, USER, item], seal=ReasoningSeal(bytes(32)))
    assert (foreign.code, foreign.param) == ("invalid_encrypted_content", "input[2].encrypted_content")
    differs = {**item, "content": [{"type": "reasoning_text", "text": "Something else."}]}
    error = _error(encoding, [USER, differs])
    assert (error.code, error.param) == ("invalid_encrypted_content", "input[1].content")
    unread = _error(encoding, [USER, item], seal=None)  # the bridge alone cannot open it: refused, not dropped
    assert (unread.code, unread.param) == ("unsupported_parameter", "input[1].encrypted_content")


def test_other_include_values_are_refused_naming_them() -> None:
    assert parse_request({**request([USER]), "include": INCLUDE}, SERVER_CAPABILITIES).include == INCLUDE
    with pytest.raises(RequestError) as caught:
        parse_request({**request([USER]), "include": INCLUDE}, SERVER_CAPABILITIES.__class__())
    assert caught.value.param == "include[0]" and "reasoning.encrypted_content" in caught.value.message


# -- the property -------------------------------------------------------------------------------------------------


def _without_content(item: dict[str, Any]) -> dict[str, Any]:
    """A reasoning output item as a stateless client keeps it: its blob, no plain content."""
    if item["type"] != "reasoning":
        return item
    assert item.get("encrypted_content", "").startswith(SEAL_VERSION + "."), item
    return {k: v for k, v in item.items() if k != "content"}


def _flip(blob: str, where: int) -> str:
    body = blob.split(".", 1)[1]
    i = where % len(body)
    return f"{SEAL_VERSION}.{body[:i]}{'A' if body[i] != 'A' else 'B'}{body[i + 1 :]}"


@SETTINGS
@given(data=dialogue, where=st.integers(0, 10_000))
def test_sealed_reasoning_gives_the_stored_state_prompt_token_for_token(
    encoding: HarmonyEncoding, reference: Any, data: Dialogue, where: int
) -> None:
    first, turns = data
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": first}]  # what the client keeps
    new: list[dict[str, Any]] = list(items)  # what a stored-state client sends: the new input only
    history: list[Any] = []  # the Harmony messages a store keeps: each turn's input, then what the model wrote
    calls = KnownCalls()
    messages = [*oracle_head(), user(first)]
    for steps, follow_up in turns:
        raw = {**request(items), "include": INCLUDE, "store": False}
        body = parse_request(raw, SERVER_CAPABILITIES)
        parts = conversation_parts(body, reasoning=SEAL.reader())
        stateless = encoding.render_conversation_for_completion(parts.conversation(), Role.ASSISTANT)
        continued = conversation_parts(parse_request(request(new)), history=history, calls=calls)
        stored = encoding.render_conversation_for_completion(continued.conversation(), Role.ASSISTANT)
        assert stateless == stored == oracle_prompt(reference, messages)

        builder = ResponseBuilder(encoding, body, NullSink(), seal_reasoning=SEAL.seal)
        for token in completion(reference, steps):
            builder.feed_token(token)
        builder.finish()
        assert builder.final is not None and builder.final.status == "completed"
        output = builder.final.model_dump(mode="json")["output"]
        history += [*continued.turn, *builder.messages()]
        calls.add_json(KnownCalls.of_items(builder.final.output).to_json())  # what the store keeps of the calls
        items += [_without_content(item) for item in output]
        messages += [step.message for step in steps]
        last = steps[-1]
        if last.output is not None:
            item, message = answer(last, output[-1])
        else:
            item, message = {"type": "message", "role": "user", "content": follow_up}, user(follow_up)
        items.append(item)
        new = [item]
        messages.append(message)

    raw = request(items)
    body = parse_request(raw, SERVER_CAPABILITIES)
    stateless = encoding.render_conversation_for_completion(
        conversation_parts(body, reasoning=SEAL.reader()).conversation(), Role.ASSISTANT
    )
    continued = conversation_parts(parse_request(request(new)), history=history, calls=calls)
    assert stateless == encoding.render_conversation_for_completion(continued.conversation(), Role.ASSISTANT)
    assert stateless == oracle_prompt(reference, messages)

    sealed = [i for i, item in enumerate(items) if item["type"] == "reasoning"]
    if sealed:  # one byte of one blob changed: the 400 names that item
        index = sealed[where % len(sealed)]
        broken = [dict(item) for item in items]
        broken[index]["encrypted_content"] = _flip(items[index]["encrypted_content"], where)
        with pytest.raises(RequestError) as caught:
            conversation_parts(parse_request(request(broken), SERVER_CAPABILITIES), reasoning=SEAL.reader())
        assert (caught.value.code, caught.value.param) == (
            "invalid_encrypted_content",
            f"input[{index}].encrypted_content",
        )
    json.dumps(items)  # what the client keeps is plain JSON
