"""SGLang's native `POST /generate` with `input_ids`, streamed as SSE.

`output_ids` are cumulative on current SGLang by default and deltas with `--incremental-streaming-output`
(older releases: cumulative text, delta ids). Each chunk is told apart by `meta_info.completion_tokens`:
ids that continue the count are a delta, ids as long as the count are the whole completion so far.
`max_new_tokens` is always set (the default is 128), `skip_special_tokens: false` and
`no_stop_trim: true` keep the control tokens; `json_schema` (a string) constrains decoding.
`finish_reason` is `{"type": "stop", "matched": id}`, `{"type": "length"}` or `{"type": "abort"}`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

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


class SGLangEngine(HttpEngine):
    """SGLang `/generate`."""

    def __init__(self, base_url: str, *, timeout: float, max_connections: int) -> None:
        super().__init__(base_url, timeout=timeout, max_connections=max_connections)
        self.info = EngineInfo(
            kind="sglang", target=self.base_url, output="tokens", json_constraint=True, logprobs=True
        )

    def payload(self, request: EngineRequest) -> dict[str, Any]:
        s = request.sampling
        params: dict[str, Any] = {
            "max_new_tokens": request.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "presence_penalty": s.presence_penalty,
            "frequency_penalty": s.frequency_penalty,
            "stop_token_ids": list(request.stop_token_ids),
            "skip_special_tokens": False,
            "no_stop_trim": True,
        }
        if s.seed is not None:
            params["sampling_seed"] = s.seed
        params.update(constraint_fields(request))
        return {"input_ids": request.prompt, "stream": True, "sampling_params": params, **logprob_fields(request)}

    async def produce(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        seen = 0  # completion ids passed on so far
        finished: Finished | None = None

        def read(chunk: Any, out: Outputs) -> None:
            nonlocal seen, finished
            message = stream_error(chunk)
            if message is not None:
                raise EngineUnavailable(f"the engine failed mid-stream: {message}")
            if not isinstance(chunk, dict):
                raise malformed("a chunk that is not an object", chunk)
            ids = token_ids(chunk.get("output_ids") or [], "output_ids")
            meta = chunk.get("meta_info") or {}
            if type(meta) is not dict:
                raise malformed("meta_info must be an object", meta)
            count = meta.get("completion_tokens")
            new = _new_ids(ids, seen, count)
            if new:
                seen += len(new)
                out.ids(new, read_logprobs(meta, new))
            reason = meta.get("finish_reason")
            if reason is not None:
                finished = _finish(reason)

        async with self.post("/generate", self.payload(request)) as response:
            async for output in self.outputs(response, read):
                yield output
        if finished is None:
            raise EngineUnavailable("the engine ended the stream without a finish_reason")
        yield finished


def constraint_fields(request: EngineRequest) -> dict[str, Any]:
    """The sampling parameters that constrain the completion: stop strings (`stop`, kept in the output with
    `no_stop_trim`) and the JSON Schema (`json_schema`, a string)."""
    fields: dict[str, Any] = {}
    if request.stop_text:
        fields["stop"] = list(request.stop_text)
    if request.json_schema is not None:
        fields["json_schema"] = json.dumps(request.json_schema)
    return fields


def logprob_fields(request: EngineRequest) -> dict[str, Any]:
    """The request fields (beside `sampling_params`) that ask for log probabilities: `return_logprob` and
    `top_logprobs_num`."""
    if request.top_logprobs is None:
        return {}
    return {"return_logprob": True, "top_logprobs_num": request.top_logprobs}


def read_logprobs(meta: Any, new: list[int]) -> list[TokenLogprob] | None:
    """The log probabilities of a chunk's new ids: the last entries of `meta_info.output_token_logprobs`
    (`[logprob, id, text]`) and `output_top_logprobs`, whether the lists are cumulative or deltas."""
    values = meta.get("output_token_logprobs") if isinstance(meta, dict) else None
    if not isinstance(values, list) or len(values) < len(new):
        return None
    tops = meta.get("output_top_logprobs")
    tops = tops[-len(new) :] if isinstance(tops, list) and len(tops) >= len(new) else [None] * len(new)
    out = []
    for entry, top in zip(values[-len(new) :], tops, strict=True):
        if not (isinstance(entry, list) and len(entry) >= 2 and isinstance(entry[0], (int, float))):
            return None
        pairs = tuple(
            (int(t[1]), float(t[0])) for t in top or [] if isinstance(t, list) and len(t) >= 2 and t[0] is not None
        )
        out.append(TokenLogprob(int(entry[1]), float(entry[0]), pairs))
    return out


def _new_ids(ids: list[int], seen: int, count: Any) -> list[int]:
    """The ids of a chunk not passed on yet, whether the chunk is cumulative or a delta."""
    if not isinstance(count, int):
        return list(ids)  # no count to compare with: the server streams deltas or says nothing else
    if count == seen + len(ids):
        return list(ids)  # a delta (this also covers the first chunk, where both readings agree)
    if count == len(ids) and len(ids) >= seen:
        return list(ids[seen:])  # cumulative
    raise EngineUnavailable(
        f"cannot line up output_ids ({len(ids)} ids) with completion_tokens {count} after {seen} ids"
    )


def _finish(reason: Any) -> Finished:
    kind = reason.get("type") if isinstance(reason, dict) else reason
    if kind == "stop":
        matched = reason.get("matched") if isinstance(reason, dict) else None
        return Finished(FinishReason.STOP, matched if isinstance(matched, int) else None)
    if kind == "length":
        return Finished(FinishReason.LENGTH)
    message = reason.get("message") if isinstance(reason, dict) else None
    detail = f": {message}" if message else ""
    raise EngineUnavailable(f"the engine ended the completion with finish_reason {kind!r:.80}{detail:.200}")
