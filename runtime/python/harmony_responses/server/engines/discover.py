"""Asking an engine which models it serves, so `serve --engine vllm:URL` works without `?model=`.

Each engine lists its models at a documented place:

    vllm, sglang-completions, sglang   GET /v1/models   {"data": [{"id": NAME}, ...]}  (OpenAI's list)
    llamacpp                           GET /v1/models, else GET /props  {"model_path": PATH}
    ollama                             GET /api/tags    {"models": [{"name": NAME}, ...]}

`discover` asks once, before the server starts, with a short timeout. An engine that sends its model name
with every request (vLLM, SGLang's `/v1/completions`, Ollama) and was given no `?model=` gets the only model
it lists; when it lists several, or none, `serve` stops with the list (`DiscoveryError`). An engine that
cannot be asked (not up yet, no listing) leaves the name to `--model`, as before, and the start-up lines
say so. For llama.cpp and SGLang's `/generate`, which take no model name, the answer only labels the
start-up lines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from .spec import EngineSpec, parse_engine_spec

NEEDS_NAME = ("vllm", "sglang-completions", "ollama")
"""The engines whose requests carry the model's name (`?model=`)."""


class DiscoveryError(ValueError):
    """The engine lists several models, or none, and `?model=` does not pick one."""


@dataclass(frozen=True)
class Discovery:
    """What the engine said: its models (empty when it could not be asked), and why not."""

    models: tuple[str, ...]
    problem: str | None = None  # the engine could not be asked: its reason


def _openai_list(data: Any) -> list[str]:
    items = data.get("data") if isinstance(data, dict) else None
    return [m["id"] for m in items or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]


def _props(data: Any) -> list[str]:
    path = data.get("model_path") if isinstance(data, dict) else None
    return [path] if isinstance(path, str) and path else []


def _ollama_tags(data: Any) -> list[str]:
    items = data.get("models") if isinstance(data, dict) else None
    return [m["name"] for m in items or [] if isinstance(m, dict) and isinstance(m.get("name"), str)]


_PLACES: dict[str, Sequence[tuple[str, Callable[[Any], list[str]]]]] = {
    "vllm": (("/v1/models", _openai_list),),
    "sglang-completions": (("/v1/models", _openai_list),),
    "sglang": (("/v1/models", _openai_list),),
    "llamacpp": (("/v1/models", _openai_list), ("/props", _props)),
    "ollama": (("/api/tags", _ollama_tags),),
}


def list_models(spec: EngineSpec, *, timeout: float = 3.0) -> Discovery:
    """The models the engine lists, asked at its documented places in turn; never raises for the engine's sake."""
    import httpx

    places = _PLACES.get(spec.kind)
    if not places:
        return Discovery(())
    base = spec.target.rstrip("/")
    problem = None
    with httpx.Client(timeout=timeout) as client:
        for path, read in places:
            try:
                reply = client.get(base + path)
            except httpx.HTTPError as exc:
                return Discovery((), f"{type(exc).__name__} at {path}")  # nothing listens: later places won't either
            if reply.status_code != 200:
                problem = f"{path} answered {reply.status_code}"
                continue
            try:
                models = read(reply.json())
            except ValueError:
                problem = f"{path} did not answer JSON"
                continue
            return Discovery(tuple(models), None if models else f"{path} lists no model")
    return Discovery((), problem)


def with_model(engine: str, model: str) -> str:
    """The `--engine` value with `?model=` set."""
    joiner = "&" if "?" in engine else "?"
    return f"{engine}{joiner}model={quote(model, safe='/:.-_')}"


def resolve_engine(engine: str, served: str, *, timeout: float = 3.0) -> tuple[str, str, str | None]:
    """`(engine, model, note)`: the `--engine` value to serve (with the discovered `?model=` when it needs one),
    the engine's name for the model, and a note for the start-up lines; `DiscoveryError` to stop."""
    spec = parse_engine_spec(engine)
    given = spec.options.get("model")
    if spec.kind not in _PLACES:
        return engine, served, None
    if given and spec.kind in NEEDS_NAME:
        return engine, given, None
    found = list_models(spec, timeout=timeout)
    if found.problem is not None and not found.models:
        if spec.kind in NEEDS_NAME:
            note = f"could not ask the engine which models it serves ({found.problem}): sending {served!r}"
            return engine, served, note
        return engine, "(not listed)", None
    if spec.kind not in NEEDS_NAME:
        return engine, ", ".join(found.models), None
    if len(found.models) == 1:
        return with_model(engine, found.models[0]), found.models[0], "asked the engine: it serves one model"
    if served in found.models:
        return with_model(engine, served), served, "the engine serves several models; --model picked this one"
    listed = ", ".join(found.models)
    raise DiscoveryError(
        f"{spec.kind} at {spec.target} serves {len(found.models)} models ({listed}): "
        f"pick one with --engine '{with_model(engine, found.models[0])}'"
    )
