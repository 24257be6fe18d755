"""The page at `/`: a playground for `/v1/responses` and an inspector of raw completions, in plain HTML and
JavaScript shipped with the package (`server/static/`, package data: nothing is built at install or at start).

The page and its two assets need no API key (they hold no data); what they call does: the playground sends
`/v1/responses` and the inspector `POST /v1/harmony/inspect` with the key typed into the page, kept in the
browser's local storage only.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .errors import ErrorKind, ServerError

ASSETS = {"index.html": "text/html", "page.js": "text/javascript", "page.css": "text/css", "icon.svg": "image/svg+xml"}
"""The page's files and their media types."""

_SECURITY = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'",  # no inline script or style, nothing from elsewhere
}


@cache
def asset(name: str) -> bytes:
    """One of the page's files, as shipped."""
    return files(__package__).joinpath("static", name).read_bytes()


def _file(name: str) -> Response:
    kind = ASSETS[name]
    return Response(
        asset(name), media_type=kind + "; charset=utf-8" if kind.startswith("text/") else kind, headers=_SECURITY
    )


async def favicon(request: Request) -> Response:
    return _file("icon.svg")


async def index(request: Request) -> Response:
    return _file("index.html")


async def page_asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in ASSETS:
        exc = ServerError(ErrorKind.NOT_FOUND, f"no page file named {name!r}")
        return JSONResponse(exc.body(), status_code=exc.status)
    return _file(name)
