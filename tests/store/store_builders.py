"""Builders for the store tests: owners, resources, messages and items, and the worker process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from harmony_responses import Message, Role
from harmony_responses.store import Owner, Store

WORKER = Path(__file__).resolve().parent / "store_worker.py"
ALICE = Owner.of_api_key("sk-alice-0123456789")
BOB = Owner.of_api_key("sk-bob-9876543210")


def resource(response_id: str, status: str = "in_progress", **extra: Any) -> dict[str, Any]:
    """A response resource with the fields the store reads (the store keeps the rest as given)."""
    return {"id": response_id, "object": "response", "status": status, "output": [], "error": None, **extra}


def user(text: str) -> Message:
    return Message.from_role_and_content(Role.USER, text)


def assistant(text: str, channel: str) -> Message:
    return Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel)


def input_item(item_id: str, text: str) -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def output_item(item_id: str, text: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def add_turn(store: Store, response_id: str, owner: Owner, previous: str | None, text: str) -> None:
    """A whole turn: the user says `text`, the model thinks and answers."""
    store.begin(
        response_id,
        owner=owner,
        resource=resource(response_id, previous_response_id=previous),
        input_items=[input_item(f"in_{response_id}", text)],
        input_messages=[user(text)],
        previous_response_id=previous,
    )
    store.finish(
        response_id,
        resource=resource(response_id, "completed", previous_response_id=previous),
        output_items=[output_item(f"out_{response_id}", f"answer to {text}")],
        output_messages=[assistant(f"thinking about {text}", "analysis"), assistant(f"answer to {text}", "final")],
    )


def worker(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.Popen[str]:
    """`store_worker.py` in a new process (text pipes on stdout; stdin as asked)."""
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def run_worker(*args: str, timeout: float = 120) -> str:
    process = worker(*args)
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, f"worker {args} failed:\n{err}"
    return out
