"""The store's contract, run on every backend: memory, SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from store_builders import ALICE, BOB, add_turn, assistant, input_item, output_item, resource, user

from harmony_responses import Author, Conversation, HarmonyEncoding, Message, Role
from harmony_responses.bridge import parse_request, request_to_conversation
from harmony_responses.store import (
    DuplicateResponse,
    InvalidArgument,
    ItemNotFound,
    Rendering,
    ResponseInProgress,
    ResponseNotFound,
    ResponseNotInProgress,
    ResponseStatus,
    Store,
)

pytest_plugins = ["store_fixtures"]


def _tool_turn_messages() -> tuple[list[Message], list[Message]]:
    """A turn whose chain of thought sits next to a tool call and its output: all of it must survive."""
    call = (
        Message.from_role_and_content(Role.ASSISTANT, '{"city":"Paris"}')
        .with_channel("commentary")
        .with_recipient("functions.get_weather")
        .with_content_type("<|constrain|>json")
    )
    output = (
        Message.from_author_and_content(Author.new(Role.TOOL, "functions.get_weather"), '{"temp": 21}')
        .with_channel("commentary")
        .with_recipient("assistant")
    )
    return [user("Weather in Paris?")], [assistant("I should call the tool.", "analysis"), call, output]


def test_a_response_is_stored_at_start_and_replaced_at_its_end(store: Store) -> None:
    inputs, outputs = _tool_turn_messages()
    items = [input_item("msg_1", "Weather in Paris?"), {"id": "fc_0", "type": "function_call_output", "output": "x"}]
    store.begin("resp_1", owner=ALICE, resource=resource("resp_1"), input_items=items, input_messages=inputs)
    assert store.get("resp_1", ALICE)["status"] == "in_progress"
    assert store.list_input_items("resp_1", ALICE, order="asc").data == tuple(items)

    final = resource("resp_1", "completed", output=[output_item("msg_2", "21 degrees")], usage={"total_tokens": 9})
    store.finish("resp_1", resource=final, output_items=final["output"], output_messages=outputs)
    assert store.get("resp_1", ALICE) == final
    assert store.get_item("msg_2", ALICE) == output_item("msg_2", "21 degrees")
    assert store.get_item("fc_0", ALICE) == items[1]
    history = store.load_history("resp_1", ALICE)
    assert [t.response_id for t in history.turns] == ["resp_1"]
    assert history.turns[0].status is ResponseStatus.COMPLETED
    assert [m.to_dict() for m in history.messages()] == [m.to_dict() for m in inputs + outputs]


def test_what_a_caller_changes_after_storing_or_reading_does_not_reach_the_store(store: Store) -> None:
    given = resource("resp_1", metadata={"k": "v"})
    store.begin("resp_1", owner=ALICE, resource=given, input_items=[input_item("a", "x")], input_messages=[user("x")])
    given["metadata"]["k"] = "changed"
    read = store.get("resp_1", ALICE)
    read["metadata"]["k"] = "changed too"
    assert store.get("resp_1", ALICE)["metadata"] == {"k": "v"}


def test_another_owner_gets_not_found_and_cannot_touch_the_response(store: Store) -> None:
    add_turn(store, "resp_a", ALICE, None, "secret")
    with pytest.raises(ResponseNotFound):
        store.get("resp_a", BOB)
    with pytest.raises(ResponseNotFound):
        store.list_input_items("resp_a", BOB)
    with pytest.raises(ResponseNotFound):
        store.load_history("resp_a", BOB)
    with pytest.raises(ResponseNotFound):
        store.delete("resp_a", BOB)
    with pytest.raises(ItemNotFound):
        store.get_item("out_resp_a", BOB)
    with pytest.raises(ResponseNotFound):
        add_turn(store, "resp_b", BOB, "resp_a", "let me continue yours")
    assert store.get("resp_a", ALICE)["status"] == "completed"  # untouched by the attempts
    with pytest.raises(ResponseNotFound):
        store.get("resp_b", BOB)  # the refused continuation left nothing behind


def test_delete_is_for_good(store: Store) -> None:
    add_turn(store, "resp_1", ALICE, None, "one")
    add_turn(store, "resp_2", ALICE, "resp_1", "two")
    store.delete("resp_1", ALICE)
    with pytest.raises(ResponseNotFound):
        store.get("resp_1", ALICE)
    with pytest.raises(ResponseNotFound):
        store.list_input_items("resp_1", ALICE)
    with pytest.raises(ItemNotFound):
        store.get_item("out_resp_1", ALICE)
    with pytest.raises(ResponseNotFound):
        store.delete("resp_1", ALICE)
    with pytest.raises(ResponseNotFound) as continued:
        add_turn(store, "resp_3", ALICE, "resp_1", "three")
    assert continued.value.response_id == "resp_1"
    # A response that continued the deleted one is still there, but its history now has a hole.
    assert store.get("resp_2", ALICE)["status"] == "completed"
    with pytest.raises(ResponseNotFound) as broken:
        store.load_history("resp_2", ALICE)
    assert (broken.value.response_id, broken.value.requested) == ("resp_1", "resp_2")


def test_history_walks_the_chain_oldest_first(store: Store) -> None:
    previous = None
    for i in range(6):
        add_turn(store, f"resp_{i}", ALICE, previous, f"q{i}")
        previous = f"resp_{i}"
    history = store.load_history("resp_5", ALICE)
    assert [t.response_id for t in history.turns] == [f"resp_{i}" for i in range(6)]
    expected = []
    for i in range(6):
        expected += [
            user(f"q{i}"),
            assistant(f"thinking about q{i}", "analysis"),
            assistant(f"answer to q{i}", "final"),
        ]
    assert [m.to_dict() for m in history.messages()] == [m.to_dict() for m in expected]
    assert [t.response_id for t in store.load_history("resp_2", ALICE).turns] == ["resp_0", "resp_1", "resp_2"]


def test_two_continuations_of_one_response_are_two_branches(store: Store) -> None:
    add_turn(store, "root", ALICE, None, "start")
    add_turn(store, "left", ALICE, "root", "go left")
    add_turn(store, "right", ALICE, "root", "go right")
    add_turn(store, "left_2", ALICE, "left", "further left")
    assert [t.response_id for t in store.load_history("left_2", ALICE).turns] == ["root", "left", "left_2"]
    assert [t.response_id for t in store.load_history("right", ALICE).turns] == ["root", "right"]


def test_an_unfinished_response_cannot_be_continued(store: Store) -> None:
    store.begin("resp_1", owner=ALICE, resource=resource("resp_1"), input_items=[], input_messages=[user("hi")])
    with pytest.raises(ResponseInProgress):
        store.load_history("resp_1", ALICE)
    with pytest.raises(ResponseInProgress):
        add_turn(store, "resp_2", ALICE, "resp_1", "too early")


def test_finish_takes_a_response_in_progress_once(store: Store) -> None:
    add_turn(store, "resp_1", ALICE, None, "hi")
    with pytest.raises(ResponseNotInProgress):
        store.finish("resp_1", resource=resource("resp_1", "completed"), output_items=[], output_messages=[])
    with pytest.raises(ResponseNotInProgress):
        store.finish("resp_9", resource=resource("resp_9", "completed"), output_items=[], output_messages=[])
    store.begin("resp_2", owner=ALICE, resource=resource("resp_2"), input_items=[], input_messages=[])
    store.delete("resp_2", ALICE)
    with pytest.raises(ResponseNotInProgress):
        store.finish("resp_2", resource=resource("resp_2", "failed"), output_items=[], output_messages=[])


@pytest.mark.parametrize(
    ("call", "param"),
    [
        ("begin_completed", "resource.status"),
        ("begin_unknown_status", "resource.status"),
        ("begin_wrong_id", "resource.id"),
        ("begin_item_without_id", "input_items[1]"),
        ("finish_in_progress", "resource.status"),
        ("finish_item_without_id", "output_items[0]"),
    ],
)
def test_malformed_writes_are_refused_naming_the_argument(store: Store, call: str, param: str) -> None:
    store.begin("open", owner=ALICE, resource=resource("open"), input_items=[], input_messages=[])
    begin: dict[str, Any] = {"owner": ALICE, "resource": resource("r"), "input_items": [], "input_messages": []}
    with pytest.raises(InvalidArgument) as refused:
        if call == "begin_completed":
            store.begin("r", **{**begin, "resource": resource("r", "completed")})
        elif call == "begin_unknown_status":
            store.begin("r", **{**begin, "resource": resource("r", "pondering")})
        elif call == "begin_wrong_id":
            store.begin("r", **{**begin, "resource": resource("other")})
        elif call == "begin_item_without_id":
            store.begin("r", **{**begin, "input_items": [{"id": "a"}, {"type": "message"}]})
        elif call == "finish_in_progress":
            store.finish("open", resource=resource("open"), output_items=[], output_messages=[])
        else:
            store.finish("open", resource=resource("open", "completed"), output_items=[{}], output_messages=[])
    assert refused.value.param == param
    assert store.get("open", ALICE)["status"] == "in_progress"  # a refused finish changed nothing


def test_a_response_id_is_stored_once(store: Store) -> None:
    add_turn(store, "resp_1", ALICE, None, "hi")
    with pytest.raises(DuplicateResponse):
        store.begin("resp_1", owner=BOB, resource=resource("resp_1"), input_items=[], input_messages=[])
    assert store.get("resp_1", ALICE)["status"] == "completed"


# -- input items, paginated as the list endpoint describes ------------------------------------------


def _with_items(store: Store, count: int) -> None:
    items = [input_item(f"item_{i}", f"text {i}") for i in range(count)]
    store.begin("resp", owner=ALICE, resource=resource("resp"), input_items=items, input_messages=[])


def _ids(page: Any) -> list[str]:
    return [item["id"] for item in page.data]


def test_pages_walk_forward_with_after_until_has_more_is_false(store: Store) -> None:
    _with_items(store, 7)
    page = store.list_input_items("resp", ALICE, order="asc", limit=3)
    assert (_ids(page), page.has_more, page.first_id, page.last_id) == (
        ["item_0", "item_1", "item_2"],
        True,
        "item_0",
        "item_2",
    )
    page = store.list_input_items("resp", ALICE, order="asc", limit=3, after=page.last_id)
    assert (_ids(page), page.has_more) == (["item_3", "item_4", "item_5"], True)
    page = store.list_input_items("resp", ALICE, order="asc", limit=3, after=page.last_id)
    assert (_ids(page), page.has_more) == (["item_6"], False)
    page = store.list_input_items("resp", ALICE, order="asc", limit=3, after="item_6")
    assert (_ids(page), page.has_more, page.first_id, page.last_id) == ([], False, None, None)


def test_desc_walks_from_the_last_item(store: Store) -> None:
    _with_items(store, 5)
    page = store.list_input_items("resp", ALICE, order="desc", limit=2)
    assert (_ids(page), page.has_more) == (["item_4", "item_3"], True)
    page = store.list_input_items("resp", ALICE, order="desc", limit=2, after="item_3")
    assert (_ids(page), page.has_more) == (["item_2", "item_1"], True)
    page = store.list_input_items("resp", ALICE, order="desc", limit=2, after="item_1")
    assert (_ids(page), page.has_more) == (["item_0"], False)


def test_the_defaults_are_twenty_items_newest_first(store: Store) -> None:
    _with_items(store, 25)
    page = store.list_input_items("resp", ALICE)
    assert _ids(page) == [f"item_{i}" for i in range(24, 4, -1)]
    assert page.has_more
    assert page.to_json() == {
        "object": "list",
        "data": list(page.data),
        "first_id": "item_24",
        "last_id": "item_5",
        "has_more": True,
    }


def test_a_response_without_input_items_has_an_empty_page(store: Store) -> None:
    _with_items(store, 0)
    assert store.list_input_items("resp", ALICE).to_json() == {
        "object": "list",
        "data": [],
        "first_id": None,
        "last_id": None,
        "has_more": False,
    }


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": True}, "limit"),
        ({"order": "sideways"}, "order"),
        ({"after": "no_such_item"}, "after"),
    ],
)
def test_bad_page_arguments_are_refused_naming_them(store: Store, kwargs: dict[str, Any], param: str) -> None:
    _with_items(store, 3)
    with pytest.raises(InvalidArgument) as refused:
        store.list_input_items("resp", ALICE, **kwargs)
    assert refused.value.param == param


def test_the_largest_page_holds_a_hundred_items(store: Store) -> None:
    _with_items(store, 101)
    page = store.list_input_items("resp", ALICE, limit=100, order="asc")
    assert len(page.data) == 100 and page.has_more and page.last_id == "item_99"


# -- concurrency -------------------------------------------------------------------------------------


def test_concurrent_continuations_from_threads_lose_nothing(store: Store) -> None:
    add_turn(store, "root", ALICE, None, "start")
    errors: list[BaseException] = []

    def branch(tag: str) -> None:
        try:
            previous = "root"
            for i in range(5):
                add_turn(store, f"{tag}_{i}", ALICE, previous, f"{tag} {i}")
                previous = f"{tag}_{i}"
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=branch, args=(f"t{n}",)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n in range(6):
        history = store.load_history(f"t{n}_4", ALICE)
        assert [t.response_id for t in history.turns] == ["root"] + [f"t{n}_{i}" for i in range(5)]
        assert history.messages()[-3].to_dict() == user(f"t{n} 4").to_dict()


def test_the_function_calls_of_each_turn_come_back_with_the_history(store: Store) -> None:
    inputs, outputs = _tool_turn_messages()
    store.begin(
        "resp_1",
        owner=ALICE,
        resource=resource("resp_1"),
        input_items=[input_item("in_1", "Weather?")],
        input_messages=inputs,
        calls={"call_given": "get_time"},  # a call the client sent back as input
    )
    store.finish(
        "resp_1", resource=resource("resp_1", "completed"), output_items=[], output_messages=outputs,
        calls={"call_made": "get_weather"},
    )  # fmt: skip
    add_turn(store, "resp_2", ALICE, "resp_1", "and then?")
    history = store.load_history("resp_2", ALICE)
    assert history.turns[0].calls == {"call_given": "get_time", "call_made": "get_weather"}
    assert history.turns[1].calls == {}
    assert history.calls() == {"call_given": "get_time", "call_made": "get_weather"}


@pytest.mark.parametrize("calls", [{"": "f"}, {"c": ""}, {"c": 3}])
def test_calls_that_are_not_ids_to_names_are_refused(store: Store, calls: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument) as exc:
        store.begin("r", owner=ALICE, resource=resource("r"), input_items=[], input_messages=[], calls=calls)
    assert exc.value.param == "calls"


def test_token_ids_come_back_only_under_the_key_they_were_rendered_with(store: Store) -> None:
    inputs, outputs = _tool_turn_messages()
    ins = [[200006, 1, 2], []]  # any ids: the store keeps them as given, one list per message
    outs = [[7] * 5, [8, 9], [2**31 + 5]]
    store.begin(
        "resp_1", owner=ALICE, resource=resource("resp_1"), input_items=[], input_messages=inputs + [user("x")],
        rendered=Rendering("enc-1", ins),
    )  # fmt: skip
    store.finish(
        "resp_1", resource=resource("resp_1", "completed"), output_items=[], output_messages=outputs,
        rendered=Rendering("enc-1", outs),
    )  # fmt: skip
    add_turn(store, "resp_2", ALICE, "resp_1", "unrendered")
    history = store.load_history("resp_2", ALICE)
    assert history.rendering("enc-1") == [*ins, *outs, None, None, None]
    assert history.rendering("enc-2") == [None] * 8  # another encoding or release: never used

    store.begin(
        "resp_3", owner=ALICE, resource=resource("resp_3"), input_items=[], input_messages=[user("a")],
        rendered=Rendering("enc-1", [[1]]),
    )  # fmt: skip
    store.finish(
        "resp_3", resource=resource("resp_3", "completed"), output_items=[], output_messages=[user("b")],
        rendered=Rendering("enc-2", [[2]]),  # the process was upgraded mid-response
    )  # fmt: skip
    assert store.load_history("resp_3", ALICE).rendering("enc-1") == [None, None]
    with pytest.raises(InvalidArgument) as exc:
        store.begin(
            "r", owner=ALICE, resource=resource("r"), input_items=[], input_messages=[user("a")],
            rendered=Rendering("enc-1", []),
        )  # fmt: skip
    assert exc.value.param == "rendered"


def test_a_secret_is_made_once_and_kept(store: Store) -> None:
    key = store.secret("compaction")
    assert len(key) == 32 and store.secret("compaction") == key
    assert store.secret("other") != key


# -- token-exact continuation ------------------------------------------------------------------------

_TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}]
_TURNS: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = [
    (
        [{"type": "message", "role": "user", "content": "Weather in Paris?"}],
        [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Need the tool."}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        ],
    ),
    (
        [{"type": "function_call_output", "call_id": "c1", "output": '{"temp": 21}'}],
        [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "21 degrees, say so."}]},
            {"type": "message", "role": "assistant", "content": "It is 21 degrees in Paris."},
        ],
    ),
    (
        [{"type": "message", "role": "user", "content": "And tomorrow?"}],
        [
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "No forecast tool."}]},
            {"type": "message", "role": "assistant", "content": "I can only see today's weather."},
        ],
    ),
]


def _messages(items: list[dict[str, Any]]) -> list[Message]:
    body = parse_request({"model": "gpt-oss-120b", "instructions": "Be brief.", "tools": _TOOLS, "input": items})
    return request_to_conversation(body).messages


def test_a_continued_prompt_equals_the_whole_history_sent_as_input(store: Store, encoding: HarmonyEncoding) -> None:
    new_input = [{"type": "message", "role": "user", "content": "Thanks. What about Rome?"}]
    everything = [item for ins, outs in _TURNS for item in ins + outs] + new_input
    whole = encoding.render_conversation_for_completion(
        Conversation.from_messages(_messages(everything)), Role.ASSISTANT
    )

    # Each turn stores the messages the bridge made of its items (one message per item here).
    history = _messages(everything)[-len(everything) :]
    previous, at = None, 0
    for n, (ins, outs) in enumerate(_TURNS):
        rid = f"resp_{n}"
        store.begin(
            rid,
            owner=ALICE,
            resource=resource(rid),
            input_items=[{"id": f"in_{n}_{i}", **item} for i, item in enumerate(ins)],
            input_messages=history[at : at + len(ins)],
            previous_response_id=previous,
        )
        store.finish(
            rid,
            resource=resource(rid, "completed"),
            output_items=[{"id": f"out_{n}_{i}", **item} for i, item in enumerate(outs)],
            output_messages=history[at + len(ins) : at + len(ins) + len(outs)],
        )
        previous, at = rid, at + len(ins) + len(outs)

    fresh = _messages(new_input)  # the new request: its system and developer messages, then its input
    continued = fresh[:-1] + store.load_history("resp_2", ALICE).messages() + fresh[-1:]
    assert encoding.render_conversation_for_completion(Conversation.from_messages(continued), Role.ASSISTANT) == whole
    assert any(m.channel == "analysis" for m in store.load_history("resp_0", ALICE).messages())
