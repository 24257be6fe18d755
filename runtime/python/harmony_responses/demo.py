"""`harmony-responses demo`: the product in one minute, on embedded defaults (what `make run` runs).

It starts `harmony-responses serve` on the demo engine (a deterministic stand-in for a model) with the
embedded SQLite store in a temporary folder and a free port, runs a short scripted session through it with
the openai SDK as the client — a question; a question with a declared function, which the model calls; the
function's output sent back, which the model answers; a continuation by `previous_response_id`; a streamed
turn — and prints, for each turn, the request in one line, the tail of the Harmony prompt the server rendered
for it, what came back as a compact timeline, the answer and the parser's repairs. Then it says how to keep
serving and how to point clients and a real engine at the server, stops the server and exits 0.

The prompt shown is the one `harmony-responses prompt` prints for the same request with the whole
conversation sent as input, which the server renders token for token for a continuation (see docs/store.md).
Needs the `demo` extra (the `server` extra and the openai SDK).
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

from ._tables import ItemKind, Role
from ._tables import spec as _spec
from .cli_input import CommandError, load_encoding
from .encoding import HarmonyEncoding
from .prompt import prompt_tokens

_READY = re.compile(r"listening on (http://\S+)")
_WIDTH = 100
_TAIL_CHARS = 220
_REASONING = _spec.ITEM_KINDS[ItemKind.REASONING]["type"]
_MESSAGE = _spec.ITEM_KINDS[ItemKind.MESSAGE]["type"]
_CALL = _spec.ITEM_KINDS[ItemKind.FUNCTION_CALL]["type"]
_OUTPUT_TEXT = _spec.ITEM_KINDS[ItemKind.MESSAGE]["text"]["part"]
_CLOSING = tuple(_spec.STREAM_CLOSING.values())
_EVENT_PREFIX = _spec.STREAM_CLOSING["completed"].partition(".")[0] + "."

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}


def add_demo_parser(sub: Any) -> None:
    """Register `demo` on the CLI's subparsers."""
    p = sub.add_parser(
        "demo",
        help="start serve on the demo engine, run a scripted session with the openai SDK, print the transcript",
        description="Start `harmony-responses serve --engine demo` with a temporary SQLite store on a free port, "
        "run a short session through it with the openai SDK (a question, a tool call and its output, a "
        "continuation, a streamed turn), print a readable transcript and stop the server.",
    )
    p.add_argument("--engine", default="demo", help="the engine to serve (default demo; see serve --help)")
    p.set_defaults(func=run_demo, file=None)


# -- the server -------------------------------------------------------------------------------------------


@dataclass
class _Server:
    popen: subprocess.Popen[str]
    url: str
    lines: list[str]


@contextmanager
def _serving(engine: str, store_dir: Path) -> Iterator[_Server]:
    argv = [
        sys.executable,
        "-m",
        "harmony_responses.cli",
        "serve",
        "--engine",
        engine,
        "--port",
        "0",
        "--store",
        f"sqlite:///{store_dir / 'responses.sqlite3'}",
        "--log-level",
        "warning",
    ]
    popen = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
    )
    lines: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def drain() -> None:
        assert popen.stdout is not None
        for line in popen.stdout:
            lines.append(line)
            m = _READY.search(line)
            if m and not url:
                url.append(m.group(1))
                found.set()
        found.set()

    threading.Thread(target=drain, daemon=True).start()
    found.wait(60)
    try:
        if not url:
            raise CommandError("demo: the server did not start:\n" + "".join(lines[-20:]).rstrip(), status=1)
        time.sleep(0.05)  # the start-up lines that follow the address
        yield _Server(popen, url[0], lines)
    finally:
        if popen.poll() is None:
            popen.send_signal(signal.SIGINT)
            try:
                popen.wait(15)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


# -- the transcript ---------------------------------------------------------------------------------------


def _short(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def prompt_tail(prompt: str, chars: int = _TAIL_CHARS) -> str:
    """The end of a rendered prompt, cut at a message start so the tail reads from a header."""
    if len(prompt) <= chars:
        return prompt
    tail = prompt[-chars:]
    at = tail.find(_spec.SPELLING_START)
    return "…" + (tail[at:] if at > 0 else tail)


def timeline(event_types: Iterable[str]) -> str:
    """Event types in order, runs of one type folded (`output_text.delta ×12`), the `response.` prefix left out."""
    parts = []
    for kind, run in groupby(event_types):
        n = len(list(run))
        name = kind.removeprefix(_EVENT_PREFIX)
        parts.append(f"{name} ×{n}" if n > 1 else name)
    return " → ".join(parts)


def items_line(output: Sequence[dict[str, Any]]) -> str:
    """The output items of a response in one line."""
    parts = []
    for item in output:
        kind = item.get("type")
        if kind == _REASONING:
            text = "".join(c.get("text", "") for c in item.get("content") or [])
            parts.append(f"reasoning ({len(text)} chars, folded)")
        elif kind == _CALL:
            parts.append(f"function_call {item.get('name')}({item.get('arguments')}) call_id={item.get('call_id')}")
        elif kind == _MESSAGE:
            text = "".join(c.get("text", "") for c in item.get("content") or [])
            parts.append(f"message ({len(text)} chars)")
        else:
            parts.append(str(kind))
    return " · ".join(parts) or "(nothing)"


def repairs_line(resource: dict[str, Any]) -> str:
    repairs = resource.get("harmony:repairs") or []
    if not repairs:
        return "none (the demo engine writes valid Harmony; the page at / shows repairs of a glitchy completion)"
    return "; ".join(f"{r.get('rule')} at {r.get('position')}: {r.get('detail')}" for r in repairs)


def _answer(resource: dict[str, Any]) -> str:
    texts = [
        c.get("text", "")
        for item in resource.get("output") or []
        if item.get("type") == _MESSAGE
        for c in item.get("content") or []
        if c.get("type") == _OUTPUT_TEXT
    ]
    if texts:
        return _short(" ".join(texts), 300)
    calls = [i for i in resource.get("output") or [] if i.get("type") == _CALL]
    if calls:
        return f"(none yet: the model called {calls[0].get('name')}; the client runs it and sends the output back)"
    return "(none)"


class Transcript:
    """Prints the session turn by turn and keeps the conversation, so each turn's prompt can be shown."""

    def __init__(self, encoding: HarmonyEncoding, out: Any = None) -> None:
        self.encoding = encoding
        self.out = out or sys.stdout
        self.history: list[Any] = []  # every earlier turn's input and output items, as the next input
        self.turns = 0
        self.prompt_length = 0  # the shown prompt's tokens, held to the server's count (usage.input_tokens)

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def turn(self, title: str, call: str, request: dict[str, Any]) -> None:
        self.turns += 1
        self.say()
        self.say(f"── turn {self.turns} · {title} ".ljust(_WIDTH, "─"))
        self.say(f"request   {call}")
        whole = dict(request)
        new_input = (
            request["input"]
            if isinstance(request["input"], list)
            else [{"type": _MESSAGE, "role": Role.USER.value, "content": request["input"]}]
        )
        if request.get("previous_response_id"):
            whole.pop("previous_response_id")
            whole["input"] = [*self.history, *new_input]
        else:
            self.history = []
            whole["input"] = new_input
        whole.pop("stream", None)
        tokens = prompt_tokens(whole, self.encoding)
        self.prompt_length = len(tokens)
        self.say(f"prompt    {prompt_tail(self.encoding.decode_utf8(tokens))}")
        self.history = [*whole["input"]]

    def result(self, resource: dict[str, Any], events: Sequence[str] | None = None) -> None:
        if events is not None:
            self.say(f"events    {timeline(events)}")
        self.say(f"output    {items_line(resource.get('output') or [])}")
        self.say(f"answer    {_answer(resource)}")
        self.say(f"repairs   {repairs_line(resource)}")
        status = resource.get("status")
        usage = resource.get("usage") or {}
        self.say(
            f"response  {resource.get('id')} · {status} · {usage.get('input_tokens')} prompt tokens, "
            f"{usage.get('output_tokens')} output tokens"
        )
        if usage.get("input_tokens") != self.prompt_length:
            self.say(f"note      the prompt shown has {self.prompt_length} tokens: not the one the server rendered")
        self.history += [_as_input(item) for item in resource.get("output") or []]


def _as_input(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as the next request's input (output is input; the status is the server's to set)."""
    return {k: v for k, v in item.items() if k != "status"}


def _call_text(method: str, request: dict[str, Any]) -> str:
    parts = []
    for key, value in request.items():
        if key == "tools":
            shown = "[" + ", ".join(t.get("name", "?") for t in value) + "]"
        elif key == "input" and isinstance(value, list):
            shown = "[" + ", ".join(f"{{{i.get('type')}…}}" for i in value) + "]"
        else:
            shown = json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={shown}")
    return _short(f"client.{method}({', '.join(parts)})", _WIDTH * 2)


# -- the session ------------------------------------------------------------------------------------------


def session(base_url: str, encoding: HarmonyEncoding, out: Any = None) -> Transcript:
    """Run the scripted session against a server at `base_url` with the openai SDK; return its transcript."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url + "/v1", api_key="sk-demo", max_retries=0, timeout=30)
    t = Transcript(encoding, out)
    model = "gpt-oss"

    def create(title: str, request: dict[str, Any]) -> dict[str, Any]:
        t.turn(title, _call_text("responses.create", request), request)
        response = client.responses.create(**request)
        resource: dict[str, Any] = response.model_dump(mode="json", exclude_unset=True, warnings=False)
        t.result(resource)
        return resource

    create("a question", {"model": model, "input": "What is the Harmony format, in one sentence?"})

    ask = {"model": model, "input": "What's the weather in Paris?", "tools": [WEATHER_TOOL]}
    called = create("a tool call", ask)
    call = next(i for i in called["output"] if i["type"] == _CALL)
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": '{"temp_c": 18, "sky": "clear"}'}
    answered = create(
        "the tool's output, and the answer",
        {"model": model, "previous_response_id": called["id"], "input": [output], "tools": [WEATHER_TOOL]},
    )
    more = {"model": model, "previous_response_id": answered["id"], "input": "Should I take an umbrella?"}
    continued = create("a continuation by previous_response_id", more)

    streamed = {
        "model": model,
        "previous_response_id": continued["id"],
        "input": "Thanks! Say goodbye in three words.",
        "stream": True,
    }
    t.turn("a streamed turn", _call_text("responses.create", streamed), streamed)
    kinds: list[str] = []
    final: dict[str, Any] = {}
    for event in client.responses.create(**streamed):
        kinds.append(event.type)
        if event.type in _CLOSING:
            final = event.model_dump(mode="json", exclude_unset=True, warnings=False)["response"]
    t.result(final, kinds)
    return t


def next_steps(url: str) -> str:
    """What to do after the demo: keep serving, point clients at it, put a real engine behind it."""
    return f"""
{"── what next ".ljust(_WIDTH, "─")}
That was `harmony-responses serve` at {url} (stopped now). To keep one running:
  make serve                                          # the demo engine on http://127.0.0.1:8000
  .venv/bin/harmony-responses serve --engine demo     # the same command
Point a client at it (any API key works unless serve gets --api-key):
  curl:        curl -s http://127.0.0.1:8000/v1/responses -H 'Content-Type: application/json' \\
                 -d '{{"model": "gpt-oss", "input": "Hello"}}'
  openai SDK:  OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
  Agents SDK:  set OPENAI_BASE_URL=http://127.0.0.1:8000/v1 and OPENAI_API_KEY=unused
  Codex CLI:   a model provider with base_url = "http://127.0.0.1:8000/v1" and wire_api = "responses"
               (docs/clients.md)
  a browser:   http://127.0.0.1:8000/  (a playground, and an inspector that shows every repair)
Put a real engine behind it (gpt-oss in vLLM, SGLang, llama.cpp or Ollama; docs/engines.md):
  .venv/bin/harmony-responses serve --engine vllm:http://127.0.0.1:8001
  .venv/bin/harmony-responses serve --engine ollama:http://127.0.0.1:11434?model=gpt-oss:20b
  (without ?model= serve asks the engine which model it serves)"""


def run_demo(args: argparse.Namespace) -> int:
    """`harmony-responses demo`."""
    try:
        import openai  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise CommandError(
            f"demo: {exc.name} is missing; install the demo extra: pip install 'harmony-responses[demo]'"
        ) from None
    encoding = load_encoding()
    started = time.monotonic()
    folder = tempfile.TemporaryDirectory(prefix="harmony-responses-demo-")
    with folder as tmp, _serving(args.engine, Path(tmp)) as server:
        print("harmony-responses demo: a scripted session with the openai SDK as the client", flush=True)
        for line in server.lines:
            print("  " + line.rstrip(), flush=True)
        transcript = session(server.url, encoding)
        url = server.url
    took = time.monotonic() - started
    print(next_steps(url))
    print(f"\n{transcript.turns} turns in {took:.1f} s; the server has stopped.", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - `python -m harmony_responses.demo`
    from .cli import main

    raise SystemExit(main(["demo", *sys.argv[1:]]))
