"""`harmony-responses`: render conversations and tool namespaces, parse completions, answer requests and show
their prompts from the command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ._tables import spec as _spec
from .cli_input import CommandError, InputError, display_name, load_encoding, read_json, read_text, read_token_ids
from .errors import HarmonyError
from .models import Conversation, Message, RenderConversationConfig, Role, content_from_dict
from .prompt import add_prompt_parser
from .respond import add_respond_parser
from .stream import Event, HarmonyStreamParser, MessageEnd, ParsedMessage, Recovered
from .texts import fill
from .tool_namespace import render_tool_namespace

# a role that is none of the roles, shown as JSON (the TypeScript CLI says the same)
_ROLE_EXPECTED = "expected one of {roles:json}, found {found:json}"


def _loc(base: str, loc: Sequence[int | str]) -> str:
    return base + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def load_conversation(file: str) -> Conversation:
    """A conversation in the reference's JSON form, with errors that point into the file."""
    data = read_json(file)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise InputError(file, "$.messages", "expected a list of messages")
    roles = sorted(r.value for r in Role)
    messages = []
    for i, raw in enumerate(data["messages"]):
        where = f"$.messages[{i}]"
        if not isinstance(raw, dict):
            raise InputError(file, where, "expected a message object")
        if raw.get("role") not in roles:
            raise InputError(file, f"{where}.role", fill(_ROLE_EXPECTED, roles=roles, found=raw.get("role")))
        content = raw.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise InputError(file, f"{where}.content", "expected a string or a list of content items")
        items = []
        for j, item in enumerate(content):
            cwhere = f"{where}.content[{j}]"
            if not isinstance(item, dict) or item.get("type") not in ("text", "system_content", "developer_content"):
                raise InputError(file, f"{cwhere}.type", "expected 'text', 'system_content' or 'developer_content'")
            try:
                items.append(content_from_dict(item))
            except ValidationError as exc:
                err = exc.errors()[0]
                raise InputError(file, _loc(cwhere, err["loc"]), err["msg"]) from None
        for key in ("name", "channel", "recipient", "content_type"):
            if raw.get(key) is not None and not isinstance(raw[key], str):
                raise InputError(file, f"{where}.{key}", "expected a string or null")
        msg = Message.from_role_and_contents(Role(raw["role"]), items)
        msg.author.name = raw.get("name")
        msg.channel = raw.get("channel")
        msg.recipient = raw.get("recipient")
        msg.content_type = raw.get("content_type")
        messages.append(msg)
    return Conversation(messages=messages)


def load_tools(file: str) -> tuple[str | None, str | None, list[dict[str, Any]]]:
    """A list of tools, or `{"name", "description", "tools"}` for a whole namespace."""
    data = read_json(file)
    name = description = None
    base = "$"
    if isinstance(data, dict):
        name, description = data.get("name"), data.get("description")
        for key, value in (("name", name), ("description", description)):
            if value is not None and not isinstance(value, str):
                raise InputError(file, f"$.{key}", "expected a string")
        data, base = data.get("tools"), "$.tools"
    if not isinstance(data, list):
        raise InputError(file, base, "expected a list of tools")
    for i, tool in enumerate(data):
        where = f"{base}[{i}]"
        if not isinstance(tool, dict):
            raise InputError(file, where, "expected a tool object")
        nested = tool.get("function")
        body: dict[str, Any] = nested if isinstance(nested, dict) else tool
        prefix = f"{where}.function" if isinstance(nested, dict) else where
        if not isinstance(body.get("name"), str):
            raise InputError(file, f"{prefix}.name", "expected a string")
        if body.get("description") is not None and not isinstance(body["description"], str):
            raise InputError(file, f"{prefix}.description", "expected a string")
        if body.get("parameters") is not None and not isinstance(body["parameters"], dict):
            raise InputError(file, f"{prefix}.parameters", "expected a JSON Schema object")
    return name, description, data


def _render(args: argparse.Namespace) -> int:
    conversation = load_conversation(args.file)
    encoding = load_encoding()
    config = RenderConversationConfig(auto_drop_analysis=not args.no_drop_analysis)
    if args.training:
        tokens = encoding.render_conversation_for_training(conversation, config)
    elif args.next_role:
        tokens = encoding.render_conversation_for_completion(conversation, Role(args.next_role), config)
    else:
        tokens = encoding.render_conversation(conversation, config)
    if args.tokens:
        print(json.dumps(tokens))
    else:
        sys.stdout.write(encoding.decode_utf8(tokens) + "\n")
    return 0


def _tools(args: argparse.Namespace) -> int:
    name, description, tools = load_tools(args.file)
    ns = args.namespace or name or _spec.HEADER_FUNCTION_NAMESPACE
    sys.stdout.write(render_tool_namespace(ns, tools, description=args.description or description) + "\n")
    return 0


_STOP_SPELLINGS = tuple(s for s, i in _spec.NAMED_TOKENS.items() if i in _spec.STOP_TOKENS)


def _event_dict(event: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"type": event.type}
    for key in event.__dataclass_fields__:
        value = getattr(event, key)
        if isinstance(value, ParsedMessage):
            value = value.to_dict()
        elif isinstance(value, Role):
            value = value.value
        out[key] = value
    return out


def _set_aside_note(file: str, events: list[Event]) -> str | None:
    """One line for standard error: what lenient parsing repaired and set aside, by rule (messages hide it)."""
    recovered = [e for e in events if isinstance(e, Recovered)]
    if not recovered:
        return None
    counts = Counter(e.rule for e in recovered)
    chars = sum(len(e.text) for e in recovered)
    rules = ", ".join(f"{rule} x{n}" for rule, n in sorted(counts.items()))
    aside = f"{chars} characters set aside" if chars else "no text set aside"
    return f"{display_name(file)}: lenient parse repaired the input ({rules}; {aside}); --events shows each repair"


def _parse(args: argparse.Namespace) -> int:
    encoding = load_encoding()
    role = None if args.role == "none" else Role(args.role)
    parser = HarmonyStreamParser(encoding, role, args.mode, tools=args.tool or None)
    if args.tokens:
        events = parser.feed_tokens(read_token_ids(args.file))
    else:
        text = read_text(args.file)
        if text.endswith("\n") and text[:-1].endswith(_STOP_SPELLINGS):
            text = text[:-1]  # the newline a file ends with is not part of the completion
        events = parser.feed_text(text)
    events += parser.close()
    for event in events:
        if args.events:
            print(json.dumps(_event_dict(event), ensure_ascii=False))
        elif isinstance(event, MessageEnd):
            print(json.dumps(event.message.to_dict(), ensure_ascii=False))
    note = None if args.events else _set_aside_note(args.file, events)
    if note is not None:
        print(f"harmony-responses: {note}", file=sys.stderr)
    return 0


def _version() -> str:
    """The installed distribution's version (the package metadata; no second copy of the number)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("harmony-responses")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class _WholeOptions(argparse.ArgumentParser):
    """A sub-command's parser: options are spelled out whole (no unique prefixes), as the TypeScript CLI reads them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "allow_abbrev": False})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="harmony-responses",
        description="Harmony format tools, and an Open Responses server for gpt-oss (serve; demo shows it).",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_WholeOptions)
    render = sub.add_parser("render", help="render a conversation (reference JSON form) to Harmony text")
    render.add_argument("file", help="conversation JSON file, or - for standard input")
    render.add_argument("--next-role", choices=[r.value for r in Role], help="append <|start|>ROLE for completion")
    render.add_argument("--training", action="store_true", help="end a final answer with <|return|>")
    render.add_argument("--no-drop-analysis", action="store_true", help="keep analysis before the final answer")
    render.add_argument("--tokens", action="store_true", help="print token ids (JSON) instead of text")
    render.set_defaults(func=_render)
    tools = sub.add_parser("tools", help="render a tools list as a TypeScript-like namespace")
    tools.add_argument("file", help="tools JSON file, or - for standard input")
    tools.add_argument("--namespace", help="namespace name (default: the file's, else functions)")
    tools.add_argument("--description", help="namespace description")
    tools.set_defaults(func=_tools)
    parse = sub.add_parser("parse", help="parse a completion (text, or token ids) into messages as JSON Lines")
    parse.add_argument("file", help="completion file, or - for standard input")
    parse.add_argument("--tokens", action="store_true", help="the file holds a JSON list of token ids")
    parse.add_argument(
        "--mode",
        choices=["strict", "lenient"],
        default="lenient",
        help="lenient (default, as the bridge and the server read completions): repair and report; strict: fail",
    )
    parse.add_argument(
        "--role",
        choices=[*(r.value for r in Role), "none"],
        default=Role.ASSISTANT.value,
        help="role the completion starts in (the prompt ended with <|start|>ROLE); none: it starts with <|start|>",
    )
    parse.add_argument("--tool", action="append", help="a declared function name (repeatable; lenient repairs)")
    parse.add_argument("--events", action="store_true", help="print the event stream instead of the messages")
    parse.set_defaults(func=_parse)
    add_respond_parser(sub)
    add_prompt_parser(sub)
    from .server.command import add_serve_parser  # argparse only: uvicorn and the app load when `serve` runs

    add_serve_parser(sub)
    from .demo import add_demo_parser

    add_demo_parser(sub)
    return parser


def _quiet_stdout() -> None:
    """After a closed pipe, send what is still buffered nowhere, so the exit flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file (a test's capture)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; bad input is one line on standard error and exit 2, a closed pipe a quiet exit 141."""
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
        sys.stdout.flush()
        return result
    except BrokenPipeError:  # `| head -1`: the reader has what it wanted, as `yes | head -1` does
        _quiet_stdout()
        return 128 + 13  # the status a shell shows for a tool ended by SIGPIPE
    except CommandError as exc:
        print(f"harmony-responses: {exc}", file=sys.stderr)
        return exc.status
    except HarmonyError as exc:  # the format rejected what the file holds (strict parsing, rendering)
        where = f"{display_name(args.file)}: " if args.file is not None else ""
        print(f"harmony-responses: {where}{exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
