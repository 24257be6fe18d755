"""Continuation overhead: a 50-turn conversation loaded from the store and rendered into the next prompt.

The peer is the client that sends the whole history as input: `parse_request` + `plan_request` (the
server's: conversation, tool policy, context window, render) on a body with all 50 turns as input items.
The continuation is what `serve` does for `previous_response_id`: `Store.load_history` (one recursive
query), then `plan_request` with the history (the new request's system and developer messages, the
stored messages, its new input, fitted to the window and rendered), the stored messages' token ids
used as they are (`--no-token-cache`: stored without them, every message encoded again). Both prompts
must be equal token for token (checked first).

Each turn: a user message, a reasoning item, every fifth turn a function call and its output (with a
second reasoning item), and an answer; texts are a few dozen to a few hundred words.

Bar (issue 11): the continuation (load + render) of a 50-turn conversation < 10 ms on SQLite.

    TIKTOKEN_ENCODINGS_BASE=../shared/vocab .venv/bin/python bench/bench_store.py [--postgres URL]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(Path(__file__).resolve().parents[2] / "shared" / "vocab"))

from harmony_responses import HarmonyEncodingName, Message, load_harmony_encoding  # noqa: E402
from harmony_responses.bridge import Capabilities, parse_request, request_to_conversation  # noqa: E402
from harmony_responses.server.respond import plan_request  # noqa: E402
from harmony_responses.server.settings import MediaPolicy  # noqa: E402
from harmony_responses.server.stored import TurnRenderer, input_calls  # noqa: E402
from harmony_responses.store import History, Owner, Store, open_store  # noqa: E402

from conversations import TOOLS  # noqa: E402

TURNS = 50
STORED = Capabilities(store=True)
OWNER = Owner.of_api_key("sk-bench")
WORDS = (
    "the of and to in is that for it as was with be by on not this are or from at which but have an they you "
    "were there would their we been has when who will more no if out so said what up its about into than them "
    "can only other new some could time these two may then do first any my now such like our over even most "
    "made after also did many before must through back years where much your way well down should because each "
    "just those people how too little state good very make world still own see work long get here between both "
    "life being under never day same another know while last might great old year off come since against go "
    "came right used take three flight weather Tokyo fare seat window aisle gate airport hotel booking price"
).split()


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))).capitalize() + "."


def _turn_items(rng: random.Random, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(input items, output items) of turn `n`, as a client sending the history would send them."""
    inputs: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": _text(rng, 20, 60)}]
    outputs: list[dict[str, Any]] = [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": _text(rng, 60, 160)}]}
    ]
    if n % 5 == 4:
        call_id = f"call_{n}"
        outputs.append(
            {"type": "function_call", "call_id": call_id, "name": "get_weather", "arguments": '{"city": "Tokyo"}'}
        )
        outputs.append({"type": "function_call_output", "call_id": call_id, "output": '{"temp_c": 21, "sky": "clear"}'})
        outputs.append({"type": "reasoning", "summary": [{"type": "summary_text", "text": _text(rng, 20, 40)}]})
    outputs.append({"type": "message", "role": "assistant", "content": _text(rng, 80, 220)})
    return inputs, outputs


def _body(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "gpt-oss-120b",
        "instructions": "You are a travel assistant. Be concise and cite tool results.",
        "tools": [{"type": "function", **t} for t in TOOLS],
        "input": items,
    }


def _conversation_messages(items: list[dict[str, Any]]) -> list[Message]:
    return request_to_conversation(parse_request(_body(items))).messages


def _store_chain(
    store: Store, turns: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]], render: TurnRenderer | None
) -> str:
    """Store the turns as a chain; each turn's messages are what the bridge renders for its items."""
    all_items = [item for ins, outs in turns for item in ins + outs]
    messages = _conversation_messages(all_items)
    messages = messages[len(messages) - len(all_items) :]  # one message per item, after system and developer
    previous, at = None, 0
    for n, (ins, outs) in enumerate(turns):
        rid = f"resp_{n}"
        in_msgs, out_msgs = messages[at : at + len(ins)], messages[at + len(ins) : at + len(ins) + len(outs)]
        at += len(ins) + len(outs)
        given = {"id": rid, "object": "response", "status": "in_progress", "output": []}
        store.begin(
            rid,
            owner=OWNER,
            resource=given,
            input_items=[{"id": f"in_{n}_{i}", **item} for i, item in enumerate(ins)],
            input_messages=in_msgs,
            previous_response_id=previous,
            rendered=render(in_msgs) if render else None,
        )
        output = [{"id": f"out_{n}_{i}", **item} for i, item in enumerate(outs)]
        store.finish(
            rid,
            resource={**given, "status": "completed", "output": output},
            output_items=output,
            output_messages=out_msgs,
            calls=input_calls(parse_request(_body(outs), STORED)),
            rendered=render(out_msgs) if render else None,
        )
        previous = rid
    assert previous is not None
    return previous


def _median_ms(fn: Callable[[], object], rounds: int) -> tuple[float, float]:
    """Median wall time and median CPU time of this thread, in ms (the machine is shared: the CPU time
    is what the work costs, the wall time what it took here)."""
    fn()
    wall, cpu = [], []
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), time.thread_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
    return statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3


def _report(what: str, times: tuple[float, float]) -> None:
    print(f"{what:<56} {times[0]:7.2f} ms wall {times[1]:7.2f} ms CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="also measure a PostgreSQL store at this URL (an empty database)")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--no-token-cache", action="store_true", help="store no token ids: encode every message")
    args = parser.parse_args()

    encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    render = None if args.no_token_cache else TurnRenderer(encoding)
    rng = random.Random(11)
    turns = [_turn_items(rng, n) for n in range(TURNS)]
    new_input = [{"type": "message", "role": "user", "content": "And what should I pack for that weather?"}]
    whole = [item for ins, outs in turns for item in ins + outs] + new_input

    def prompt(body: dict[str, Any], history: History | None = None) -> list[int]:
        plan = plan_request(
            parse_request(body, STORED),
            encoding,
            media=MediaPolicy.REJECT,
            budget=8192,
            history=history.messages() if history else [],
            calls=history.calls() if history else None,
            history_rendered=history.rendering(render.key) if history and render else None,
        )
        return plan.engine_request.prompt

    def whole_history() -> list[int]:
        return prompt(_body(whole))

    expected = whole_history()
    print(f"{TURNS} turns, {len(whole)} input items, prompt {len(expected)} tokens")
    _report("whole history sent as input (parse + plan: convert + render)", _median_ms(whole_history, args.rounds))

    with tempfile.TemporaryDirectory() as folder:
        urls = {"memory": "memory", "sqlite": f"sqlite:///{folder}/bench.sqlite3"}
        if args.postgres:
            urls["postgresql"] = args.postgres
        for name, url in urls.items():
            with open_store(url) as store:
                last = _store_chain(store, turns, render)

                def continuation(store: Store = store, last: str = last) -> list[int]:
                    body = {**_body(new_input), "previous_response_id": last}
                    return prompt(body, store.load_history(last, OWNER))

                def load(store: Store = store, last: str = last) -> History:
                    return store.load_history(last, OWNER)

                assert continuation() == expected, f"{name}: the continued prompt differs from the whole history's"
                _report(f"{name}: load_history", _median_ms(load, args.rounds))
                _report(f"{name}: continuation (load + render the prompt)", _median_ms(continuation, args.rounds))


if __name__ == "__main__":
    main()
