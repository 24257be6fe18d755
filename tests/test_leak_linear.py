"""`detect_leak` is linear (issue 9, item 14) and still finds what the plain definition finds.

The plain definition, written out below the slow way: a match counts unless it starts inside Markdown
code, and a header fragment counts when the rest of its line (the fragment read as a space) holds a
second header signal. `bench/bench_leak.py` measures 1 MB and 10 MB; here a looser bound keeps the
quadratic behaviour out (190 kB took 11.5 s before).
"""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from harmony_responses import detect_leak

# The patterns of the definition, spelled out here (the module keeps its own, built from the spec).
_SPECIAL_RE = re.compile(
    r"<\|(?:startoftext|endoftext|return|constrain|channel|start|end|message|call|reserved_[0-9]+)\|>"
)
_GLUED_RE = re.compile(r"assistant(?:analysis|commentary|final)(?![a-z])")
_RECIPIENT_RE = re.compile(r"to=functions\.\S*")
_CODE_RE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)
_PLAIN_SIGNAL = re.compile(
    r"(?:^|\s|assistant)(?:analysis|commentary|final)(?![a-z])|(?:^|\s)(?:json|code)(?=\{|\s|$)|<\|"
)


def plain_detect_leak(text: str) -> list[tuple[str, int, int, str]]:
    code = [(m.start(), m.end()) for m in _CODE_RE.finditer(text)]

    def outside(pos: int) -> bool:
        return not any(a <= pos < b for a, b in code)

    found = [("control_token", m) for m in _SPECIAL_RE.finditer(text) if outside(m.start())]
    found += [("glued_header", m) for m in _GLUED_RE.finditer(text) if outside(m.start())]
    for m in _RECIPIENT_RE.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        rest = text[line_start : m.start()] + " " + text[m.end() : len(text) if line_end < 0 else line_end]
        if outside(m.start()) and _PLAIN_SIGNAL.search(rest):
            found.append(("header_fragment", m))
    return sorted((kind, m.start(), m.end(), m.group()) for kind, m in found)


ATOMS = [
    "to=functions.", "f", " ", "\n", "\t", "\r", "`", "```", "<|", "<|end|>", "<|channel|>", "analysis",
    "commentary", "final", "assistant", "json", "code", "{", "x", "é", "to=",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(ATOMS), max_size=18).map("".join))
def test_same_leaks_as_the_plain_definition(text: str) -> None:
    got = sorted((leak.kind, leak.start, leak.end, leak.text) for leak in detect_leak(text))
    assert got == plain_detect_leak(text)


def test_known_leaks_still_found() -> None:
    kinds = [leak.kind for leak in detect_leak("finalto=functions.get_weather\nx to=functions.f json{}")]
    assert kinds == ["header_fragment", "header_fragment"]
    assert detect_leak("`to=functions.f json{}` and ```\n<|end|>\n```") == []


def _seconds(text: str) -> float:
    # CPU time of this process: a loaded machine (other test sessions) inflates it far less than wall time
    start = time.process_time()
    detect_leak(text)
    return time.process_time() - start


def test_adversarial_text_is_not_quadratic() -> None:
    # Before: every control token rescanned every code span, every fragment its whole line.
    for unit in ("`a` <|end|> ", "to=functions.a ", "`a` to=functions.f <|end|> assistantfinal x\n"):
        text = unit * (400_000 // len(unit))
        assert _seconds(text) < 2.0, unit
