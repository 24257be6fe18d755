"""What the fake engines "generate": a scenario picked from the prompt, played with realistic chunking.

A test chooses the scenario by writing `SCENARIO=<name>` in its prompt (as a model's output depends on
its prompt); without one the fake answers normally, or, with `--fail-rate`, fails some requests
mid-stream (the chaos test). A prompt that ends right after `<|message|>` (the server forced a call)
gets the call's arguments and `<|call|>`; one that ends right after the answer's header gets, when the
request carried a JSON Schema constraint in the engine's own field (`schema`), a small instance of that
schema and `<|return|>` (the engine decoding under the schema), and without one the prose a model writes
when nothing constrains it, so a server that forgets the constraint gets an answer that does not parse.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from harmony_responses import HarmonyEncoding
from harmony_responses.server.engines.instance import instance

ANSWER = (
    "<|channel|>analysis<|message|>Thinking about café ☕ and 日本語 before answering.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Héllo wörld 👋🏽 — naïve café 🎉 日本<|return|>"
)
TOOL = (
    "<|channel|>analysis<|message|>The user wants the weather; call get_weather.<|end|>"
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"Zürich"}'
    "<|call|>"
)
FORCED_ARGS = '{"location":"Zürich"}<|call|>'
PROSE = "Here is the answer you asked for, in words rather than JSON.<|return|>"
LONG = "<|channel|>final<|message|>" + "lorem ipsum dolor sit amet " * 80 + "<|return|>"
_VOCAB_ORDINARY = 199_998  # ids below this are ordinary tokens (the fakes' alternatives stay among them)


def fake_logprob(token: int) -> float:
    """The log probability the fakes give a token (a fixed function of its id, so tests can check the mapping)."""
    return -round((token % 97) / 100 + 0.01, 4)


def fake_top(token: int, n: int) -> list[tuple[int, float]]:
    """The `n` most likely tokens at a place the fakes sampled `token`: that token first, then others, less likely."""
    return [((token + k) % _VOCAB_ORDINARY if k else token, fake_logprob(token) - k) for k in range(n)]


_SCENARIO = re.compile(r"SCENARIO=([a-z_]+)")
_URL = re.compile(r"URL=([^\s<]+)")
_CURSOR = re.compile(r"\[(\d+)\] ")
_TOOL_MESSAGE = re.compile(
    r"<\|start\|>(browser\.\w+) to=assistant(?:<\|channel\|>\w+)?<\|message\|>(.*?)<\|end\|>", re.S
)


def _browser_call(recipient: str, arguments: dict[str, Any], thought: str) -> str:
    return (
        f"<|channel|>analysis<|message|>{thought}<|end|>"
        f"<|start|>assistant<|channel|>analysis to={recipient}<|message|>{json.dumps(arguments)}<|call|>"
    )


def browse(prompt_text: str, name: str) -> str:
    """The `browse*` scenarios: a model using the browser tool, one step per request, read from the tool messages
    in the prompt (the server runs the browser). `browse`: search, open the first hit, find "zebras", answer citing
    the page; `browse_url`: open the prompt's `URL=...`, then answer quoting what the browser said;
    `browse_forever`: search again after every result."""
    turn = prompt_text[prompt_text.rfind("<|start|>user") :]
    tools = re.findall(
        r"<\|start\|>(browser\.\w+) to=assistant(?:<\|channel\|>\w+)?<\|message\|>(.*?)<\|end\|>", turn, re.S
    )
    last, output = tools[-1] if tools else (None, "")
    if name == "browse_forever":
        return _browser_call("browser.search", {"query": f"zebras {len(tools)}"}, "Search again.")
    if name == "browse_url":
        if last is None:
            url = _URL.search(turn)
            return _browser_call("browser.open", {"id": url.group(1) if url else ""}, "Open the page.")
        return f"<|channel|>final<|message|>The browser said: {output[:200]}<|return|>"
    if last is None:
        return _browser_call("browser.search", {"query": "harmony zebras", "topn": 5}, "Search the web.")
    if last == "browser.search":
        return _browser_call("browser.open", {"id": 0}, "Open the first result.")
    if last == "browser.open":
        return _browser_call("browser.find", {"pattern": "zebras"}, "Find zebras.")
    opened = next((out for who, out in reversed(tools) if who == "browser.open"), "")
    cursor = _CURSOR.match(opened)
    line = re.search(r"match at L(\d+)", output)
    cite = f"【{cursor.group(1) if cursor else 0}†L{line.group(1) if line else 0}】"
    answer = f"<|start|>assistant<|channel|>final<|message|>Zebras {cite}.<|return|>"
    return "<|channel|>analysis<|message|>Cite it.<|end|>" + answer


EOG = (200002, 200012, 199999)  # <|return|>, <|call|>, <|endoftext|>: gpt-oss's generation_config eos ids


@dataclass
class Behaviour:
    """One request's plan: the completion, and how and when things go wrong."""

    name: str
    completion: list[int]
    error_before: int | None = None  # HTTP status before any output
    error_after: int | None = None  # send an error chunk after this many tokens
    cut_after: int | None = None  # cut the connection after this many tokens
    stall_before: float = 0.0  # seconds before the response head
    stall_after: int | None = None  # stall (for a long time) after this many tokens
    end_without_finish: bool = False
    shape: int | None = None  # after the first tokens, send wire.MALFORMED[format][shape]: valid JSON, wrong shape
    token_delay: float = 0.001  # seconds per chunk
    rng: random.Random = field(default_factory=random.Random)

    def chunks(self, tokens: list[int], max_group: int = 3) -> list[list[int]]:
        """The tokens in groups of 1..max_group (token ids split across chunks)."""
        out, i = [], 0
        while i < len(tokens):
            n = self.rng.randint(1, max_group)
            out.append(tokens[i : i + n])
            i += n
        return out

    def pieces(self, data: bytes) -> list[bytes]:
        """One frame's bytes in 1-3 writes, cut anywhere (a JSON line split across TCP writes)."""
        cuts = sorted(self.rng.sample(range(1, len(data)), k=min(2, len(data) - 1))) if len(data) > 2 else []
        cuts = cuts[: self.rng.randint(0, len(cuts))]
        bounds = [0, *cuts, len(data)]
        return [data[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def behaviour(
    encoding: HarmonyEncoding,
    prompt_text: str,
    *,
    fail_rate: float,
    counter: int,
    seed: int,
    schema: Any = None,
) -> Behaviour:
    rng = random.Random(seed * 1_000_003 + counter)
    match = _SCENARIO.search(prompt_text)
    name = match.group(1) if match else "answer"
    header = prompt_text[prompt_text.rfind("<|start|>") :]
    if prompt_text.endswith("<|message|>") and "to=" not in header and "<|channel|>final" in header:
        name = "constrained" if schema is not None else "unconstrained"  # only the answer's body remains
    elif prompt_text.endswith("<|message|>"):
        name = "forced"  # the prompt ends inside a call's header: only the arguments remain
    if name == "constrained":
        text = json.dumps(instance(schema), ensure_ascii=False) + "<|return|>"
    elif name.startswith("browse"):
        text = browse(prompt_text, name)
    else:
        text = {"tool": TOOL, "long": LONG, "slow": LONG, "forced": FORCED_ARGS, "unconstrained": PROSE}.get(
            name, ANSWER
        )
    b = Behaviour(name, encoding.encode(text, allowed_special="all"), rng=rng)
    if name == "answer" and match is None and fail_rate and rng.random() < fail_rate:
        b.name = rng.choice(["error_mid", "cut_mid"])
        b.completion = encoding.encode(LONG, allowed_special="all")
    if b.name == "error_before":
        b.error_before = 500
    elif b.name == "reject":
        b.error_before = 400
    elif b.name == "error_mid":
        b.error_after = rng.randint(3, 12)
    elif b.name == "cut_mid":
        b.cut_after = rng.randint(3, 12)
    elif b.name == "stall_before":
        b.stall_before = 30.0
    elif b.name == "stall_mid":
        b.stall_after = 5
    elif b.name == "no_finish":
        b.end_without_finish = True
    elif b.name == "slow":
        b.token_delay = 0.02
    elif b.name.startswith("shape_") and len(b.name) == 7:  # SCENARIO=shape_a, shape_b, ...: the first, second...
        b.shape = ord(b.name[6]) - ord("a")
        b.error_after = 1
    return b
