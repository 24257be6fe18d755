"""The four engines' streamed wire formats, as ../shared/docs/engines.md describes them, with their defaults.

Each fake applies the real engine's defaults when the request leaves a field out (vLLM's `max_tokens`
of 16, `skip_special_tokens` true, SGLang's `max_new_tokens` of 128), so an adapter that forgets one
fails its test the way it would fail in production.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from harmony_responses import HarmonyEncoding

from fakemodel import EOG, Behaviour, behaviour, fake_logprob, fake_top
from httpserver import Action, Cut, Handler, Request, Sleep, Status


@dataclass
class Options:
    fail_rate: float = 0.0
    seed: int = 0
    no_token_ids: bool = False  # an older vLLM/SGLang: /v1/completions returns no ids
    incremental: bool = False  # SGLang --incremental-streaming-output
    token_delay_ms: float | None = None


class Detok:
    """Incremental detokenization: an ordinary token's text comes out once its characters are complete."""

    def __init__(self, encoding: HarmonyEncoding, special: Callable[[int], str]) -> None:
        self.encoding = encoding
        self.special = special
        self.pending = b""

    def step(self, token: int) -> str:
        if self.encoding.is_special_token(token):
            return self.special(token)
        self.pending += self.encoding.decode_bytes([token])
        try:
            text, self.pending = self.pending.decode("utf-8"), b""
        except UnicodeDecodeError as exc:
            if exc.reason != "unexpected end of data":
                raise
            text, self.pending = self.pending[: exc.start].decode("utf-8"), self.pending[exc.start :]
        return text

    @property
    def holding(self) -> bool:
        return bool(self.pending)


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def next(self) -> int:
        self.n += 1
        return self.n


def _json_line(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode()


def _sse(data: Any) -> bytes:
    return b"data: " + (data if isinstance(data, bytes) else _json_line(data)) + b"\n\n"


def _run_length(
    b: Behaviour, limit: int, stops: set[int], strings: Any = None, encoding: HarmonyEncoding | None = None
) -> tuple[list[int], int | str | None]:
    """The tokens generated until a stop token or a stop string (their ids kept: vLLM's and SGLang's
    `token_ids`/`output_ids` keep them) or the budget; the stop token or string, or None for `length`."""
    out: list[int] = []
    words = [w for w in strings or [] if isinstance(w, str) and w]
    text = ""
    for token in b.completion:
        if len(out) >= limit:
            break
        out.append(token)
        if token in stops:
            return out, token
        if words and encoding is not None:
            text += encoding.decode([token])
            for word in words:
                if text.endswith(word):
                    return out, word
    return out, None


def _schema_of(value: Any) -> Any:
    """A constraint field's JSON Schema (SGLang sends it as a string), or None when the field is absent."""
    if isinstance(value, str):
        return json.loads(value)
    return value


async def _frame(b: Behaviour, frame: bytes) -> AsyncIterator[Action]:
    for piece in b.pieces(frame):
        yield piece
        yield Sleep(0.0005)


async def _failures(b: Behaviour, emitted: int, error_frame: bytes) -> AsyncIterator[Action]:
    """Mid-stream trouble due at this point: an error frame, a cut, or a long stall."""
    if b.error_after is not None and emitted >= b.error_after:
        yield error_frame
        b.error_after = None
        b.completion = []
    elif b.cut_after is not None and emitted >= b.cut_after:
        yield Cut()
    elif b.stall_after is not None and emitted >= b.stall_after:
        yield Sleep(60)


# Valid JSON of the wrong shape for each wire format (SCENARIO=shape_a sends the first after the first tokens).
MALFORMED: dict[str, list[Any]] = {
    "completions": [{"choices": "x"}, {"choices": [{"token_ids": "abc"}]}, {"choices": [1]},
                    {"choices": [{"token_ids": None, "text": 5}]}, [1, 2], {"choices": [{"token_ids": [1.5]}]},
                    {"choices": [{"token_ids": [10**9]}]}],  # an id past the vocabulary
    "generate": [{"output_ids": "abc", "meta_info": {}}, {"output_ids": [1], "meta_info": "x"}, [1, 2], "x"],
    "llamacpp": [{"tokens": "abc"}, {"tokens": [1], "content": 5}, [1, 2], {"tokens": {"a": 1}}],
    "ollama": [{"response": 5, "done": False}, [1, 2], "x", {"response": ["a"], "done": False}],
}  # fmt: skip


def _malformed(b: Behaviour, kind: str, normal: bytes, sse: bool = True) -> bytes:
    """The error frame of this request: the malformed chunk its scenario names, else `normal`."""
    if b.shape is None:
        return normal
    chunk = MALFORMED[kind][b.shape % len(MALFORMED[kind])]
    return _sse(chunk) + _sse(b"[DONE]") if sse else _json_line(chunk) + b"\n"


def _error_body(message: str, code: int) -> bytes:
    return _json_line(
        {"error": {"message": message, "type": "BadRequestError" if code < 500 else "InternalError", "code": code}}
    )


async def _before(b: Behaviour, content_type: str, body: bytes | None = None) -> AsyncIterator[Action]:
    if b.stall_before:
        yield Sleep(b.stall_before)
    if b.error_before is not None:
        yield Status(b.error_before)
        yield body or _error_body(f"fake engine: scenario {b.name}", b.error_before)
        return
    yield Status(200, content_type)


def _int_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(t, int) for t in value)


async def _bad_request(message: str) -> AsyncIterator[Action]:
    yield Status(400)
    yield _error_body(message, 400)


def openai_completions(encoding: HarmonyEncoding, options: Options, flavor: str) -> Handler:
    """vLLM (`flavor="vllm"`) or SGLang (`"sglang"`) `/v1/completions`."""
    counter = Counter()

    async def handle(request: Request) -> AsyncIterator[Action]:
        body = request.json()
        prompt = body.get("prompt")
        if not _int_list(prompt):
            async for a in _bad_request("prompt must be a list of token ids here"):
                yield a
            return
        if flavor == "vllm":  # `structured_outputs.json`; the old `guided_json` is ignored since v0.12
            schema = (body.get("structured_outputs") or {}).get("json")
        else:
            schema = _schema_of(body.get("json_schema"))
        b = behaviour(
            encoding,
            encoding.decode(prompt),
            fail_rate=options.fail_rate,
            counter=counter.next(),
            seed=options.seed,
            schema=schema,
        )
        if options.token_delay_ms is not None and b.name != "slow":
            b.token_delay = options.token_delay_ms / 1000
        limit = body.get("max_tokens") or 16  # vLLM and SGLang turn a missing or null max_tokens into 16
        skip = body.get("skip_special_tokens", True)
        keep_stop = body.get("include_stop_str_in_output" if flavor == "vllm" else "no_stop_trim", False)
        ids_on = bool(body.get("return_token_ids")) and not options.no_token_ids
        stops = set(body.get("stop_token_ids") or []) | set(EOG)
        tokens, stop = _run_length(b, limit, stops, body.get("stop"), encoding)
        detok = Detok(encoding, lambda t: "" if skip else encoding.decode([t]))
        async for a in _before(b, "text/event-stream"):
            yield a
        if b.error_before is not None:
            return
        error_frame = _malformed(
            b,
            "completions",
            _sse(
                {"error": {"message": "fake engine: CUDA error mid-stream", "type": "InternalServerError", "code": 500}}
            )
            + _sse(b"[DONE]"),
        )
        groups = b.chunks(tokens)
        emitted = 0
        for k, group in enumerate(groups):
            async for a in _failures(b, emitted, error_frame):
                yield a
            if not b.completion:
                return
            text = "".join("" if (t == stop and not keep_stop) else detok.step(t) for t in group)
            choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": None}
            if ids_on:
                choice["token_ids"] = group
                if k == 0:
                    choice["prompt_token_ids"] = prompt
            if isinstance(body.get("logprobs"), int) and not isinstance(body.get("logprobs"), bool):
                as_ids = bool(body.get("return_tokens_as_token_ids"))

                def key(t: int, as_ids: bool = as_ids) -> str:
                    return f"token_id:{t}" if as_ids else encoding.decode([t])

                choice["logprobs"] = {
                    "tokens": [key(t) for t in group],
                    "token_logprobs": [fake_logprob(t) for t in group],
                    "top_logprobs": [{key(i): lp for i, lp in fake_top(t, body["logprobs"])} for t in group],
                    "text_offset": [0 for _ in group],
                }
            if k == len(groups) - 1 and not b.end_without_finish:
                choice["finish_reason"] = "stop" if stop is not None else "length"
                if flavor == "vllm":
                    choice["stop_reason"] = stop
                else:
                    choice["matched_stop"] = stop
            chunk = {
                "id": "cmpl-fake",
                "object": "text_completion",
                "created": int(time.time()),
                "model": body.get("model"),
                "choices": [choice],
            }
            async for a in _frame(b, _sse(chunk)):
                yield a
            emitted += len(group)
            yield Sleep(b.token_delay)
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(tokens),
                "total_tokens": len(prompt) + len(tokens),
            }
            yield _sse({"id": "cmpl-fake", "object": "text_completion", "choices": [], "usage": usage})
        yield _sse(b"[DONE]")

    return handle


def sglang_generate(encoding: HarmonyEncoding, options: Options) -> Handler:
    """SGLang `/generate`: cumulative `output_ids` and `text` (or deltas with `incremental`)."""
    counter = Counter()

    async def handle(request: Request) -> AsyncIterator[Action]:
        body = request.json()
        prompt = body.get("input_ids")
        if not _int_list(prompt):
            async for a in _bad_request("input_ids must be a list of token ids"):
                yield a
            return
        params = body.get("sampling_params") or {}
        b = behaviour(
            encoding,
            encoding.decode(prompt),
            fail_rate=options.fail_rate,
            counter=counter.next(),
            seed=options.seed,
            schema=_schema_of(params.get("json_schema")),
        )
        limit = params.get("max_new_tokens") or 128
        skip = params.get("skip_special_tokens", True)
        stops = set(params.get("stop_token_ids") or []) | set(EOG)
        tokens, stop = _run_length(b, limit, stops, params.get("stop"), encoding)
        detok = Detok(encoding, lambda t: "" if skip else encoding.decode([t]))
        async for a in _before(b, "text/event-stream"):
            yield a
        if b.error_before is not None:
            return
        error_frame = _malformed(
            b, "generate", _sse({"error": {"message": "fake engine: scheduler died"}}) + _sse(b"[DONE]")
        )
        groups = b.chunks(tokens)
        done_ids: list[int] = []
        text_so_far = ""
        emitted = 0
        for k, group in enumerate(groups):
            async for a in _failures(b, emitted, error_frame):
                yield a
            if not b.completion:
                return
            delta = "".join("" if (t == stop and not params.get("no_stop_trim")) else detok.step(t) for t in group)
            text_so_far += delta
            done_ids += group
            meta: dict[str, Any] = {"id": "fake", "finish_reason": None, "prompt_tokens": len(prompt),
                                    "completion_tokens": len(done_ids), "cached_tokens": 0}  # fmt: skip
            if k == len(groups) - 1 and not b.end_without_finish:
                meta["finish_reason"] = (
                    {"type": "stop", "matched": stop} if stop is not None else {"type": "length", "length": limit}
                )
            if body.get("return_logprob"):  # cumulative lists, or deltas with --incremental-streaming-output
                n = int(body.get("top_logprobs_num") or 0)
                these = group if options.incremental else done_ids
                meta["output_token_logprobs"] = [[fake_logprob(t), t, None] for t in these]
                meta["output_top_logprobs"] = [[[lp, i, None] for i, lp in fake_top(t, n)] or None for t in these]
            chunk = {
                "text": delta if options.incremental else text_so_far,
                "output_ids": group if options.incremental else list(done_ids),
                "meta_info": meta,
            }
            async for a in _frame(b, _sse(chunk)):
                yield a
            emitted += len(group)
            yield Sleep(b.token_delay)
        yield _sse(b"[DONE]")

    return handle


def llamacpp_completion(encoding: HarmonyEncoding, options: Options) -> Handler:
    """llama.cpp `/completion`: one token per chunk, silent end-of-generation tokens, no `[DONE]`."""
    counter = Counter()

    async def handle(request: Request) -> AsyncIterator[Action]:
        body = request.json()
        prompt = body.get("prompt")
        if not _int_list(prompt):
            async for a in _bad_request("this fake takes token-id prompts only"):
                yield a
            return
        b = behaviour(
            encoding,
            encoding.decode(prompt),
            fail_rate=options.fail_rate,
            counter=counter.next(),
            seed=options.seed,
            schema=body.get("json_schema"),
        )
        n_predict = body.get("n_predict", -1)
        limit = n_predict if isinstance(n_predict, int) and n_predict >= 0 else 10**9
        tokens, stop = _run_length(b, limit, set(EOG))
        detok = Detok(encoding, lambda t: encoding.decode([t]))  # user-defined control tokens render as text
        async for a in _before(b, "text/event-stream"):
            yield a
        if b.error_before is not None:
            return
        error_frame = _malformed(
            b, "llamacpp", _sse({"error": {"code": 500, "message": "fake engine: slot failed", "type": "server_error"}})
        )
        predicted = 0
        unsent: list[int] = []  # tokens whose chunk has not gone yet
        for token in tokens:
            async for a in _failures(b, predicted, error_frame):
                yield a
            if not b.completion:
                return
            predicted += 1
            if token in EOG:
                break  # end-of-generation: no text, no chunk
            content = detok.step(token)
            unsent.append(token)
            if detok.holding and not content:
                continue  # half a UTF-8 character: no chunk; this id will seem missing (its probability comes later)
            chunk: dict[str, Any] = {"index": 0, "content": content, "stop": False, "id_slot": 0,
                                     "tokens_predicted": predicted, "tokens_evaluated": len(prompt)}  # fmt: skip
            if body.get("return_tokens"):
                chunk["tokens"] = [token]
            if (body.get("n_probs") or 0) > 0:

                def prob(t: int, lp: float) -> dict[str, Any]:
                    data = encoding.decode_bytes([t])
                    return {"id": t, "token": data.decode("utf-8", "replace"), "bytes": list(data), "logprob": lp}

                chunk["completion_probabilities"] = [  # every token since the last chunk, held-back ones too
                    {
                        **prob(t, fake_logprob(t)),
                        "top_logprobs": [prob(i, lp) for i, lp in fake_top(t, body["n_probs"])],
                    }
                    for t in unsent
                ]
            unsent = []
            async for a in _frame(b, _sse(chunk)):
                yield a
            yield Sleep(b.token_delay)
        if b.end_without_finish:
            return
        final = {
            "index": 0,
            "content": "",
            "tokens": [],
            "stop": True,
            "stop_type": "eos" if stop is not None else "limit",
            "stopping_word": "",
            "tokens_predicted": predicted,
            "tokens_evaluated": len(prompt),
            "truncated": False,
            "timings": {"predicted_n": predicted},
        }
        async for a in _frame(b, _sse(final)):
            yield a

    return handle


def ollama_generate(encoding: HarmonyEncoding, options: Options) -> Handler:
    """Ollama `/api/generate` in raw mode: text in, NDJSON text out, silent end tokens."""
    counter = Counter()

    async def handle(request: Request) -> AsyncIterator[Action]:
        body = request.json()
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or body.get("raw") is not True:
            yield Status(400)
            yield _json_line({"error": "this fake serves raw text prompts only"})
            return
        fmt = body.get("format")  # a JSON Schema, or "json" for any JSON
        b = behaviour(
            encoding,
            prompt,
            fail_rate=options.fail_rate,
            counter=counter.next(),
            seed=options.seed,
            schema={} if fmt == "json" else fmt,
        )
        num_predict = (body.get("options") or {}).get("num_predict", -1)
        limit = num_predict if isinstance(num_predict, int) and num_predict >= 0 else 10**9
        tokens, stop = _run_length(b, limit, set(EOG))
        detok = Detok(encoding, lambda t: encoding.decode([t]))
        async for a in _before(b, "application/x-ndjson", _json_line({"error": f"fake engine: scenario {b.name}"})):
            yield a
        if b.error_before is not None:
            return
        error_frame = _malformed(b, "ollama", _json_line({"error": "fake engine: runner crashed"}) + b"\n", sse=False)
        model = body.get("model")
        for i, token in enumerate(tokens):
            async for a in _failures(b, i, error_frame):
                yield a
            if not b.completion:
                return
            if token in EOG:
                break
            text = detok.step(token)
            if not text:
                continue  # Ollama drops empty chunks
            line = _json_line({"model": model, "created_at": "2026-11-30T00:00:00Z", "response": text, "done": False})
            async for a in _frame(b, line + b"\n"):
                yield a
            yield Sleep(b.token_delay)
        if b.end_without_finish:
            return
        final = {
            "model": model,
            "created_at": "2026-11-30T00:00:00Z",
            "response": "",
            "done": True,
            "done_reason": "stop" if stop is not None else "length",
            "prompt_eval_count": 10,
            "eval_count": len(tokens),
        }
        yield _json_line(final) + b"\n"

    return handle


ROUTES: dict[str, Callable[[HarmonyEncoding, Options], dict[str, Handler]]] = {
    "vllm": lambda enc, opt: {"/v1/completions": openai_completions(enc, opt, "vllm")},
    "sglang": lambda enc, opt: {
        "/generate": sglang_generate(enc, opt),
        "/v1/completions": openai_completions(enc, opt, "sglang"),
    },
    "llamacpp": lambda enc, opt: {"/completion": llamacpp_completion(enc, opt)},
    "ollama": lambda enc, opt: {"/api/generate": ollama_generate(enc, opt)},
}

# `all`: every engine in one process, each under its own path prefix (`/vllm/v1/completions`), with the
# variants that need other options under their own prefix too.
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "vllm": ("vllm", {}),
    "vllm-text-only": ("vllm", {"no_token_ids": True}),
    "sglang": ("sglang", {}),
    "sglang-incremental": ("sglang", {"incremental": True}),
    "llamacpp": ("llamacpp", {}),
    "ollama": ("ollama", {}),
}


def all_routes(encoding: HarmonyEncoding, options: Options) -> dict[str, Handler]:
    routes: dict[str, Handler] = {}
    for prefix, (kind, changes) in VARIANTS.items():
        variant = Options(**{**options.__dict__, **changes})
        for path, handler in ROUTES[kind](encoding, variant).items():
            routes[f"/{prefix}{path}"] = handler
    return routes


def model_listings(kind: str, models: list[str]) -> dict[str, Any]:
    """The GET places where each engine lists the models it serves, in its documented shape (empty: none)."""
    if not models:
        return {}
    openai_list = {
        "object": "list",
        "data": [
            {"id": m, "object": "model", "created": 1764460800, "owned_by": kind, "root": m, "max_model_len": 131072}
            for m in models
        ],
    }
    if kind in ("vllm", "sglang"):
        return {"/v1/models": openai_list}
    if kind == "llamacpp":  # llama.cpp serves one model: /props names its file
        return {"/v1/models": openai_list, "/props": {"model_path": models[0], "total_slots": 1}}
    if kind == "ollama":
        tags = [{"name": m, "model": m, "modified_at": "2026-11-30T00:00:00Z", "size": 13780173839} for m in models]
        return {"/api/tags": {"models": tags}}
    return {}
