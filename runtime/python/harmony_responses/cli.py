"""`harmony-responses`: render conversations and tool namespaces from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from ._tables import spec as _spec
from .encoding import load_harmony_encoding
from .errors import HarmonyError
from .models import Conversation, Message, RenderConversationConfig, Role, content_from_dict
from .respond import add_respond_parser
from .stream import Event, HarmonyStreamParser, MessageEnd, ParsedMessage
from .tool_namespace import render_tool_namespace


class InputError(Exception):
    """Bad user input: the file, the JSON path and what was expected."""

    def __init__(self, file: str, path: str, expected: str) -> None:
        super().__init__(f"{file}: {path}: {expected}")


def _read_json(file: str) -> Any:
    try:
        text = sys.stdin.read() if file == "-" else open(file, encoding="utf-8").read()
    except OSError as exc:
        raise InputError(file, "$", f"cannot read file ({exc.strerror})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(file, "$", f"expected JSON, line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def _loc(base: str, loc: Sequence[int | str]) -> str:
    return base + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc)


def load_conversation(file: str) -> Conversation:
    """A conversation in the reference's JSON form, with errors that point into the file."""
    data = _read_json(file)
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise InputError(file, "$.messages", "expected a list of messages")
    roles = sorted(r.value for r in Role)
    messages = []
    for i, raw in enumerate(data["messages"]):
        where = f"$.messages[{i}]"
        if not isinstance(raw, dict):
            raise InputError(file, where, "expected a message object")
        if raw.get("role") not in roles:
            raise InputError(file, f"{where}.role", f"expected one of {roles}, found {raw.get('role')!r}")
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
    data = _read_json(file)
    name = description = None
    base = "$"
    if isinstance(data, dict):
        name, description = data.get("name"), data.get("description")
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
    encoding = load_harmony_encoding(_spec.ENCODING_NAME)
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


def _parse(args: argparse.Namespace) -> int:
    encoding = load_harmony_encoding(_spec.ENCODING_NAME)
    role = None if args.role == "none" else Role(args.role)
    parser = HarmonyStreamParser(encoding, role, args.mode, tools=args.tool or None)
    if args.tokens:
        data = _read_json(args.file)
        if not isinstance(data, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in data):
            raise InputError(args.file, "$", "expected a JSON list of token ids")
        events = parser.feed_tokens(data)
    else:
        try:
            text = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
        except OSError as exc:
            raise InputError(args.file, "$", f"cannot read file ({exc.strerror})") from None
        if text.endswith("\n") and text[:-1].endswith(_STOP_SPELLINGS):
            text = text[:-1]  # the newline a file ends with is not part of the completion
        events = parser.feed_text(text)
    events += parser.close()
    for event in events:
        if args.events:
            print(json.dumps(_event_dict(event), ensure_ascii=False))
        elif isinstance(event, MessageEnd):
            print(json.dumps(event.message.to_dict(), ensure_ascii=False))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harmony-responses", description="Harmony format tools.")
    sub = parser.add_subparsers(dest="command", required=True)
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
    parse.add_argument("--mode", choices=["strict", "lenient"], default="strict", help="default: strict")
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
    from .server.command import add_serve_parser  # argparse only: uvicorn and the app load when `serve` runs

    add_serve_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
        return result
    except InputError as exc:
        print(f"harmony-responses: {exc}", file=sys.stderr)
        return 2
    except HarmonyError as exc:
        print(f"harmony-responses: {args.file}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
