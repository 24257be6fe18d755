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

Flavor = Literal["vllm", "sglang"]

# vLLM's words spelled like Harmony's (see tests/test_facts_once.py): the JSON Schema kind of `structured_outputs`,
# and how `return_tokens_as_token_ids` writes a token.
WIRE = {"json_constraint": "json", "token_id_prefix": "token_id:"}


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
            logprobs=flavor == "vllm",  # SGLang's /v1/completions names top tokens by text only
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
        else:
            body["no_stop_trim"] = True
        body.update(constraint_fields(request, self.flavor))
        body.update(logprob_fields(request))
        return body

    async def produce(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        finished: Finished | None = None

        def read(chunk: Any, out: Outputs) -> None:
            nonlocal finished
            message = stream_error(chunk)
            if message is not None:
                raise EngineUnavailable(f"the engine failed mid-stream: {message}")
            if type(chunk) is not dict:
                raise malformed("a chunk that is not an object", chunk)
            choices = chunk.get("choices")
            if not choices:
                return  # the usage chunk
            if type(choices) is not list or type(choices[0]) is not dict:
                raise malformed("choices must be a list of objects", choices)
            choice = choices[0]
            ids = choice.get("token_ids")
            if ids is not None:
                if ids:
                    got = token_ids(ids, "token_ids")
                    logprobs = choice.get("logprobs")
                    out.ids(got, None if logprobs is None else read_logprobs(logprobs, got))
            elif choice.get("text"):
                text = choice["text"]
                if type(text) is not str:
                    raise malformed("text must be a string", text)
                out.text(text)
            reason = choice.get("finish_reason")
            if reason is not None:
                finished = _finish(reason, choice.get("stop_reason", choice.get("matched_stop")))

        async with self.post("/v1/completions", self.payload(request)) as response:
            async for output in self.outputs(response, read):
                yield output
        if finished is None:
            raise EngineUnavailable("the engine ended the stream without a finish_reason")
        yield finished


def constraint_fields(request: EngineRequest, flavor: Flavor) -> dict[str, Any]:
    """The fields that constrain the completion: stop strings (`stop`; both keep the stop string's ids, vLLM
    with `include_stop_str_in_output`, SGLang with `no_stop_trim`) and the JSON Schema, as vLLM's
    `structured_outputs.json` (an object) or SGLang's `json_schema` (a string)."""
    fields: dict[str, Any] = {}
    if request.stop_text:
        fields["stop"] = list(request.stop_text)
    if request.json_schema is not None:
        if flavor == "vllm":
            fields["structured_outputs"] = {WIRE["json_constraint"]: dict(request.json_schema)}
        else:
            fields["json_schema"] = json.dumps(request.json_schema)
    return fields


def logprob_fields(request: EngineRequest) -> dict[str, Any]:
    """The fields that ask for log probabilities: `logprobs` (how many top tokens), with the tokens written as
    `token_id:N` (`return_tokens_as_token_ids`, vLLM) so the server knows each one's bytes exactly."""
    if request.top_logprobs is None:
        return {}
    return {"logprobs": request.top_logprobs, "return_tokens_as_token_ids": True}


def _token_id(text: Any) -> int | None:
    prefix = WIRE["token_id_prefix"]
    if isinstance(text, str) and text.startswith(prefix) and text[len(prefix) :].isdigit():
        return int(text[len(prefix) :])
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read_logprobs(data: Any, ids: list[int]) -> list[TokenLogprob] | None:
    """A chunk's `logprobs` (`tokens`, `token_logprobs`, `top_logprobs` as `{"token_id:N": logprob}`), one per id."""
    if not isinstance(data, dict) or not isinstance(data.get("token_logprobs"), list):
        return None
    tokens, values, tops = data.get("tokens") or [], data["token_logprobs"], data.get("top_logprobs") or []
    out = []
    for i, value in enumerate(values):
        token = _token_id(tokens[i]) if i < len(tokens) else None
        if token is None:
            token = ids[i] if i < len(ids) else None
        if token is None or not isinstance(value, (int, float)):
            continue
        top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
        pairs = [
            (t, float(v)) for k, v in top.items() if (t := _token_id(k)) is not None and isinstance(v, (int, float))
        ]
        out.append(TokenLogprob(token, float(value), tuple(sorted(pairs, key=lambda p: -p[1]))))
    return out


def _finish(reason: str, matched: Any) -> Finished:
    if reason == "stop":
        return Finished(FinishReason.STOP, matched if isinstance(matched, int) else None)
    if reason == "length":
        return Finished(FinishReason.LENGTH)
    raise EngineUnavailable(f"the engine ended the completion with finish_reason {reason!r:.80}")
