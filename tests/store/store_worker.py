"""A second process for the store tests: it opens a store and does one job, printing what it did.

store_worker.py open URL [START_AT]       open (at wall time START_AT), print {"applied": [...]}, close
store_worker.py hold URL ID KEY           begin ID, print "started", wait for "finish" on stdin
store_worker.py churn URL PREFIX          begin and finish responses until killed, printing each id
store_worker.py extend URL ROOT KEY N TAG N turns on a branch from ROOT; print their ids as JSON
store_worker.py history URL ID KEY        print the history's turn ids and messages as JSON
store_worker.py secret URL NAME           print the store's secret NAME in hex
"""

from __future__ import annotations

import json
import sys

from harmony_responses import Message, Role
from harmony_responses.store import Owner, open_store


def _resource(response_id: str, status: str, **extra: object) -> dict[str, object]:
    return {"id": response_id, "object": "response", "status": status, "output": [], "error": None, **extra}


def _message(role: Role, text: str, channel: str | None = None) -> Message:
    message = Message.from_role_and_content(role, text)
    return message.with_channel(channel) if channel else message


def main(argv: list[str]) -> int:
    job, url, *rest = argv[1:]
    if job == "open":
        if rest == ["--on-go"]:  # imports done: the parent starts every worker's open at once
            print("ready", flush=True)
            sys.stdin.readline()
        store = open_store(url)
        print(json.dumps({"applied": list(store.migrations_applied)}))
        store.close()
        return 0
    store = open_store(url)
    if job == "secret":
        print(store.secret(rest[0]).hex())
        store.close()
        return 0
    if job == "hold":
        response_id, owner = rest[0], Owner.of_api_key(rest[1])
        store.begin(
            response_id,
            owner=owner,
            resource=_resource(response_id, "in_progress"),
            input_items=[{"id": "in_" + response_id, "type": "message"}],
            input_messages=[_message(Role.USER, "hold on")],
        )
        print("started", flush=True)
        if sys.stdin.readline().strip() == "finish":
            store.finish(
                response_id,
                resource=_resource(response_id, "completed"),
                output_items=[{"id": "out_" + response_id, "type": "message"}],
                output_messages=[_message(Role.ASSISTANT, "done", "final")],
            )
            print("finished", flush=True)
    elif job == "churn":
        owner, i = Owner.of_api_key("churn"), 0
        while True:  # until killed: every response has i output items and says so in its metadata
            response_id = f"{rest[0]}_{i}"
            store.begin(
                response_id,
                owner=owner,
                resource=_resource(response_id, "in_progress"),
                input_items=[{"id": f"in_{response_id}"}],
                input_messages=[_message(Role.USER, f"turn {i}")],
            )
            store.finish(
                response_id,
                resource=_resource(response_id, "completed", metadata={"outputs": str(i % 7)}),
                output_items=[{"id": f"out_{response_id}_{j}"} for j in range(i % 7)],
                output_messages=[_message(Role.ASSISTANT, f"answer {j}", "final") for j in range(i % 7)],
            )
            print(response_id, flush=True)
            i += 1
    elif job == "extend":
        root, owner, count, tag = rest[0], Owner.of_api_key(rest[1]), int(rest[2]), rest[3]
        previous, made = root, []
        for i in range(count):
            response_id = f"{tag}_{i}"
            store.begin(
                response_id,
                owner=owner,
                resource=_resource(response_id, "in_progress"),
                input_items=[{"id": f"in_{response_id}"}],
                input_messages=[_message(Role.USER, f"{tag} says {i}")],
                previous_response_id=previous,
            )
            store.finish(
                response_id,
                resource=_resource(response_id, "completed"),
                output_items=[{"id": f"out_{response_id}"}],
                output_messages=[_message(Role.ASSISTANT, f"{tag} heard {i}", "final")],
            )
            previous = response_id
            made.append(response_id)
        print(json.dumps(made))
    elif job == "history":
        history = store.load_history(rest[0], Owner.of_api_key(rest[1]))
        turns = [t.response_id for t in history.turns]
        print(json.dumps({"turns": turns, "messages": [m.to_dict() for m in history.messages()]}))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
