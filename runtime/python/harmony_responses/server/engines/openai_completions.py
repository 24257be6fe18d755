"""vLLM's and SGLang's OpenAI-compatible `POST /v1/completions`, streamed, with a token-id prompt.

Request traps handled here (see ../shared/docs/engines.md): `max_tokens` is always set (both default
to 16); `skip_special_tokens: false` so text keeps the control tokens; `return_token_ids: true` asks
for ids (vLLM ≥ 0.10.2, SGLang main), and chunks without ids are read as text. The stop token stays
in vLLM's `token_ids`; SGLang keeps its text with `no_stop_trim`. Constrained decoding uses the
current field names, `structured_outputs.json` (vLLM; the old `guided_json` is ignored with a 200
since v0.12) and `json_schema` as a string (SGLang). A `finish_reason` other than `stop` or `length`
(`abort`, `error`), or a `data: {"error": …}` chunk, is an engine failure.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any, Literal

from .base import EngineInfo, EngineOutput, EngineRequest, EngineUnavailable, Finished, FinishReason
from .http import HttpEngine, Outputs, stream_error

Flavor = Literal["vllm", "sglang"]

# vLLM's words spelled like Harmony's (see tests/test_facts_once.py): the JSON Schema kind of `structured_outputs`.
WIRE = {"json_constraint": "json"}


class OpenAICompletionsEngine(HttpEngine):
    """`/v1/completions` of vLLM (`flavor="vllm"`) or SGLang (`flavor="sglang"`)."""

    def __init__(self, base_url: str, *, flavor: Flavor, model: str, timeout: float, max_connections: int) -> None:
        super().__init__(base_url, timeout=timeout, max_connections=max_connections)
        self.flavor = flavor
        self.model = model
        self.info = EngineInfo(
            kind=flavor if flavor == "vllm" else "sglang-completions",
            target=self.base_url,
            output="tokens",
            json_constraint=True,
        )

    def payload(self, request: EngineRequest) -> dict[str, Any]:
        s = request.sampling
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": request.prompt,
            "max_tokens": request.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "presence_penalty": s.presence_penalty,
            "frequency_penalty": s.frequency_penalty,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,
            "skip_special_tokens": False,
            "stop_token_ids": list(request.stop_token_ids),
        }
        if s.seed is not None:
            body["seed"] = s.seed
        if self.flavor == "vllm":
            body["include_stop_str_in_output"] = True
            if request.json_schema is not None:
                body["structured_outputs"] = {WIRE["json_constraint"]: dict(request.json_schema)}
        else:
            body["no_stop_trim"] = True
            if request.json_schema is not None:
                body["json_schema"] = json.dumps(request.json_schema)
        return body

    async def produce(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        finished: Finished | None = None
        async with self.post("/v1/completions", self.payload(request)) as response:
            async for chunks in self.sse(response):
                out, failure = Outputs(), None  # the chunks that arrived together, passed on as one output
                try:
                    for chunk in chunks:
                        message = stream_error(chunk)
                        if message is not None:
                            raise EngineUnavailable(f"the engine failed mid-stream: {message}")
                        choices = chunk.get("choices") if isinstance(chunk, dict) else None
                        if not choices:
                            continue  # the usage chunk
                        choice = choices[0]
                        ids = choice.get("token_ids")
                        if ids:
                            out.ids(ids)
                        elif ids is None and choice.get("text"):
                            out.text(choice["text"])
                        reason = choice.get("finish_reason")
                        if reason is not None:
                            finished = _finish(reason, choice.get("stop_reason", choice.get("matched_stop")))
                except EngineUnavailable as exc:
                    failure = exc  # what came before it is still passed on
                for output in out.items:
                    yield output
                if failure is not None:
                    raise failure
        if finished is None:
            raise EngineUnavailable("the engine ended the stream without a finish_reason")
        yield finished


def _finish(reason: str, matched: Any) -> Finished:
    if reason == "stop":
        return Finished(FinishReason.STOP, matched if isinstance(matched, int) else None)
    if reason == "length":
        return Finished(FinishReason.LENGTH)
    raise EngineUnavailable(f"the engine ended the completion with finish_reason {reason!r}")
