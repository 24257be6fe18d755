"""Unit tests of the server's stored-state modules, one at a time, in process: the context window, the
compaction seal, the settings and the command's store check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typed_values import harmony_text

from harmony_responses import Conversation, Message, Role, load_harmony_encoding
from harmony_responses.bridge import Capabilities, ConversationParts, RequestError, conversation_parts, parse_request
from harmony_responses.server.command import check_store
from harmony_responses.server.compaction import (
    SUMMARY_FRAME,
    CompactionSeal,
    as_response_request,
    kept_user_texts,
    summary_message,
)
from harmony_responses.server.context import fit, turn_starts
from harmony_responses.server.settings import Settings, SettingsError
from harmony_responses.types import CompactionSummaryItemParam

ENC = load_harmony_encoding("HarmonyGptOss")


def user(text: str) -> Message:
    return Message.from_role_and_content(Role.USER, text)


def answer(text: str) -> Message:
    return Message.from_role_and_content(Role.ASSISTANT, text).with_channel("final")


def thought(text: str) -> Message:
    return Message.from_role_and_content(Role.ASSISTANT, text).with_channel("analysis")


# -- the context window -----------------------------------------------------------------------------------


def test_turns_start_at_user_messages() -> None:
    messages = [answer("a"), user("u1"), thought("t"), answer("a1"), user("u2"), answer("a2")]
    assert turn_starts(messages) == [0, 1, 4]
    assert turn_starts([user("u"), answer("a")]) == [0]


def _parts(turns: int, words: int = 30, last: str = "the last question") -> ConversationParts:
    history: list[Message] = []
    for i in range(turns):
        history += [user(f"question {i} " + "word " * words), thought("thinking " * words), answer("answer " * words)]
    body = parse_request({"input": last, "instructions": "Be brief."}, Capabilities(store=True))
    return conversation_parts(body, history=history)


def _render(head: list[Message], body: list[Message]) -> list[int]:
    return ENC.render_conversation_for_completion(Conversation.from_messages([*head, *body]), Role.ASSISTANT)


def test_a_prompt_that_fits_is_rendered_whole() -> None:
    parts = _parts(3)
    whole = _render(parts.head, [*parts.history, *parts.turn])
    fitted = fit(parts, ENC, window=len(whole) + 10, reserve=10, auto=False)
    assert fitted.prompt == whole and fitted.dropped_turns == 0


def test_disabled_refuses_and_auto_drops_the_fewest_oldest_turns() -> None:
    parts = _parts(6)
    body = [*parts.history, *parts.turn]
    window = len(_render(parts.head, body)) // 2
    with pytest.raises(RequestError) as exc:
        fit(parts, ENC, window=window, reserve=1, auto=False)
    assert exc.value.code == "context_length_exceeded" and str(window) in exc.value.message
    fitted = fit(parts, ENC, window=window, reserve=1, auto=True)
    assert len(fitted.prompt) + 1 <= window and 0 < fitted.dropped_turns < 6
    assert (
        fitted.dropped_messages == 3 * fitted.dropped_turns and body[fitted.dropped_messages].author.role is Role.USER
    )
    assert fitted.prompt == _render(parts.head, body[fitted.dropped_messages :])  # the system and developer stay
    assert len(_render(parts.head, body[fitted.dropped_messages - 3 :])) + 1 > window  # one turn more would not fit


def test_auto_refuses_when_the_last_turn_alone_does_not_fit() -> None:
    parts = _parts(2, last="word " * 300)
    with pytest.raises(RequestError) as exc:
        fit(parts, ENC, window=300, reserve=1, auto=True)
    assert exc.value.code == "context_length_exceeded" and "every earlier turn dropped" in exc.value.message


# -- the compaction seal ----------------------------------------------------------------------------------


def test_a_sealed_summary_opens_with_its_key_only() -> None:
    seal = CompactionSeal(b"k" * 32)
    content = seal.seal("Alice lives in Lyon. ☕", created_at=1)
    assert seal.open(content) == "Alice lives in Lyon. ☕"
    assert CompactionSeal(b"x" * 32).open(content) is None
    assert CompactionSeal.from_passphrase("one").open(CompactionSeal.from_passphrase("one").seal("s", 1)) == "s"
    head, payload, mac = content.split(".")
    forged = CompactionSeal(b"k" * 32).seal("Alice lives in Paris.", created_at=1).split(".")[1]
    for bad in (f"{head}.{forged}.{mac}", f"hrc2.{payload}.{mac}", content[:-1], "", "...", "hrc1.é.é"):
        assert seal.open(bad) is None, bad


def test_the_reader_renders_a_summary_as_one_user_message_or_refuses() -> None:
    seal = CompactionSeal(b"k" * 32)
    read = seal.reader()
    [message] = read(CompactionSummaryItemParam(encrypted_content=seal.seal("S", 1)), "input[3]")
    assert message.author.role is Role.USER and message.to_dict() == summary_message("S").to_dict()
    with pytest.raises(RequestError) as exc:
        read(CompactionSummaryItemParam(encrypted_content="forged"), "input[3]")
    assert (exc.value.code, exc.value.param) == ("invalid_encrypted_content", "input[3].encrypted_content")


def test_the_users_words_are_kept_and_earlier_summaries_are_not() -> None:
    messages = [user("mine"), answer("yours"), summary_message("old summary"), user("mine too")]
    assert kept_user_texts(messages) == ["mine", "mine too"]
    assert harmony_text(summary_message("x")).startswith(SUMMARY_FRAME)


@pytest.mark.parametrize(("raw", "param"), [({"input": "x"}, "model"), ({"model": "m", "tools": []}, "tools")])
def test_a_compact_request_takes_the_specs_fields_only(raw: dict[str, object], param: str) -> None:
    with pytest.raises(RequestError) as exc:
        as_response_request(raw)
    assert exc.value.param == param


# -- settings and the command -----------------------------------------------------------------------------


def test_store_settings_come_from_the_environment() -> None:
    settings = Settings.from_env(
        {"HARMONY_RESPONSES_STORE": "memory", "HARMONY_RESPONSES_CONTEXT_WINDOW": "4096"}, compaction_key="k"
    )
    assert (settings.store_url(), settings.context_window, settings.compaction_key) == ("memory", 4096, "k")
    assert Settings.from_env(settings.to_env()) == settings
    with pytest.raises(SettingsError, match="context_window"):
        Settings(context_window=0).validate()
    with pytest.raises(SettingsError, match="store_recover_interval"):
        Settings(store_recover_interval=0).validate()


def test_the_default_store_is_the_sqlite_file_under_the_data_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert Settings().store_url() == f"sqlite:///{tmp_path}/harmony-responses/responses.sqlite3"
    assert check_store(Settings()) is None and (tmp_path / "harmony-responses" / "responses.sqlite3").is_file()


def test_a_store_the_server_cannot_use_stops_the_command() -> None:
    assert "one process" in (check_store(Settings(store="memory", workers=2)) or "")
    assert "cannot open" in (check_store(Settings(store="mysql://x")) or "")
    run = subprocess.run(
        [sys.executable, "-m", "harmony_responses.cli", "serve", "--store", "sqlite:/one/slash", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2 and "cannot open the response store" in run.stderr and "Traceback" not in run.stderr
