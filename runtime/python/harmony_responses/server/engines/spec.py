"""`--engine SPEC`: which engine serves, written `KIND[:TARGET][?OPTION=VALUE&…]`.

    demo                                   the demo engine (a deterministic stand-in for a model)
    demo:?tps=50                           ... paced at 50 tokens/s
    replay:PATH[?tps=100&first_token_ms=50&chunk=1&lockstep=1]   recorded completions (see engines.replay)
    vllm:URL[?model=NAME]                  vLLM /v1/completions
    sglang:URL                             SGLang /generate
    sglang-completions:URL[?model=NAME]    SGLang /v1/completions
    llamacpp:URL                           llama.cpp server /completion
    ollama:URL[?model=NAME]                Ollama /api/generate, raw mode

URL is the engine's base (`http://127.0.0.1:8001`, without `/v1`). `model` is the name the engine
knows the model by; without it `serve` asks the engine (`engines.discover`), else uses `--model`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl

from ...encoding import HarmonyEncoding
from .base import Engine


class EngineSpecError(ValueError):
    """An `--engine` value that names no engine or gives it bad options."""


@dataclass(frozen=True)
class EngineSpec:
    """A parsed `--engine` value."""

    kind: str
    target: str
    options: dict[str, str]


KINDS = ("demo", "replay", "vllm", "sglang", "sglang-completions", "llamacpp", "ollama")
_HTTP_KINDS = ("vllm", "sglang", "sglang-completions", "llamacpp", "ollama")
_OPTIONS: dict[str, tuple[str, ...]] = {
    "demo": ("tps", "chunk"),
    "replay": ("tps", "first_token_ms", "chunk", "lockstep"),
    "vllm": ("model",),
    "sglang": (),
    "sglang-completions": ("model",),
    "llamacpp": (),
    "ollama": ("model",),
}


ENGINES_HELP = """engines (--engine KIND[:TARGET][?OPTION=VALUE&...]):
  demo[:?tps=N&chunk=N]        the demo engine: a deterministic stand-in for a model (no GPU); tps paces it
                               (tokens/s, 0: as fast as read), chunk tokens per output (4)
  replay:FILE[?tps=100&first_token_ms=0&chunk=1&lockstep=1]
                               plays recorded completions (JSON Lines of {"completion": ...} or {"tokens": [...]},
                               optional "match"); lockstep=1 paces all streams on one decode clock, 0 one each
  vllm:URL[?model=NAME]        vLLM's /v1/completions with token ids
  sglang:URL                   SGLang's /generate with input_ids
  sglang-completions:URL[?model=NAME]
                               SGLang's /v1/completions
  llamacpp:URL                 llama.cpp server's /completion with token ids
  ollama:URL[?model=NAME]      Ollama's /api/generate in raw mode
URL is the engine's base, without /v1 (http://127.0.0.1:8001). Without ?model=, serve asks the engine which
models it serves (/v1/models; llama.cpp /props; Ollama /api/tags) and uses the only one, or stops with the list.
"""
"""`serve --help`'s list of engines and their options (kept beside `_OPTIONS`, which it describes)."""


def parse_engine_spec(text: str) -> EngineSpec:
    """`KIND[:TARGET][?OPTIONS]` → `EngineSpec`; `EngineSpecError` says what is wrong."""
    kind, _, rest = text.partition(":")
    if "?" in kind:
        kind, _, query = kind.partition("?")
        rest = "?" + query
    kind = kind.strip()
    if kind not in KINDS:
        raise EngineSpecError(f"--engine {text!r}: unknown engine {kind!r}; use one of {', '.join(KINDS)}")
    target, _, query = rest.partition("?")
    try:
        options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)))
    except ValueError:
        raise EngineSpecError(f"--engine {text!r}: options must be NAME=VALUE joined by '&'") from None
    unknown = sorted(set(options) - set(_OPTIONS[kind]))
    if unknown:
        allowed = ", ".join(_OPTIONS[kind]) or "none"
        raise EngineSpecError(f"--engine {text!r}: unknown option {unknown[0]!r} for {kind} (options: {allowed})")
    if kind in _HTTP_KINDS and not target.startswith(("http://", "https://")):
        raise EngineSpecError(
            f"--engine {text!r}: {kind} needs the engine's base URL, e.g. {kind}:http://127.0.0.1:8001"
        )
    if kind == "replay" and not target:
        raise EngineSpecError(f"--engine {text!r}: replay needs a recordings file, e.g. replay:recordings.jsonl")
    if kind == "demo" and target:
        raise EngineSpecError(f"--engine {text!r}: demo takes no target, only options (demo:?tps=50)")
    return EngineSpec(kind, target, options)


def _number(spec: EngineSpec, name: str, default: float, convert: Callable[[str], float] = float) -> float:
    raw = spec.options.get(name)
    if raw is None:
        return default
    try:
        value = convert(raw)
    except ValueError:
        raise EngineSpecError(f"--engine {spec.kind}: option {name}={raw!r} is not a number") from None
    if value < 0:
        raise EngineSpecError(f"--engine {spec.kind}: option {name} must be >= 0, got {raw}")
    return value


def build_engine(text: str, encoding: HarmonyEncoding, *, model: str, timeout: float, max_connections: int) -> Engine:
    """The engine an `--engine` value names, ready to serve (HTTP adapters connect on first use)."""
    spec = parse_engine_spec(text)
    engine_model = spec.options.get("model") or model
    if spec.kind == "demo":
        from .demo import DemoEngine

        chunk = int(_number(spec, "chunk", 4, int)) or 1
        return DemoEngine(encoding, tokens_per_second=_number(spec, "tps", 0.0), chunk=chunk)
    if spec.kind == "replay":
        from .replay import RecordingError, ReplayEngine, load_recordings

        try:
            recordings = load_recordings(spec.target, encoding)
        except RecordingError as exc:
            raise EngineSpecError(f"--engine {text!r}: {exc}") from None
        return ReplayEngine(
            recordings,
            encoding,
            tokens_per_second=_number(spec, "tps", 100.0),
            first_token_s=_number(spec, "first_token_ms", 0.0) / 1000,
            chunk=int(_number(spec, "chunk", 1, int)) or 1,
            lockstep=bool(_number(spec, "lockstep", 1, int)),
            source=spec.target,
        )
    if spec.kind in ("vllm", "sglang-completions"):
        from .openai_completions import Flavor, OpenAICompletionsEngine

        flavor: Flavor = "vllm" if spec.kind == "vllm" else "sglang"
        return OpenAICompletionsEngine(
            spec.target, flavor=flavor, model=engine_model, timeout=timeout, max_connections=max_connections
        )
    if spec.kind == "sglang":
        from .sglang import SGLangEngine

        return SGLangEngine(spec.target, timeout=timeout, max_connections=max_connections)
    if spec.kind == "llamacpp":
        from .llamacpp import LlamaCppEngine

        return LlamaCppEngine(spec.target, encoding, timeout=timeout, max_connections=max_connections)
    from .ollama import OllamaEngine

    return OllamaEngine(spec.target, encoding, model=engine_model, timeout=timeout, max_connections=max_connections)
