"""The conformance corpus's operations, run by the Python runtime (conformance/README.md defines each one).

`run(encoding, case)` takes a case's `input.json` and gives the outputs the case's other files hold, by key.
tests/test_conformance.py compares; tests/conformance_tool.py bootstrap writes them (run by a person). The
TypeScript runner (runtime/typescript/test/conformance.test.ts) implements the same operations.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import io
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import fixed, flag_columns, run_events
from harness import jsonable as _jsonable

from harmony_responses import (
    Conversation,
    HarmonyEncoding,
    HarmonyEncodingName,
    HarmonyError,
    Message,
    RenderConversationConfig,
    Role,
    StreamableParser,
    detect_leak,
    escape_control_tokens,
    escape_control_tokens_json,
    load_harmony_encoding,
    render_tool_namespace,
    unescape_control_tokens,
)
from harmony_responses import cli as py_cli
from harmony_responses.bridge import (
    RequestError,
    SSEStreamer,
    build_response,
    chat_completion_chunks,
    parse_request,
    request_to_conversation,
    response_snapshot,
    stream_response,
    to_chat_completion,
    tool_policy,
)
from harmony_responses.bridge.arguments import check_arguments
from harmony_responses.bridge.encrypted import ReasoningSeal

CORPUS = Path(__file__).resolve().parent.parent / "conformance"
KINDS = (
    "render",
    "namespace",
    "prompt",
    "request_error",
    "parse",
    "stream",
    "events",
    "bridge",
    "arguments",
    "safety",
    "cli",
)
INPUT = "input.json"
Outputs = dict[str, Any]


@functools.cache
def load_encoding() -> HarmonyEncoding:
    """The encoding every case runs on (conformance/README.md)."""
    return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)


def _role(value: Any) -> Role | None:
    return None if value is None else Role(value)


def _error(exc: RequestError) -> dict[str, Any]:
    return {"status": exc.status, "type": exc.type, "code": exc.code, "param": exc.param, "message": exc.message}


def render(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    drop = case.get("auto_drop_analysis")
    config = None if drop is None else RenderConversationConfig(auto_drop_analysis=drop)
    function = case["function"]
    try:
        if function == "render":
            tokens = encoding.render(Message.from_dict(case["message"]))
        else:
            convo = Conversation.from_json(json.dumps(case["conversation"]))
            if function == "render_conversation_for_completion":
                tokens = encoding.render_conversation_for_completion(convo, Role(case["next_turn_role"]), config)
            elif function == "render_conversation_for_training":
                tokens = encoding.render_conversation_for_training(convo, config)
            else:
                tokens = encoding.render_conversation(convo, config)
    except HarmonyError as exc:
        return {"error": str(exc)}
    return {"tokens": tokens, "text": encoding.decode(tokens)}


def request(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    """A request body (JSON text) → the prompt it renders to, its tool policy and the echoing snapshot; or the 400.

    With `reasoning_key` (hex), reasoning items' `encrypted_content` is opened with that key."""
    try:
        body = parse_request(json.loads(case["body"]))
    except RequestError as exc:
        return {"error": _error(exc)}
    snapshot = response_snapshot(body, response_id="resp_x", created_at=0, model="m", status="completed", output=[])
    out: Outputs = {"snapshot": snapshot.model_dump(mode="json")}
    key = case.get("reasoning_key")
    reader = ReasoningSeal(bytes.fromhex(key)).reader() if key is not None else None
    try:
        conversation = request_to_conversation(body, reasoning=reader)
        policy = tool_policy(body)
    except RequestError as exc:
        return {**out, "error": _error(exc)}
    tokens = encoding.render_conversation_for_completion(conversation, Role.ASSISTANT)
    return {**out, "tokens": tokens, "text": encoding.decode(tokens), "policy": [policy.mode, list(policy.allowed)]}


def parse(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    """The reference API's `parse_messages_from_completion_tokens`."""
    try:
        parsed = encoding.parse_messages_from_completion_tokens(
            case["tokens"], _role(case["role"]), strict=case["strict"]
        )
    except HarmonyError as exc:
        return {"error": str(exc)}
    return {"messages": [m.to_dict() for m in parsed]}


def stream(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    """The reference API's `StreamableParser`, fed one token at a time: its observable state after each."""
    parser = StreamableParser(encoding, _role(case["role"]), strict=case["strict"])
    steps: list[dict[str, Any]] = []
    for token in case["tokens"]:
        try:
            parser.process(token)
        except HarmonyError as exc:
            return {"steps": steps, "error": str(exc)}
        role = parser.current_role
        steps.append(
            {
                "state": parser.state.value,
                "current_role": role.value if role is not None else None,
                "current_channel": parser.current_channel,
                "current_recipient": parser.current_recipient,
                "current_content_type": parser.current_content_type,
                "last_content_delta": parser.last_content_delta,
                "current_content": parser.current_content,
                "messages": len(parser.messages),
            }
        )
    try:
        parser.process_eos()
    except HarmonyError as exc:
        return {"steps": steps, "eos_error": str(exc)}
    return {"steps": steps, "messages": [m.to_dict() for m in parser.messages]}


def events(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    options: dict[str, Any] = {k: case[k] for k in ("stop_after_tool_call", "stop_at_turn_end", "max_tool_calls")}
    return run_events(encoding, case["chunks"], _role(case["role"]), case["mode"], case["tools"], **options)


def _fixed(case: dict[str, Any]) -> dict[str, Any]:
    """The fixed clock and ids (harness.fixed), and the case's `role` and `tools` when it gives them."""
    out = fixed(case["strict"])
    if "role" in case:
        out["role"] = _role(case["role"])
    if "tools" in case:
        out["tools"] = case["tools"]
    return out


def bridge(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    """A completion → the SSE text the streamer writes, the response JSON, the Chat Completions object and chunks."""
    body = parse_request(case["request"]) if case["request"] is not None else None
    pieces = case["pieces"]
    stopped = case["stopped"]
    try:
        streamer = SSEStreamer(encoding, body, reasoning_names=case["reasoning_names"], **_fixed(case))
        sse = streamer.start()
        for piece in pieces:
            sse += streamer.feed_text(piece) if isinstance(piece, str) else streamer.feed(piece)
        sse += streamer.finish(stopped)
        response = build_response(pieces, encoding, body, **_fixed(case), stopped=stopped)
        chunks = chat_completion_chunks(
            stream_response(pieces, encoding, body, **_fixed(case), stopped=stopped), case["include_usage"]
        )
        return {
            "sse": sse,
            "response": response.model_dump(mode="json"),
            "chat": _jsonable(to_chat_completion(response)),
            "chunks": _jsonable(list(chunks)),
        }
    except HarmonyError as exc:
        return {"error": str(exc)}


def arguments(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    """A strict tool's arguments checked against its schema: the `harmony:validation` report."""
    del encoding
    return {"validation": _jsonable(check_arguments(case["arguments"], case["schema"]).to_dict())}


def namespace(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    """A tool namespace block from `tools` (JSON text: a list of tool objects), `name` and `description`."""
    del encoding
    tools = json.loads(case["tools"])
    return {"text": render_tool_namespace(case["name"], tools, description=case["description"])}


def safety(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    """The safety helpers on `text`; a leak's `start` and `end` count code points."""
    del encoding
    text = case["text"]
    leaks = [{"kind": k.kind, "start": k.start, "end": k.end, "text": k.text} for k in detect_leak(text)]
    return {
        "escaped": escape_control_tokens(text),
        "unescaped": unescape_control_tokens(text),
        "json": escape_control_tokens_json(text),
        "leaks": leaks,
    }


def cli(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    """The command line: `files` (texts) and `binary_files` (base64) written into a fresh folder, `{dir}` in `argv`
    replaced by its path, COLUMNS=80; the exit code and both streams, the folder's path written back as `{dir}`."""
    del encoding
    with tempfile.TemporaryDirectory() as folder:
        for name, text in case.get("files", {}).items():
            (Path(folder) / name).write_bytes(text.encode("utf-8"))
        for name, data in case.get("binary_files", {}).items():
            (Path(folder) / name).write_bytes(base64.b64decode(data))
        argv = [arg.replace("{dir}", folder) for arg in case["argv"]]
        out, err = io.StringIO(), io.StringIO()
        with flag_columns(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = py_cli.main(argv)
            except SystemExit as exc:
                code = int(exc.code or 0)
        stdout, stderr = out.getvalue().replace(folder, "{dir}"), err.getvalue().replace(folder, "{dir}")
        return flag_library_words(argv, {"code": code, "stdout": stdout, "stderr": stderr})


HELP = "<help text of the flag library>"
USAGE_ERROR = "<usage error of the flag library>"


def flag_library_words(argv: list[str], outputs: Outputs) -> Outputs:
    """Help and usage errors are worded by each language's flag library (argparse, commander): the corpus fixes
    their exit code and stream, not their words (conformance/README.md, "The command line")."""
    stdout, stderr = str(outputs["stdout"]), str(outputs["stderr"])
    if outputs["code"] == 0 and ("-h" in argv or "--help" in argv) and stdout and not stderr:
        return {**outputs, "stdout": HELP}
    if outputs["code"] == 2 and not stdout and stderr.lower().startswith(("usage:", "error:")):
        return {**outputs, "stderr": USAGE_ERROR}
    return outputs


OPS: dict[str, Callable[[HarmonyEncoding, dict[str, Any]], Outputs]] = {
    "render": render,
    "request": request,
    "parse": parse,
    "stream": stream,
    "events": events,
    "bridge": bridge,
    "arguments": arguments,
    "namespace": namespace,
    "safety": safety,
    "cli": cli,
}


def run(encoding: HarmonyEncoding, case: dict[str, Any]) -> Outputs:
    return OPS[case["op"]](encoding, case)


def unportable(value: Any, path: str = "") -> list[str]:
    """Where a document inside input.json says more than every JSON reader keeps (conformance/README.md): a float
    written with `.0`, an integer no double holds, integer-like keys a JavaScript object would reorder."""
    if isinstance(value, float) and value.is_integer():
        return [f"{path}: {value!r} reads as an integer in JavaScript"]
    if isinstance(value, int) and not isinstance(value, bool) and float(value) != value:
        return [f"{path}: {value} is not a double"]
    if isinstance(value, list):
        return [problem for i, inner in enumerate(value) for problem in unportable(inner, f"{path}[{i}]")]
    if not isinstance(value, dict):
        return []
    keys = list(value)
    numeric = [k for k in keys if k.isdigit() and (k == "0" or not k.startswith("0")) and int(k) < 2**32 - 1]
    problems = [] if sorted(numeric, key=int) + [k for k in keys if k not in numeric] == keys else [f"{path}: keys"]
    return problems + [problem for k, inner in value.items() for problem in unportable(inner, f"{path}.{k}")]


# -- the files of a case --------------------------------------------------------------------------------------


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def dump_json(value: Any) -> str:
    """JSON as the corpus writes it: UTF-8 (escaped ASCII where a lone surrogate makes UTF-8 impossible)."""
    text = json.dumps(value, ensure_ascii=False, indent=1)
    return json.dumps(value, indent=1) + "\n" if _has_surrogate(text) else text + "\n"


def file_name(key: str, value: Any) -> str:
    """Text as `.txt` (byte for byte), a list of objects as `.jsonl` (one a line), anything else as `.json`."""
    if isinstance(value, str) and not _has_surrogate(value):
        return f"{key}.txt"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return f"{key}.jsonl"
    return f"{key}.json"


def _line(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return json.dumps(value) if _has_surrogate(text) else text


def write_value(path: Path, value: Any) -> None:
    if path.suffix == ".txt":
        path.write_text(value, encoding="utf-8", newline="")
    elif path.suffix == ".jsonl":
        path.write_text("".join(_line(v) + "\n" for v in value), encoding="utf-8")
    else:
        path.write_text(dump_json(value), encoding="utf-8")


def read_value(path: Path) -> Any:
    text = path.read_bytes().decode("utf-8")  # byte for byte: no newline translation
    if path.suffix == ".txt":
        return text
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.split("\n") if line.strip()]
    return json.loads(text)


def sse_frames(text: str) -> list[object]:
    """An `sse` output as the corpus compares it: frame by frame, each `data:` payload as a JSON value and every
    other line (and the framing) as text."""
    frames: list[object] = []
    for frame in text.split("\n\n"):
        lines: list[object] = []
        for line in frame.split("\n"):
            payload = line.removeprefix("data: ")
            try:
                lines.append({"data": json.loads(payload)} if line.startswith("data: {") else line)
            except ValueError:
                lines.append(line)
        frames.append(lines)
    return frames


def same_output(key: str, got: object, want: object) -> bool:
    """Whether a runner's output `got` is the expected `want`: SSE text (`sse`, or a command's output of events)
    frame by frame, a command's output of one JSON document as a JSON value, the rest as read."""
    if isinstance(got, str) and isinstance(want, str):
        if key == SSE_KEY or (key == STDOUT_KEY and want.startswith(SSE_START)):
            return sse_frames(got) == sse_frames(want)
        if key == STDOUT_KEY and (document := _document(want)) is not None:
            return _document(got) == document
    return got == want


def _document(text: str) -> object:
    """The JSON document `text` is (an object), or None."""
    try:
        value = json.loads(text) if text.startswith("{") else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


SSE_KEY, STDOUT_KEY, SSE_START = "sse", "stdout", "event: "


def expected(folder: Path) -> Outputs:
    """A case's expected outputs, by key (every file but input.json)."""
    return {p.name.rsplit(".", 1)[0]: read_value(p) for p in sorted(folder.iterdir()) if p.name != INPUT}


def cases() -> list[Path]:
    return sorted(p.parent for kind in KINDS for p in (CORPUS / kind).glob(f"*/{INPUT}"))
