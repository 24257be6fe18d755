"""Fake web services for the hosted-tool tests, each a process of its own on 127.0.0.1.

    python tests/services/fake_web.py pages              a static page server (GET /pages/NAME)
    python tests/services/fake_web.py search PAGES_URL   a SearXNG-style search API (GET /search?q=...&format=json)

Each prints `listening on PORT` once it serves. The search answers every query with hits on the page server
(the query is echoed in the first hit's snippet); `GET /_fake/queries` lists the queries it got, and the page
server's `GET /_fake/requests` the paths it was asked for. The page server
serves a few fixed pages (HTML with links, images and a script; plain text; a large one; one that never answers
in time). Only the standard library, so the services never share code with what they test.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PAGES = {
    "harmony.html": (
        "text/html; charset=utf-8",
        """<!doctype html><html><head><title>The Harmony format</title><style>p{color:red}</style></head>
<body><h1>The Harmony format</h1>
<script>document.write("hidden script text")</script>
<p>Harmony is the chat format gpt-oss was trained on. Messages carry a role, a channel and a recipient.</p>
<p>The browser tool shows pages as numbered lines, with links such as <a href="/pages/channels.html">the
channels page</a> and <a href="https://example.org/elsewhere">another site</a>.</p>
<p><img src="x.png" alt="a diagram"> The analysis channel holds the chain of thought; the final channel
holds the answer. A bracket 【 in the text is not a link.</p>
<p>Zebra crossings are mentioned here once, on this line about zebras.</p>
</body></html>""",
    ),
    "channels.html": (
        "text/html; charset=utf-8",
        "<html><head><title>Channels</title></head><body><p>analysis, commentary and final.</p></body></html>",
    ),
    "notes.txt": ("text/plain; charset=utf-8", "Plain notes.\nSecond line of notes about zebras.\n"),
    "big.html": ("text/html", "<html><body>" + "<p>filler text</p>" * 400000 + "</body></html>"),
    "image.png": ("image/png", "\x89PNG not really"),
}


class Search(BaseHTTPRequestHandler):
    pages_url = ""
    queries: list[str] = []

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def _json(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        url = urlsplit(self.path)
        if url.path == "/_fake/queries":
            self._json(200, self.queries)
            return
        query = parse_qs(url.query)
        if url.path != "/search" or query.get("format") != ["json"]:
            self._json(400, {"error": "GET /search?q=...&format=json"})
            return
        q = query.get("q", [""])[0]
        self.queries.append(q)
        base = self.pages_url
        results = [
            {"url": f"{base}/pages/harmony.html", "title": "The Harmony format", "content": f"About {q}: roles."},
            {"url": f"{base}/pages/notes.txt", "title": "Notes", "content": "Plain notes about zebras."},
            {"url": "https://example.org/elsewhere", "title": "Elsewhere", "content": "A page on another site."},
        ]
        self._json(200, {"query": q, "number_of_results": len(results), "results": results})


class Pages(BaseHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/_fake/requests":
            data = json.dumps(self.requests).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.requests.append(self.path)
        name = urlsplit(self.path).path.removeprefix("/pages/")
        if name == "slow.html":
            time.sleep(30)
        if name == "redirect":
            self.send_response(302)
            self.send_header("location", "/pages/harmony.html")
            self.send_header("content-length", "0")
            self.end_headers()
            return
        if name not in PAGES:
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        kind, text = PAGES[name]
        data = text.encode("utf-8", "surrogateescape") if kind.startswith("text") else text.encode("latin-1")
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    mode = sys.argv[1]
    handler: type[BaseHTTPRequestHandler]
    if mode == "search":
        Search.pages_url = sys.argv[2].rstrip("/")
        handler = Search
    else:
        handler = Pages
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    print(f"listening on {server.server_address[1]}", flush=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
