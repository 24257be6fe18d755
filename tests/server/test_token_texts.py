"""The token texts every stream's lexer shares (`HarmonyEncoding.token_texts`), and the fast path they feed.

A token's text is decoded once per process and kept on the encoding; the parser's fast path
(`feed_body_token`, which the server's runs take for every plain token of a streamed body) passes a
token on only when its text is known. So a response must stream the same bytes whether its tokens were
never seen (the first response: each one decoded on the way) or all seen (the next ones), including
tokens that are not whole UTF-8 on their own (an emoji cut across tokens), which are known as such and
must never take the fast path.
"""

from __future__ import annotations

import re

from harmony_responses import load_harmony_encoding
from harmony_responses.server.engines.base import Finished, FinishReason, Tokens
from harmony_responses.server.exchange import ResponsesWire
from harmony_responses.server.respond import ResponseRun, parse_body, plan_request
from harmony_responses.server.settings import MediaPolicy, ReasoningEvents
from harmony_responses.stream.lexer import TokenLexer

ENC = load_harmony_encoding("HarmonyGptOss")
COMPLETION = (
    "<|channel|>analysis<|message|>Think about 日本語 and ☕ first.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Héllo 👋🏽 wörld, naïve café 🎉 — 日本 done.<|return|>"
)


def _stream() -> str:
    """The SSE text of one streamed response to COMPLETION, fed one token per output, ids and times blanked."""
    body = parse_body({"model": "gpt-oss", "input": "hi", "stream": True, "store": False})
    plan = plan_request(body, ENC, media=MediaPolicy.REJECT, budget=400)
    wire = ResponsesWire(ReasoningEvents.OPENAI)
    run = ResponseRun(plan, ENC, wire.sink, model="gpt-oss")
    run.start()
    out = [wire.take()]
    for token in ENC.encode(COMPLETION, allowed_special="all"):
        run.feed(Tokens([token]))
        out.append(wire.take())
    run.finish(Finished(FinishReason.STOP))
    out.append(wire.take())
    text = b"".join(out).decode()
    text = re.sub(r'"(resp|msg|rs)_[0-9a-f]+"', r'"\1_ID"', text)
    return re.sub(r'"(\w+_at)":\s*[0-9.]+', r'"\1":0', text)


def test_a_response_streams_the_same_bytes_whether_its_tokens_were_known_or_not() -> None:
    ENC.token_texts.clear()  # nothing decoded yet: every token's first time takes the parser's full path
    cold = _stream()
    ids = ENC.encode(COMPLETION, allowed_special="all")
    ordinary = [t for t in ids if not ENC.is_special_token(t)]
    assert all(t in ENC.token_texts for t in ordinary)  # each decoded once, kept for the next response
    split = [t for t in ordinary if ENC.token_texts[t] is None]
    assert split, "the completion should hold a token that is not whole UTF-8 on its own"
    warm = _stream()
    assert warm == cold
    assert "👋🏽" in cold and "日本語" in cold and "\ufffd" not in cold


class _Texts:
    """A lexer's sink that keeps the texts."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def on_text(self, text: str, position: int) -> None:
        self.texts.append(text)

    def on_control(self, terminal: str, position: int) -> None:
        pass

    def on_invalid_token(self, token: int, position: int) -> None:
        raise AssertionError(token)


def test_a_token_one_lexer_decoded_is_known_to_every_other_lexer_of_the_encoding() -> None:
    token = ENC.encode(" zebra")[0]
    ENC.token_texts.pop(token, None)
    first, second = _Texts(), _Texts()
    one, other = TokenLexer(ENC, first), TokenLexer(ENC, second)
    assert token not in other.known_texts
    one.feed([token])
    assert first.texts == [" zebra"]
    assert other.known_texts[token] == " zebra"
