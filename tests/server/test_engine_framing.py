"""`engines.reader.EngineResponse`: an engine's streamed body split into payloads, however the bytes arrive.

A unit test of that one class. The same chunked HTTP/1.1 answer is fed whole, one chunk per event (the
common case, which takes the one-event shortcut in `on_body`), byte by byte, and cut at every position
into two reads; the payloads must come out the same every way, and be the ones the framing defines: an SSE
`data:` field's value without its surrounding blanks (event names, comments and blank lines skipped), or
every non-empty NDJSON line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from harmony_responses.server.engines.reader import EngineResponse, Framing, _Connection

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"

SSE_EVENTS = [
    b'data: {"choices":[{"token_ids":[1]}]}\n\n',
    b'data:{"tight":true}\n\n',
    b'data: {"crlf":1}\r\n\n',
    b"event: ping\n\n",
    b": a comment\n\n",
    b'data: {"a":1}\ndata: {"b":2}\n\n',
    b"data:\n\n",
    'data: {"text":"café ☕"}\n\n'.encode(),
    b"data: [DONE]\n\n",
]
SSE_PAYLOADS = [
    b'{"choices":[{"token_ids":[1]}]}',
    b'{"tight":true}',
    b'{"crlf":1}',
    b'{"a":1}',
    b'{"b":2}',
    b"",
    '{"text":"café ☕"}'.encode(),
    b"[DONE]",
]
NDJSON_EVENTS = [b'{"a":1}\n', b"\n", b'  {"b":2}  \n', b'{"c":3}\r\n', b'{"last":true}']
NDJSON_PAYLOADS = [b'{"a":1}', b'{"b":2}', b'{"c":3}', b'{"last":true}']


def _chunked(events: list[bytes]) -> list[bytes]:
    """One HTTP chunk per event, then the body's end."""
    return [b"%x\r\n%s\r\n" % (len(e), e) for e in events] + [b"0\r\n\r\n"]


def _payloads(framing: Framing, reads: list[bytes]) -> list[bytes]:
    async def main() -> list[bytes]:
        conn = _Connection(asyncio.get_running_loop())
        response = EngineResponse(conn, framing, 30.0)
        conn.response = response
        out: list[bytes] = []
        for data in [HEAD, *reads]:
            conn.data_received(data)
            taken = response.take()
            if taken:
                out += taken
        assert response.complete
        response.release()
        return out

    return asyncio.run(main())


def _ways(wire: bytes, per_event: list[bytes]) -> dict[str, list[bytes]]:
    ways: dict[str, list[bytes]] = {"whole": [wire], "per event": per_event, "per byte": [bytes([b]) for b in wire]}
    for cut in range(1, len(wire)):
        ways[f"cut at {cut}"] = [wire[:cut], wire[cut:]]
    return ways


@pytest.mark.parametrize(
    ("framing", "events", "expected"),
    [(Framing.SSE, SSE_EVENTS, SSE_PAYLOADS), (Framing.NDJSON, NDJSON_EVENTS, NDJSON_PAYLOADS)],
)
def test_the_payloads_are_the_same_however_the_bytes_arrive(
    framing: Framing, events: list[bytes], expected: list[bytes]
) -> None:
    per_event = _chunked(events)
    wire = b"".join(per_event)
    split: Callable[[list[bytes]], list[bytes]] = lambda reads: _payloads(framing, reads)  # noqa: E731
    for label, reads in _ways(wire, per_event).items():
        assert split(reads) == expected, label
