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
from .base import EngineInfo, EngineOutput, EngineRequest, EngineUnavailable, Finished, FinishReason
from .http import HttpEngine, Outputs, stream_error

# llama.cpp's words spelled like Harmony's (see tests/test_facts_once.py): the `stop_type`s that mean a stop.
WIRE = {"stop_types": ("eos", "word", "none", None)}


class LlamaCppEngine(HttpEngine):
    """llama.cpp `/completion`."""

    def __init__(self, base_url: str, encoding: HarmonyEncoding, *, timeout: float, max_connections: int) -> None:
        super().__init__(base_url, timeout=timeout, max_connections=max_connections)
        self.encoding = encoding
        self.info = EngineInfo(kind="llamacpp", target=self.base_url, output="tokens", json_constraint=True)

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
        if request.json_schema is not None:
            body["json_schema"] = dict(request.json_schema)
        return body

    async def produce(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        seen = 0
        finished: Finished | None = None
        async with self.post("/completion", self.payload(request)) as response:
            async for chunks in self.sse(response):
                out, failure = Outputs(), None  # the chunks that arrived together, passed on as one output
                try:
                    for chunk in chunks:
                        if finished is not None:
                            continue  # read to the end of the body so the connection can be reused
                        message = stream_error(chunk)
                        if message is not None:
                            raise EngineUnavailable(f"the engine failed mid-stream: {message}")
                        if not isinstance(chunk, dict):
                            raise EngineUnavailable(f"the engine sent a chunk that is not an object: {chunk!r:.200}")
                        ids = list(chunk.get("tokens") or [])
                        predicted = chunk.get("tokens_predicted")
                        content = chunk.get("content") or ""
                        stop = chunk.get("stop")
                        if isinstance(predicted, int) and predicted > seen + len(ids) and content and not stop:
                            # ids went missing (held back with a split UTF-8 character): the text is complete
                            ids = self.encoding.encode(content, allowed_special="all")
                            seen = predicted
                        else:
                            seen += len(ids)
                        if ids:
                            out.ids(ids)
                        if stop:
                            finished = _finish(chunk)  # /completion closes with the stop chunk; there is no [DONE]
                except EngineUnavailable as exc:
                    failure = exc  # what came before it is still passed on
                for output in out.items:
                    yield output
                if failure is not None:
                    raise failure
        if finished is None:
            raise EngineUnavailable("the engine ended the stream without a stop chunk")
        yield finished


def _finish(chunk: dict[str, Any]) -> Finished:
    kind = chunk.get("stop_type")
    if kind == "limit":
        return Finished(FinishReason.LENGTH)
    if kind in WIRE["stop_types"]:
        return Finished(FinishReason.STOP)
    raise EngineUnavailable(f"the engine stopped with stop_type {kind!r}")
