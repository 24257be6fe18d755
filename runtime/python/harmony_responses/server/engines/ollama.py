"""Ollama's `POST /api/generate` in raw mode: a text prompt in, text out, NDJSON.

Raw mode skips Ollama's template and its Harmony parser; ids can be neither sent nor received. The
prompt is the rendered token ids written back as text, with the control-token spellings inside
ordinary text (a user who typed `<|end|>`) escaped so Ollama's tokenizer cannot read them as control
tokens (`safety.escape_control_tokens`). `<|call|>` and `<|return|>` end the stream without text,
both as `done_reason: "stop"`: the end is reported as a stop without a token, and the server tells a
call from an answer by what it parsed. `options.num_predict` is always set; `format` takes the JSON
Schema for constrained decoding. `{"error": …}` lines and HTTP errors are engine failures.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

from ...encoding import HarmonyEncoding
from ...safety import escape_control_tokens
from .base import (
    EngineInfo,
    EngineOutput,
    EngineRequest,
    EngineUnavailable,
    Finished,
    FinishReason,
    malformed,
)
from .http import HttpEngine, Outputs, stream_error
from .reader import Framing


def prompt_as_text(encoding: HarmonyEncoding, prompt: Sequence[int]) -> str:
    """The prompt as text: control tokens spelled, ordinary text with any control-token spelling escaped."""
    out: list[str] = []
    run: list[int] = []
    for token in prompt:
        if encoding.is_special_token(token):
            if run:
                out.append(escape_control_tokens(encoding.decode(run)))
                run = []
            out.append(encoding.decode([token]))
        else:
            run.append(token)
    if run:
        out.append(escape_control_tokens(encoding.decode(run)))
    return "".join(out)


class OllamaEngine(HttpEngine):
    """Ollama `/api/generate` with `raw: true`."""

    ready_path = "/api/version"  # Ollama has no /health

    def __init__(
        self, base_url: str, encoding: HarmonyEncoding, *, model: str, timeout: float, max_connections: int
    ) -> None:
        super().__init__(base_url, timeout=timeout, max_connections=max_connections)
        self.encoding = encoding
        self.model = model
        self.info = EngineInfo(kind="ollama", target=self.base_url, output="text", json_constraint=True)

    def payload(self, request: EngineRequest) -> dict[str, Any]:
        s = request.sampling
        options: dict[str, Any] = {
            "num_predict": request.max_tokens,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "top_k": 0,
            "min_p": 0.0,
            "repeat_penalty": 1.0,
            "presence_penalty": s.presence_penalty,
            "frequency_penalty": s.frequency_penalty,
        }
        if s.seed is not None:
            options["seed"] = s.seed
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": prompt_as_text(self.encoding, request.prompt),
            "raw": True,
            "stream": True,
            "options": options,
        }
        body.update(constraint_fields(request))
        return body

    async def produce(self, request: EngineRequest) -> AsyncGenerator[EngineOutput, None]:
        finished: Finished | None = None

        def read(chunk: Any, out: Outputs) -> None:
            nonlocal finished
            message = stream_error(chunk)
            if message is not None:
                raise EngineUnavailable(f"the engine failed mid-stream: {message}")
            if not isinstance(chunk, dict):
                raise malformed("a line that is not an object", chunk)
            text = chunk.get("response")
            if text:
                if type(text) is not str:
                    raise malformed("response must be a string", text)
                out.text(text)
            if chunk.get("done"):
                reason = chunk.get("done_reason")
                if reason == "length":
                    finished = Finished(FinishReason.LENGTH)
                elif reason in ("stop", None):
                    finished = Finished(FinishReason.STOP)
                else:
                    raise EngineUnavailable(f"the engine ended with done_reason {reason!r:.80}")

        async with self.post("/api/generate", self.payload(request), Framing.NDJSON) as response:
            async for output in self.outputs(response, read):
                yield output
        if finished is None:
            raise EngineUnavailable("the engine ended the stream without a done line")
        yield finished


def constraint_fields(request: EngineRequest) -> dict[str, Any]:
    """The fields that constrain the completion: the JSON Schema (`format`). Stop strings are not sent: Ollama
    leaves a matched `options.stop` out of the text, so the completion would lose what the server continues
    from (the server cuts the stream itself instead)."""
    return {} if request.json_schema is None else {"format": dict(request.json_schema)}
