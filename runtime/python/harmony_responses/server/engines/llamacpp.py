"""llama.cpp server's native `POST /completion` with a token-id prompt, streamed as SSE (no `[DONE]`).

Traps handled here (../shared/docs/engines.md): every sampler is set (the server's defaults are not
neutral), `n_predict` is always set, `return_tokens: true` asks for ids. A token whose bytes end in
the middle of a UTF-8 character sends no chunk, and the next chunk carries the whole text but only
its own id: `tokens_predicted` shows the gap, and that chunk's text is re-encoded instead.
`<|return|>` and `<|call|>` are end-of-generation tokens that stop silently (`stop_type: "eos"`, no
text, maybe no id): the end is reported as a stop without a token, and the server closes the
message from what it has parsed. There is no stop-token-id option; `json_schema` constrains decoding.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from ...encoding import HarmonyEncoding
from .base import (
    EngineInfo,
    EngineOutput,
    EngineRequest,
    EngineUnavailable,
    Finished,
    FinishReason,
    TokenLogprob,
    malformed,
    token_ids,
)
from .http import HttpEngine, Outputs, stream_error

# llama.cpp's words spelled like Harmony's (see tests/test_facts_once.py): the `stop_type`s that mean a stop.
WIRE = {"stop_types": ("eos", "word", "none", None)}


class LlamaCppEngine(HttpEngine):
    """llama.cpp `/completion`."""

    def __init__(self, base_url: str, encoding: HarmonyEncoding, *, timeout: float, max_connections: int) -> None:
        super().__init__(base_url, timeout=timeout, max_connections=max_connections)
        self.encoding = encoding
        self.info = EngineInfo(
            kind="llamacpp", target=self.base_url, output="tokens", json_constraint=True, logprobs=True
        )

    def payload(self, request: EngineRequest) -> dict[str, Any]:
        s = request.sampling
        body: dict[str, Any] = {
            "prompt": request.prompt,
            "n_predict": request.max_tokens,
            "stream": True,
            "return_tokens": True,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "top_k": 0,
            "min_p": 0.0,
            "typical_p": 1.0,
            "repeat_penalty": 1.0,
            "presence_penalty": s.presence_penalty,
            "frequency_penalty": s.frequency_penalty,
            "cache_prompt": True,
        }
        if s.seed is not None:
            body["seed"] = s.seed
        body.update(constraint_fields(request))
        body.update(logprob_fields(request))
        return body

    async def produce(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        seen = 0
        finished: Finished | None = None

        def read(chunk: Any, out: Outputs) -> None:
            nonlocal seen, finished
            if finished is not None:
                return  # read to the end of the body so the connection can be reused
            message = stream_error(chunk)
            if message is not None:
                raise EngineUnavailable(f"the engine failed mid-stream: {message}")
            if not isinstance(chunk, dict):
                raise malformed("a chunk that is not an object", chunk)
            ids = list(token_ids(chunk.get("tokens") or [], "tokens"))
            predicted = chunk.get("tokens_predicted")
            content = chunk.get("content") or ""
            if type(content) is not str:
                raise malformed("content must be a string", content)
            stop = chunk.get("stop")
            if isinstance(predicted, int) and predicted > seen + len(ids) and content and not stop:
                # ids went missing (held back with a split UTF-8 character): the text is complete
                ids = self.encoding.encode(content, allowed_special="all")
                seen = predicted
            else:
                seen += len(ids)
            if ids:
                out.ids(ids, read_logprobs(chunk))
            if stop:
                finished = _finish(chunk)  # /completion closes with the stop chunk; there is no [DONE]

        async with self.post("/completion", self.payload(request)) as response:
            async for output in self.outputs(response, read):
                yield output
        if finished is None:
            raise EngineUnavailable("the engine ended the stream without a stop chunk")
        yield finished


def constraint_fields(request: EngineRequest) -> dict[str, Any]:
    """The fields that constrain the completion: the JSON Schema (`json_schema`). Stop strings are not sent:
    llama.cpp leaves a matched `stop` word out of both the text and the streamed ids, so the completion would
    lose the tokens the server continues from (the server cuts the stream itself instead)."""
    return {} if request.json_schema is None else {"json_schema": dict(request.json_schema)}


def logprob_fields(request: EngineRequest) -> dict[str, Any]:
    """The fields that ask for log probabilities: `n_probs` (at least 1: 0 returns none at all; the server keeps
    the number of top tokens asked for)."""
    return {} if request.top_logprobs is None else {"n_probs": max(1, request.top_logprobs)}


def read_logprobs(chunk: dict[str, Any]) -> list[TokenLogprob] | None:
    """A chunk's `completion_probabilities`: `{"id", "logprob", "top_logprobs": [{"id", "logprob"}]}` per token."""
    entries = chunk.get("completion_probabilities")
    if not isinstance(entries, list):
        return None
    out = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), int):
            return None
        if not isinstance(entry.get("logprob"), (int, float)):
            return None  # `post_sampling_probs` gives probabilities instead: not asked for here
        top = tuple(
            (t["id"], float(t["logprob"]))
            for t in entry.get("top_logprobs") or []
            if isinstance(t, dict) and isinstance(t.get("id"), int) and isinstance(t.get("logprob"), (int, float))
        )
        out.append(TokenLogprob(entry["id"], float(entry["logprob"]), top))
    return out


def _finish(chunk: dict[str, Any]) -> Finished:
    kind = chunk.get("stop_type")
    if kind == "limit":
        return Finished(FinishReason.LENGTH)
    if kind in WIRE["stop_types"]:
        return Finished(FinishReason.STOP)
    raise EngineUnavailable(f"the engine stopped with stop_type {kind!r:.80}")
