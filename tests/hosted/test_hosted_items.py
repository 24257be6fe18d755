"""A `web_search_call` item sent back as input renders as the call and the tool message it stood for."""

from __future__ import annotations

from harmony_responses.bridge import items_to_messages
from harmony_responses.models import Message, Role, TextContent
from harmony_responses.types import ItemParamAdapter


def _text(message: Message) -> str:
    (part,) = message.content
    assert isinstance(part, TextContent)
    return part.text


def test_an_item_with_its_record_renders_the_conversation_it_kept() -> None:
    record = {
        "recipient": "browser.open",
        "arguments": '{"id": 0}',
        "channel": "analysis",
        "content_type": None,
        "author": None,
        "output": "[1] A page (https://example.org/)\n**viewing lines [0 - 0] of 0**\n\nL0: text",
    }
    item = {"type": "web_search_call", "id": "ws_1", "status": "completed",
            "action": {"type": "open_page", "url": "https://example.org/"}, "harmony:hosted": record}  # fmt: skip
    call, answer = items_to_messages([ItemParamAdapter.validate_python(item)]).messages
    assert (call.author.role, call.recipient, call.channel, _text(call)) == (
        Role.ASSISTANT,
        "browser.open",
        "analysis",
        '{"id": 0}',
    )
    assert (answer.author.role, answer.author.name, answer.recipient, answer.channel) == (
        Role.TOOL,
        "browser.open",
        "assistant",
        "analysis",
    )
    assert _text(answer) == record["output"]


def test_an_item_a_client_stripped_renders_the_call_its_action_names() -> None:
    # Codex keeps only OpenAI's fields (and may leave out `id` and `status`).
    for action, recipient, arguments in [
        ({"type": "search", "query": "zebras"}, "browser.search", '{"query": "zebras"}'),
        ({"type": "open_page", "url": "https://example.org/"}, "browser.open", '{"id": "https://example.org/"}'),
        ({"type": "find_in_page", "pattern": "z", "url": "https://example.org/"}, "browser.find", '{"pattern": "z"}'),
    ]:
        item = ItemParamAdapter.validate_python({"type": "web_search_call", "action": action})
        call, answer = items_to_messages([item]).messages
        assert (call.recipient, _text(call)) == (recipient, arguments)
        assert answer.author.name == recipient and "did not come back" in _text(answer)
    assert items_to_messages([ItemParamAdapter.validate_python({"type": "web_search_call"})]).messages == []
