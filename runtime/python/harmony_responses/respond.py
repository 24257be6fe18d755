"""`harmony-responses respond`: an Open Responses request and a Harmony completion → the response.

Prints the `ResponseResource` JSON, the SSE stream (`--stream`, or `"stream": true` in the request), or
the Chat Completions form (`--chat`, with streaming: its chunks as SSE `data:` lines). A request the
model cannot take prints its 400 error body on standard error and exits 2; so does a request field
`respond` does not honour (see `RESPOND_CAPABILITIES`): the completion is given, not sampled, so
`temperature`, `seed` and the like are refused rather than echoed as if they had been used.

`max_output_tokens` is honoured by cutting the completion after that many tokens: a turn the cut
interrupts ends `incomplete` with `incomplete_details.reason = "max_output_tokens"`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from collections.abc import Iterator
from typing import Any

from ._tables import spec as _spec
from .bridge import (
    DONE,
    ResponseStreamer,
    SSEStreamer,
    chat_completion_chunks,
    counting_ids,
    random_id,
    to_chat_completion,
    tokens_from_text,
)
from .bridge.items import feed_all
from .bridge.request import Capabilities, RequestError, parse_request, request_to_conversation
from .bridge.sse import ReasoningNames
from .cli_input import (
    STDIN,
    CommandError,
    InputError,
    display_name,
    load_encoding,
    read_json,
    read_text,
    read_token_ids,
)
from .encoding import HarmonyEncoding
from .errors import HarmonyError
from .models import Role
from .types import CreateResponseBody, ResponseResource, StreamingEvent

RESPOND_CAPABILITIES = Capabilities(max_output_tokens=True)
"""What `respond` honours beyond the prompt: a token budget, by cutting the given completion."""

_STOP = _spec.CHAT_FINISH_REASONS["stop"]  # the engines' finish reasons, as Chat Completions names them
_LENGTH = _spec.CHAT_FINISH_REASONS["incomplete"]


def add_respond_parser(sub: Any) -> None:
    """Register the `respond` subcommand on the CLI's subparsers."""
    p = sub.add_parser("respond", help="turn an Open Responses request and a Harmony completion into the response")
    p.add_argument("--request", required=True, help="request JSON file (CreateResponseBody), or -")
    p.add_argument("--completion", required=True, help="the model's completion after <|start|>assistant, or -")
    p.add_argument("--tokens", action="store_true", help="the completion file holds a JSON list of token ids")
    p.add_argument("--stream", action="store_true", help="print the SSE event stream (as does stream: true)")
    p.add_argument("--chat", action="store_true", help="print the Chat Completions form instead")
    p.add_argument(
        "--reasoning-events",
        choices=["spec", "openai"],
        default="spec",
        help="raw reasoning event names: response.reasoning.* (spec) or response.reasoning_text.* (openai)",
    )
    p.add_argument(
        "--finish",
        choices=[_STOP, _LENGTH],
        help="how the engine ended the completion (its finish reason): on a stop token it may have left out, or "
        "at the token budget; unknown by default (text is taken as stopped unless it ends inside a header, "
        "reasoning or a call's JSON; token ids as cut if they end mid-message)",
    )
    p.add_argument("--fixed-ids", action="store_true", help="counting ids and created_at 0, for reproducible output")
    p.set_defaults(func=respond, file=None)


def _completion_ids(args: argparse.Namespace, encoding: HarmonyEncoding) -> list[int]:
    """The completion's token ids from `--tokens` input; an id outside the vocabulary is an error naming it."""
    ids = read_token_ids(args.completion, "--completion")
    try:
        encoding.decode_bytes(ids)
    except HarmonyError:
        for i, token in enumerate(ids):
            try:
                encoding.decode_bytes([token])
            except HarmonyError:
                where = f"$[{i}]"
                raise InputError(
                    args.completion, where, f"token id {token} is not in the vocabulary", "--completion"
                ) from None
    return ids


def _turn_cut(completion: list[int], budget: int, encoding: HarmonyEncoding) -> bool:
    """True when keeping `budget` tokens drops some the turn still needed (it had not ended with a stop token)."""
    if len(completion) <= budget:
        return False
    ends = set(encoding.stop_tokens_for_assistant_actions())
    return not any(token in ends for token in completion[:budget])


def _events(
    completion: list[int] | list[str],
    encoding: HarmonyEncoding,
    body: CreateResponseBody,
    stopped: bool | None,
    **options: Any,
) -> Iterator[StreamingEvent]:
    """The response's events; a turn the budget cut ends `incomplete` even between two messages."""
    streamer = ResponseStreamer(encoding, body, **options)
    yield from streamer.start()
    for events in feed_all(completion, streamer.feed, streamer.feed_text):
        yield from events
    yield from streamer.finish(stopped=stopped)


def _sse(
    completion: list[int] | list[str],
    encoding: HarmonyEncoding,
    body: CreateResponseBody,
    stopped: bool | None,
    reasoning_names: ReasoningNames,
    **options: Any,
) -> Iterator[str]:
    """The response as SSE text, deltas written straight from their text (the same bytes as `to_sse`)."""
    streamer = SSEStreamer(encoding, body, reasoning_names=reasoning_names, **options)
    yield streamer.start()
    yield from feed_all(completion, streamer.feed, streamer.feed_text)
    yield streamer.finish(stopped=stopped)


def _read_request(args: argparse.Namespace) -> CreateResponseBody | None:
    raw = read_json(args.request, "--request")
    try:
        return parse_request(raw, RESPOND_CAPABILITIES)
    except RequestError as exc:
        print(json.dumps(exc.to_body(), ensure_ascii=True), file=sys.stderr)
        return None


def respond(args: argparse.Namespace) -> int:
    if args.request == STDIN and args.completion == STDIN:
        raise CommandError("--request and --completion both read standard input; give one of them a file")
    body = _read_request(args)
    if body is None:
        return 2
    encoding = load_encoding()
    try:
        prompt = encoding.render_conversation_for_completion(request_to_conversation(body), Role.ASSISTANT)
    except RequestError as exc:
        print(json.dumps(exc.to_body(), ensure_ascii=True), file=sys.stderr)
        return 2
    except HarmonyError as exc:
        raise CommandError(f"{display_name(args.request, '--request')}: $: {exc}") from None
    text = None if args.tokens else read_text(args.completion, "--completion")
    ids = _completion_ids(args, encoding) if text is None else None
    cut = False
    budget = body.max_output_tokens
    if budget is not None:
        ids = ids if ids is not None else list(tokens_from_text([text or ""], encoding))
        cut = _turn_cut(ids, budget, encoding)
        ids = ids[:budget]
    completion: list[int] | list[str] = ids if ids is not None else [text or ""]
    options: dict[str, Any] = {"input_tokens": len(prompt), "ids": counting_ids() if args.fixed_ids else random_id}
    # A budget that cut the turn overrides the finish reason given; without either, the builder decides.
    stopped = False if cut else None if args.finish is None else args.finish == _STOP
    if args.fixed_ids:
        options.update(created_at=0, clock=lambda: 0.0)
    out = sys.stdout
    if (args.stream or body.stream is True) and not args.chat:
        for text in _sse(completion, encoding, body, stopped, args.reasoning_events, **options):
            out.write(text)
        return 0
    events = _events(completion, encoding, body, stopped, **options)
    if args.stream or body.stream is True:
        for chunk in chat_completion_chunks(events):
            out.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n")
        out.write(f"data: {DONE}\n\n")
        return 0
    (last,) = deque(events, maxlen=1)  # the closing event carries the final response
    response: ResponseResource = last.response  # type: ignore[union-attr]
    data = to_chat_completion(response) if args.chat else response.model_dump(mode="json")
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    return 0
