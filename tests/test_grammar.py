"""grammar/harmony.lark → canonical LALR tables → the generated interactive parser, and its corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from harmony_responses import HarmonyEncoding, HarmonyParseError, parse_text
from harmony_responses import _grammar as tables
from harmony_responses.lalr import GrammarError, IncrementalParser

from conftest import ROOT

CORPUS = ROOT / "tests" / "corpus"
RULER = "=" * 80


@dataclass(frozen=True)
class CorpusCase:
    file: str
    name: str
    options: dict[str, str]
    input: str
    expected: list[str]  # JSON lines of messages, or one "ERROR: ..." line


def load_corpus(path: Path) -> list[CorpusCase]:
    """tree-sitter style: a ruler, the name (and `:key=value` options), a ruler, input, `---`, expected."""
    cases = []
    blocks = path.read_text(encoding="utf-8").split(RULER + "\n")
    if blocks[0].strip():
        raise ValueError(f"{path.name}: text before the first case")
    for head, body in zip(blocks[1::2], blocks[2::2], strict=True):
        lines = head.strip().splitlines()
        options = dict(line[1:].split("=", 1) for line in lines[1:])
        source, sep, expected = body.partition("\n---\n")
        if not sep:
            raise ValueError(f"{path.name}: case {lines[0]!r} has no --- line")
        cases.append(CorpusCase(path.name, lines[0], options, source, [x for x in expected.strip().splitlines() if x]))
    return cases


CASES = [case for path in sorted(CORPUS.glob("*.txt")) for case in load_corpus(path)]


def test_corpus_is_there() -> None:
    assert len(CASES) >= 20
    assert {c.file for c in CASES} == {"envelope.txt", "header.txt", "lenient.txt"}


@pytest.mark.parametrize("case", CASES, ids=[f"{c.file}:{c.name}" for c in CASES])
def test_corpus(encoding: HarmonyEncoding, case: CorpusCase) -> None:
    role = case.options.get("role", "assistant")
    mode = case.options.get("mode", "strict")
    tools = case.options["tools"].split(",") if "tools" in case.options else None
    args = (encoding, case.input, None if role == "none" else role, mode, tools)
    if case.expected and case.expected[0].startswith("ERROR: "):
        with pytest.raises(HarmonyParseError) as info:
            parse_text(*args)  # type: ignore[arg-type]
        assert case.expected[0].removeprefix("ERROR: ") in str(info.value)
        return
    got = [m.to_dict() for m in parse_text(*args)]  # type: ignore[arg-type]
    assert got == [json.loads(line) for line in case.expected]
    # the same completion as token ids gives the same messages
    tokens = encoding.encode(case.input, allowed_special="all")
    again = [m.to_dict() for m in parse_text(*args)]  # type: ignore[arg-type]
    from harmony_responses import parse_tokens

    assert [m.to_dict() for m in parse_tokens(encoding, tokens, *args[2:])] == again  # type: ignore[arg-type]


# -- the tables -----------------------------------------------------------------------------------


def test_tables_are_canonical() -> None:
    """States are numbered breadth-first from 0, following shifts and gotos in sorted symbol order."""
    order = [tables.START_STATE]
    seen = {tables.START_STATE}
    for state in order:
        for symbol in sorted(tables.ACTIONS[state]):
            target = tables.ACTIONS[state][symbol]
            if target >= 0 and target not in seen:
                seen.add(target)
                order.append(target)
    assert order == list(range(len(tables.ACTIONS)))
    assert tables.RULE_TEXTS == tuple(sorted(tables.RULE_TEXTS, key=lambda t: (t.split(":")[0], t)))
    for state, row in enumerate(tables.ACTIONS):
        assert tables.EXPECTED[state] == frozenset(s for s in row if s == tables.END or s.isupper())
        assert list(row) == sorted(row)


def test_control_terminals_come_from_the_spec() -> None:
    from harmony_responses import _spec

    assert tables.CONTROL_TERMINALS[_spec.TOKEN_START] == "START"
    assert tables.CONTROL_TERMINALS[_spec.TOKEN_END_DONE_SAMPLING] == "END_DONE_SAMPLING"
    assert set(tables.CONTROL_TERMINALS.values()) <= set(tables.TERMINALS)


def test_generation_is_byte_identical_under_two_hash_seeds() -> None:
    script = (
        "import hashlib, json\n"
        "from harmonygen.config import load_config\n"
        "from harmonygen.engine import generate\n"
        "files = generate(load_config()).files\n"
        "print(json.dumps({k: hashlib.sha256(v.encode()).hexdigest() for k, v in files.items()}))\n"
    )
    outputs = []
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
        outputs.append(json.loads(run.stdout))
    assert outputs[0] == outputs[1]
    assert "python/harmony_responses/_grammar.py" in outputs[0]
    on_disk = (ROOT / "generated" / "python" / "harmony_responses" / "_grammar.py").read_bytes()
    import hashlib

    assert hashlib.sha256(on_disk).hexdigest() == outputs[0]["python/harmony_responses/_grammar.py"]


def test_compiler_renumbers_lark_tables_the_same_way_each_time() -> None:
    from harmonygen.targets.grammar import compile_grammar

    text = (ROOT / "grammar" / "harmony.lark").read_text(encoding="utf-8")
    first, second = compile_grammar(text), compile_grammar(text)
    assert first == second
    assert first.actions == tables.ACTIONS


def test_grammar_errors_are_reported() -> None:
    from harmonygen.targets.grammar import GrammarError as CompileError
    from harmonygen.targets.grammar import compile_grammar

    with pytest.raises(CompileError):
        compile_grammar("start: missing_rule\n")


# -- the interactive parser -----------------------------------------------------------------------


def test_feed_accepts_copy_and_eof() -> None:
    parser = IncrementalParser(lambda origin, children: (origin, children))
    for terminal in ("START", "ROLE", "CHANNEL", "WORD", "MESSAGE"):
        assert parser.accepts(terminal)
        parser.feed_token(terminal, terminal.lower())
    assert parser.expected() >= {"TEXT", "END", "CALL", "END_DONE_SAMPLING"}
    assert not parser.accepts("START")
    twin = parser.copy()
    twin.feed_token("TEXT", "hi")
    twin.feed_token("END")
    assert parser.accepts("TEXT") and parser.accepts(tables.END)
    tree = twin.feed_eof()
    assert isinstance(tree, tuple) and tree[0] == "start"
    with pytest.raises(GrammarError) as info:
        parser.feed_token("START")
    assert info.value.terminal == "START"
    assert "TEXT" in info.value.expected


def test_incomplete_input_fails_at_eof() -> None:
    parser = IncrementalParser()
    parser.feed_token("START")
    assert not parser.accepts(tables.END)
    with pytest.raises(GrammarError):
        parser.feed_eof()
