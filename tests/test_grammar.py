"""grammar/harmony.lark → canonical LALR tables → the generated interactive parser, and its corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_tool import CORPUS, ERROR, CorpusCase, dump_corpus, load_all, load_corpus, update

from harmony_responses import HarmonyEncoding, HarmonyParseError, parse_text, parse_tokens
from harmony_responses._tables import grammar as tables
from harmony_responses.lalr import GrammarError, IncrementalParser

from conftest import ROOT

CASES = load_all()


def test_corpus_is_there() -> None:
    assert len(CASES) >= 20
    assert {c.file for c in CASES} == {"envelope.txt", "header.txt", "lenient.txt"}


def test_corpus_files_are_in_canonical_form() -> None:
    """What `tests/corpus_tool.py --update` writes is what is there: the reader and writer agree."""
    for path in sorted(CORPUS.glob("*.txt")):
        assert dump_corpus(load_corpus(path)) == path.read_text(encoding="utf-8"), path.name


def test_update_rewrites_expectations_and_refuses_errors(tmp_path: Path) -> None:
    stale = CorpusCase("a.txt", "stale", (), "<|channel|>final<|message|>Hi<|end|>", ("{}",))
    broken = CorpusCase("a.txt", "broken", (), "<|channel|>final", ("{}",))
    (tmp_path / "a.txt").write_text(dump_corpus([stale, broken]), encoding="utf-8")
    assert update(tmp_path) == 1
    stale_now, broken_now = load_corpus(tmp_path / "a.txt")
    assert [json.loads(line)["terminator"] for line in stale_now.expected] == ["end"]
    assert broken_now == broken


@pytest.mark.parametrize("case", CASES, ids=[f"{c.file}:{c.name}" for c in CASES])
def test_corpus(encoding: HarmonyEncoding, case: CorpusCase) -> None:
    args = case.parse_args()
    if case.expects_error:
        with pytest.raises(HarmonyParseError) as info:
            parse_text(encoding, case.input, **args)
        assert case.expected[0].removeprefix(ERROR) in str(info.value)
        return
    got = [m.to_dict() for m in parse_text(encoding, case.input, **args)]
    assert got == [json.loads(line) for line in case.expected]
    tokens = encoding.encode(case.input, allowed_special="all")
    assert [m.to_dict() for m in parse_tokens(encoding, tokens, **args)] == got, "token input disagrees"


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
    from harmony_responses._tables import spec as _spec

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
    assert "python/harmony_responses/_generated/grammar.py" in outputs[0]
    on_disk = (ROOT / "generated" / "python" / "harmony_responses" / "_generated" / "grammar.py").read_bytes()
    import hashlib

    assert hashlib.sha256(on_disk).hexdigest() == outputs[0]["python/harmony_responses/_generated/grammar.py"]


def test_compiler_renumbers_lark_tables_the_same_way_each_time() -> None:
    from harmonygen.lalr_tables import compile_grammar

    text = (ROOT / "grammar" / "harmony.lark").read_text(encoding="utf-8")
    control_terminals = dict(tables.CONTROL_TERMINALS)
    lexer_terminals = {"w": "ROLE", "x": "TO", "y": "WORD", "z": "TEXT"}
    first, second = (
        compile_grammar(text, "harmony.lark", control_terminals, lexer_terminals),
        compile_grammar(text, "harmony.lark", control_terminals, lexer_terminals),
    )
    assert first == second
    assert tuple(s.actions for s in first.states) == tables.ACTIONS


def test_grammar_errors_are_reported() -> None:
    from harmonygen.lalr_tables import GrammarError as CompileError
    from harmonygen.lalr_tables import compile_grammar

    with pytest.raises(CompileError):
        compile_grammar("start: missing_rule\n", "bad.lark")
    with pytest.raises(CompileError, match=r"terminals \['STRAY'\]"):
        compile_grammar("start: STRAY\n%declare STRAY\n", "bad.lark")


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
