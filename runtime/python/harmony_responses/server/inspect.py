"""`POST /v1/harmony/inspect`: what the bridge makes of one raw completion, for the page's inspector.

The body is `{"request": <an Open Responses request>, "completion": "<raw text>" | [token ids]}`; the answer
holds the Harmony prompt the request renders to, the completion as text, the Harmony messages the lenient
parser reads from it, every repair (its rule, detail and the characters it concerns, as UTF-16 offsets into
the completion's text so a browser can highlight them), and the served forms: the Response and the Chat
Completion. Nothing runs on the engine and nothing is stored; it is the same bridge `serve` answers with,
given the completion instead of sampling it (as `harmony-responses respond` does). Bad input is the spec's
400 naming the field (`request.input[0].role`, `completion[3]`).
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Any

from .._tables import spec as _spec
from ..bridge import RequestError, Verbatim, build_response, parse_request, request_to_conversation, to_chat_completion
from ..encoding import HarmonyEncoding
from ..errors import HarmonyError
from ..models import Role
from ..prompt import PROMPT_CAPABILITIES
from ..stream import HarmonyStreamParser, MessageEnd, Recovered
from ..types import ResponseResource

_REPAIRS_FIELD = _spec.RESPONSE_REPAIRS_FIELD


def _bad(param: str, reason: str) -> RequestError:
    return RequestError.of(_spec.REQUEST_ERROR_INVALID, param, reason=Verbatim(reason))


def _completion(raw: Any, encoding: HarmonyEncoding) -> tuple[str | list[int], str]:
    """The completion as the bridge reads it (text, or token ids) and as text to show."""
    if isinstance(raw, str):
        return raw, raw
    if not isinstance(raw, list):
        raise _bad("completion", "expected the raw completion as a string, or a list of token ids")
    for i, token in enumerate(raw):
        if isinstance(token, bool) or not isinstance(token, int):
            raise _bad(f"completion[{i}]", "expected a token id (an integer)")
        try:
            encoding.decode_bytes([token])
        except HarmonyError:
            raise _bad(f"completion[{i}]", f"token id {token} is not in the vocabulary") from None
    return list(raw), encoding.decode_bytes(raw).decode("utf-8", errors="replace")


def _char_offsets(completion: str | list[int], encoding: HarmonyEncoding) -> list[int]:
    """For each parser position (a code point of the text, or a token id's index), its offset in the shown text."""
    if isinstance(completion, str):
        return list(range(len(completion) + 1))
    offsets = [0]
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for token in completion:
        offsets.append(offsets[-1] + len(decoder.decode(encoding.decode_bytes([token]))))
    return offsets


def locate(text: str, at: int, found: str) -> tuple[int, int]:
    """Where in `text` a repair's characters `found` are: a rule reports the place it acted, with what it set
    aside either after it or before it (text it read before it knew); zero-width when there is none."""
    if not found:
        return at, at
    for start in (at, at - len(found)):
        if 0 <= start and text[start : start + len(found)] == found:
            return start, start + len(found)
    near = text.find(found, max(0, at - len(found)))
    near = near if near >= 0 else text.find(found)
    return (near, near + len(found)) if near >= 0 else (at, at)


def _utf16(text: str) -> list[int]:
    """UTF-16 offsets of each code point offset of `text` (what a browser's strings count)."""
    out = [0]
    for ch in text:
        out.append(out[-1] + (2 if ord(ch) > 0xFFFF else 1))
    return out


def inspect(raw: Mapping[str, Any], encoding: HarmonyEncoding, *, model: str) -> dict[str, Any]:
    """The inspector's answer for a body; `RequestError` (400) naming what is wrong."""
    request = raw.get("request", {"input": ""})
    if not isinstance(request, Mapping):
        raise _bad("request", "expected an Open Responses request object")
    try:
        body = parse_request({"model": model, "input": "", **request}, PROMPT_CAPABILITIES)
    except RequestError as exc:
        raise RequestError(exc.code, exc.message, f"request.{exc.param}" if exc.param else "request") from None
    if "completion" not in raw:
        raise RequestError.of(_spec.REQUEST_ERROR_MISSING, "completion")
    completion, text = _completion(raw["completion"], encoding)
    try:
        prompt = encoding.render_conversation_for_completion(request_to_conversation(body), Role.ASSISTANT)
    except HarmonyError as exc:
        raise _bad("request", str(exc)) from None
    names = [t.name for t in body.tools or []]
    parser = HarmonyStreamParser(encoding, Role.ASSISTANT, "lenient", names)
    events = parser.feed_text(completion) if isinstance(completion, str) else parser.feed_tokens(completion)
    events += parser.close()
    pieces = [completion] if isinstance(completion, str) else completion
    response: ResponseResource = build_response(pieces, encoding, body, input_tokens=len(prompt), model=model)
    served = response.model_dump(mode="json")
    offsets = _char_offsets(completion, encoding)
    units = _utf16(text)
    repairs = []
    for repair in served.get(_REPAIRS_FIELD) or []:
        at = offsets[min(max(int(repair.get("position") or 0), 0), len(offsets) - 1)]
        start, end = locate(text, min(at, len(text)), str(repair.get("text") or ""))
        repairs.append({**repair, "text_from": units[start], "text_to": units[end]})
    return {
        "prompt": encoding.decode_utf8(prompt),
        "completion": text,
        "messages": [e.message.to_dict() for e in events if isinstance(e, MessageEnd)],
        "parser_repairs": [e.rule for e in events if isinstance(e, Recovered)],
        "repairs": repairs,
        "response": served,
        "chat": to_chat_completion(response),
    }
