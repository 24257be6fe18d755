"""`harmony-responses respond`: an Open Responses request and a Harmony completion → the response.

Prints the `ResponseResource` JSON, the SSE stream (`--stream`), or the Chat Completions form (`--chat`,
with `--stream`: its chunks as SSE `data:` lines). A request the model cannot take prints its 400 error
body on standard error and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .bridge import (
    DONE,
    build_response,
    chat_completion_chunks,
    counting_ids,
    random_id,
    stream_response,
    to_chat_completion,
    to_sse,
)
from .bridge.request import RequestError, parse_request, request_to_conversation
from .encoding import HarmonyEncodingName, load_harmony_encoding
from .errors import HarmonyError
from .models import Role


def add_respond_parser(sub: Any) -> None:
    """Register the `respond` subcommand on the CLI's subparsers."""
    p = sub.add_parser("respond", help="turn an Open Responses request and a Harmony completion into the response")
    p.add_argument("--request", required=True, help="request JSON file (CreateResponseBody)")
    p.add_argument("--completion", required=True, help="the model's completion after <|start|>assistant, or -")
    p.add_argument("--tokens", action="store_true", help="the completion file holds a JSON list of token ids")
    p.add_argument("--stream", action="store_true", help="print the SSE event stream")
    p.add_argument("--chat", action="store_true", help="print the Chat Completions form instead")
    p.add_argument(
        "--reasoning-events",
        choices=["spec", "openai"],
        default="spec",
        help="raw reasoning event names: response.reasoning.* (spec) or response.reasoning_text.* (openai)",
    )
    p.add_argument("--fixed-ids", action="store_true", help="counting ids and created_at 0, for reproducible output")
    p.set_defaults(func=respond, file=None)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def respond(args: argparse.Namespace) -> int:
    try:
        raw = json.loads(_read(args.request))
        body = parse_request(raw)
        encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
        prompt = encoding.render_conversation_for_completion(request_to_conversation(body), Role.ASSISTANT)
        text = _read(args.completion)
        completion: list[int] | list[str] = json.loads(text) if args.tokens else [text]
    except RequestError as exc:
        print(json.dumps(exc.to_body(), ensure_ascii=False), file=sys.stderr)
        return 2
    except (OSError, json.JSONDecodeError, HarmonyError) as exc:
        print(f"harmony-responses respond: {exc}", file=sys.stderr)
        return 2
    options: dict[str, Any] = {"input_tokens": len(prompt), "ids": counting_ids() if args.fixed_ids else random_id}
    if args.fixed_ids:
        options.update(created_at=0, clock=lambda: 0.0)
    out = sys.stdout
    if args.stream:
        events = stream_response(completion, encoding, body, **options)
        if args.chat:
            for chunk in chat_completion_chunks(events):
                out.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n")
            out.write(f"data: {DONE}\n\n")
        else:
            for frame in to_sse(events, reasoning_names=args.reasoning_events):
                out.write(frame)
        return 0
    response = build_response(completion, encoding, body, **options)
    data = to_chat_completion(response) if args.chat else response.model_dump(mode="json")
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
    return 0
