"""`harmony-responses prompt`: the Harmony prompt an Open Responses request renders to.

Prints what the model gets for a request: the conversation `request_to_conversation` builds, rendered by
`render_conversation_for_completion` up to the `<|start|>assistant` the completion follows (the same
rendering `respond` and the server use), as text or, with `--tokens`, as a JSON list of token ids.

A request the model cannot take prints its 400 error body on standard error and exits 2, as `respond`
does. Fields that do not change the prompt (sampling, a token budget, `store`, `background`, log
probabilities) are accepted, since the prompt is the same with or without them (`PROMPT_CAPABILITIES`);
`truncation: "auto"` would change it and is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .bridge.request import Capabilities, RequestError, parse_request, request_to_conversation
from .cli_input import CommandError, display_name, load_encoding, read_json
from .encoding import HarmonyEncoding
from .errors import HarmonyError
from .models import Role

PROMPT_CAPABILITIES = Capabilities(
    store=True, background=True, sampling=True, logprobs=True, max_output_tokens=True, truncation=False
)
"""What `prompt` accepts beyond the prompt's own fields: everything that leaves the prompt as it is."""

_FLAG = "--request"


def add_prompt_parser(sub: Any) -> None:
    """Register the `prompt` subcommand on the CLI's subparsers."""
    p = sub.add_parser("prompt", help="print the Harmony prompt an Open Responses request renders to")
    p.add_argument("--request", required=True, help="request JSON file (CreateResponseBody), or -")
    p.add_argument("--tokens", action="store_true", help="print token ids (JSON) instead of text")
    p.set_defaults(func=prompt, file=None)


def prompt_tokens(raw: Any, encoding: HarmonyEncoding) -> list[int]:
    """The prompt's token ids for a request body given as JSON data; `RequestError` for a bad request."""
    body = parse_request(raw, PROMPT_CAPABILITIES)
    return encoding.render_conversation_for_completion(request_to_conversation(body), Role.ASSISTANT)


def prompt(args: argparse.Namespace) -> int:
    raw = read_json(args.request, _FLAG)
    encoding = load_encoding()
    try:
        tokens = prompt_tokens(raw, encoding)
    except RequestError as exc:
        print(json.dumps(exc.to_body(), ensure_ascii=True), file=sys.stderr)
        return 2
    except HarmonyError as exc:
        raise CommandError(f"{display_name(args.request, _FLAG)}: $: {exc}") from None
    if args.tokens:
        sys.stdout.write(json.dumps(tokens) + "\n")
    else:
        sys.stdout.write(encoding.decode_utf8(tokens) + "\n")
    return 0
