"""What the corpus's Python operations (conformance_ops.py) and the property tests against the TypeScript package
(test_typescript.py) both set up: the fixed ids and clock, the width flag libraries wrap at, the event parser's
run and its events as JSON, and the compiled TypeScript scripts run by node.

One place for each, so the corpus and the live comparison cannot drift apart on how a run is set up; what each
compares stays in its own file.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from harmony_responses import HarmonyEncoding, HarmonyError, Role
from harmony_responses.bridge import counting_ids
from harmony_responses.stream import Event, HarmonyStreamParser, Mode, ParsedMessage

ROOT = Path(__file__).resolve().parent.parent
TS_BUILD = ROOT / "runtime" / "typescript" / "build"  # `make ts-build` compiles the package and its tests here
COLUMNS = "80"  # the terminal width both languages' flag libraries wrap help at (conformance/README.md)


def jsonable(value: Any) -> Any:
    """`value` as it reads back from JSON (tuples as lists, keys as strings)."""
    return json.loads(json.dumps(value))


def fixed(strict: bool) -> dict[str, Any]:
    """The builders' fixed ids and clock (conformance/README.md): counting ids, created_at 0, a clock at 0,
    7 input tokens."""
    return {"ids": counting_ids(), "created_at": 0, "clock": lambda: 0.0, "strict": strict, "input_tokens": 7}


@contextlib.contextmanager
def flag_columns() -> Iterator[None]:
    """COLUMNS set to `COLUMNS` while the Python command line runs in this process (then as it was)."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = COLUMNS
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def event_dict(event: Event) -> dict[str, Any]:
    """An event as `parse --events` prints it (the TypeScript side answers in this form)."""
    out: dict[str, Any] = {"type": event.type}
    for key in event.__dataclass_fields__:
        value = getattr(event, key)
        out[key] = value.to_dict() if isinstance(value, ParsedMessage) else value
    result: dict[str, Any] = jsonable(out)
    return result


def run_events(
    encoding: HarmonyEncoding,
    chunks: Sequence[Any],
    role: Role | None,
    mode: Mode,
    tools: Sequence[str] | None,
    *,
    stop_after_tool_call: bool,
    stop_at_turn_end: bool | None,
    max_tool_calls: int | None,
) -> dict[str, Any]:
    """The event parser fed `chunks` (text, or lists of token ids) and closed: its events, and its error if any."""
    parser = HarmonyStreamParser(
        encoding,
        role,
        mode,
        tools,
        stop_after_tool_call=stop_after_tool_call,
        stop_at_turn_end=stop_at_turn_end,
        max_tool_calls=max_tool_calls,
    )
    seen: list[Event] = []
    try:
        for chunk in chunks:
            seen += parser.feed_text(chunk) if isinstance(chunk, str) else parser.feed_tokens(chunk)
        seen += parser.close()
    except HarmonyError as exc:
        return {"events": [event_dict(e) for e in seen], "error": str(exc)}
    return {"events": [event_dict(e) for e in seen]}


def built(relative: str) -> Path:
    """A compiled TypeScript file under `TS_BUILD`; a clear error when the package was not built."""
    path = TS_BUILD / relative
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: run `make ts-build` (make test does)")
    return path


def run_node(relative: str, *args: str, **options: Any) -> subprocess.Popen[str]:
    """`node` running a compiled script (`built(relative)`) with COLUMNS at `COLUMNS`, text in and out as UTF-8."""
    env = {**os.environ, "COLUMNS": COLUMNS}
    return subprocess.Popen(["node", str(built(relative)), *args], text=True, encoding="utf-8", env=env, **options)
