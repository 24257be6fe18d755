"""The lines `serve` prints when it starts: the address, the engine, the model, the store, the page, one curl.

The first line keeps its form (`harmony-responses serve: listening on http://HOST:PORT (engine SPEC)`),
which scripts and tests wait for. A password in the store's URL is never printed.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit, urlunsplit

from .settings import Settings

_ABOUT = {
    "demo": "a deterministic stand-in for a model, not a model: it answers by rule",
    "replay": "plays recorded completions",
}


def shown_store(url: str) -> str:
    """The store's URL without a password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}:***@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}{port}"))


def startup_lines(settings: Settings, address: str, engine_model: str, note: str | None) -> list[str]:
    """What the operator reads at start-up, after the address line."""
    kind = settings.engine.partition(":")[0].partition("?")[0]
    about = _ABOUT.get(kind)
    lines = [f"  engine  {settings.engine}" + (f" ({about})" if about else "")]
    if kind in _ABOUT:
        lines.append(f"  model   served as {settings.model!r}")
    else:
        said = f"; {note}" if note else ""
        lines.append(f"  model   {engine_model} at the engine, served as {settings.model!r}{said}")
    lines.append(f"  store   {shown_store(settings.store_url())}")
    lines.append(f"  page    {address}/  (a playground, and an inspector of raw completions)")
    body = json.dumps({"model": settings.model, "input": "Hello"})
    auth = " -H 'Authorization: Bearer YOUR_KEY'" if settings.api_keys else ""
    lines.append(f"  try     curl -s {address}/v1/responses -H 'Content-Type: application/json'{auth} -d '{body}'")
    return lines
