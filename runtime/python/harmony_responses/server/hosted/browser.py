"""`web_search` through gpt-oss's `browser` tool: `browser.search`, `browser.open` and `browser.find`.

The model was trained on a browser that shows pages as numbered lines and marks links so it can follow and cite
them; this module shows pages in that form (the facts of the form, from the `gpt-oss` package's browser tool and
the `browser` namespace's own description, which the project renders token-exactly; spec/harmony/format.json's
`browser_display` holds them and this module reads them from the generated tables):

- each display starts `[{cursor}] {title} ({url})`, then `**viewing lines [{first} - {last}] of {last line}**`
  and a blank line, then the lines as `L{n}: {text}`, wrapped at 80 columns; the cursor counts the pages shown in
  this response, from 0;
- a link is `【{id}†{text}】`, or `【{id}†{text}†{domain}】` when it leaves the page's domain; `【`/`】` in page
  text become `〖`/`〗` so that only links use them; images are `[Image {n}: {alt}]`;
- a search shows its hits as a page of links with their snippets; `open` follows a link by id (of the current
  page, or of page `cursor`), opens a URL given as a string, or scrolls to `loc`; `find` lists the matches of a
  pattern in a page as `# 【{n}†match at L{line}】` followed by the matching lines;
- the model cites `【{cursor}†L{start}(-L{end})?】`: each such citation of a page with a URL becomes a
  `url_citation` annotation spanning it on the answer (`citation_annotations`).

HTML becomes text with lxml (links, images, scripts) and html2text (the text itself). Pages are fetched through
the fetch policy (`policy.py`) with the per-call time limit and `--hosted-max-bytes`.

The request's `web_search` tool is honoured: `filters.allowed_domains` keeps the hits to those domains (and their
subdomains) and refuses to open others; `external_web_access: false` searches but never fetches: a search hit
opens as the page the search service gave for it (its title and snippet), and any other URL is refused;
`search_context_size` sets how much of a page one display shows (low, medium, high: 512, 1024, 2048 tokens,
counted as about four characters each); `user_location` with any location field is refused with a 400 naming it
(nothing here can localise a search), and a bare `{"type": "approximate"}` or null is accepted.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import html2text
import httpx
import lxml.etree
import lxml.html

from ..._tables import spec as _spec
from ...bridge import RequestError, Verbatim
from ...models import ToolNamespaceConfig
from ...texts import fill
from ...types import UrlCitationBody
from .base import Citation, HostedCall, HostedContext, HostedKind, HostedResult
from .policy import FetchPolicy, FetchRefused
from .search import SearchError, SearchHit, SearchProvider, read_limited

__all__ = ["BrowserSession", "Page", "WebSearchBackend", "citation_annotations", "html_to_page"]

NAMESPACE = ToolNamespaceConfig.browser()
_PREFIX = NAMESPACE.name + _spec.HEADER_NAMESPACE_SEPARATOR
_SEARCH, _OPEN, _FIND = (NAMESPACE.name + _spec.HEADER_NAMESPACE_SEPARATOR + t.name for t in NAMESPACE.tools)
# The browser's display form (see the module docstring), from format.json's `browser_display`.
_RE_OPEN, _RE_SEP, _RE_CLOSE = (
    re.escape(c) for c in (_spec.BROWSER_LINK_OPEN, _spec.BROWSER_LINK_SEPARATOR, _spec.BROWSER_LINK_CLOSE)
)
_CITATION = re.compile(
    f"{_RE_OPEN}(\\d+){_RE_SEP}([^{_RE_SEP}{_RE_CLOSE}]+)(?:{_RE_SEP}[^{_RE_SEP}{_RE_CLOSE}]+)?{_RE_CLOSE}"
)
_LINK = re.compile(
    f"{_RE_OPEN}\\d+{_RE_SEP}([^{_RE_SEP}{_RE_CLOSE}]+)(?:{_RE_SEP}[^{_RE_SEP}{_RE_CLOSE}]+)?{_RE_CLOSE}"
)
_FIND_CONTEXT = 4  # lines shown per match
_FIND_LIMIT = 50
_WEB_SEARCH = _spec.HOSTED_KINDS[HostedKind.WEB_SEARCH.value]
_VIEW_TOKENS: dict[str, int] = _WEB_SEARCH["search_context_tokens"]  # `search_context_size` → tokens per display
_VIEW_DEFAULT: str = _WEB_SEARCH["search_context_default"]
_CHARS_PER_TOKEN = 4  # how many characters a display counts as one token (an estimate, not a tokenizer)
_SEARCH_RESULTS = 10
_HTML_TYPES = ("text/html", "application/xhtml+xml")
_TEXT_TYPES = ("text/plain", "text/markdown", "application/json")
_DROPPED = ("script", "style", "noscript", "template", "svg", "math", "head")
_WEB_SEARCH_FIELDS = frozenset({"type", "filters", "external_web_access", "search_context_size", "user_location"})


class ToolUsageError(Exception):
    """A call the browser cannot carry out (a bad cursor or link id, a refused URL): told to the model."""


@dataclass
class Page:
    """A page as the browser shows it: its lines, its links by id, and for a search page the hits by id."""

    url: str  # "" for a search or find page
    title: str
    lines: list[str]
    links: dict[int, str] = field(default_factory=dict)
    hits: dict[int, SearchHit] | None = None  # a search page's hits (`open` of one shows its snippet offline)
    find: bool = False  # a page of `find` results


def _domain(url: str) -> str:
    return urlsplit(url).hostname or ""


def _wrap(text: str) -> list[str]:
    lines: list[str] = []
    for line in text.split("\n"):
        lines += textwrap.wrap(
            line, width=_spec.BROWSER_WRAP_WIDTH, replace_whitespace=False, drop_whitespace=False
        ) or [""]
    return lines


def _plain(text: str) -> str:
    return text.replace(_spec.BROWSER_LINK_OPEN, _spec.BROWSER_LINK_OPEN_IN_TEXT).replace(
        _spec.BROWSER_LINK_CLOSE, _spec.BROWSER_LINK_CLOSE_IN_TEXT
    )


def _link_text(text: str) -> str:
    return text.replace(_spec.BROWSER_LINK_SEPARATOR, _spec.BROWSER_SEPARATOR_IN_LINK_TEXT)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _replace(node: Any, text: str) -> None:
    """Put `text` where `node` is, keeping what follows it."""
    parent = node.getparent()
    if parent is None:
        return
    tail = text + (node.tail or "")
    previous = node.getprevious()
    if previous is None:
        parent.text = (parent.text or "") + tail
    else:
        previous.tail = (previous.tail or "") + tail
    parent.remove(node)


def html_to_page(html: str, url: str, title: str | None = None) -> Page:
    """An HTML page in the browser's form: link markers, image placeholders, then html2text's text."""
    try:
        root = lxml.html.fromstring(_plain(html) or "<html></html>")
    except (lxml.etree.ParserError, ValueError):
        return Page(url, title or _domain(url), _wrap(_plain(html)))
    found = root.find(".//title")
    shown_title = title or (_squash(found.text_content()) if found is not None else "") or _domain(url)
    for name in _DROPPED:
        for node in root.findall(f".//{name}"):
            _replace(node, "")
    links: dict[int, str] = {}
    ids: dict[str, int] = {}
    here = _domain(url)
    for anchor in root.findall(".//a[@href]"):
        href = (anchor.get("href") or "").strip()
        text = _link_text(_squash(anchor.text_content()))
        if not text or href.startswith(("#", "mailto:", "javascript:")):
            _replace(anchor, text)
            continue
        target = urljoin(url, href)
        domain = _domain(target)
        if not domain:
            _replace(anchor, text)
            continue
        link_id = ids.setdefault(target, len(ids))
        links[link_id] = target
        if domain == here:
            _replace(anchor, fill(_spec.BROWSER_LINK, id=link_id, text=text))
        else:
            _replace(anchor, fill(_spec.BROWSER_LINK_OFF_SITE, id=link_id, text=text, domain=domain))
    for n, image in enumerate(root.findall(".//img")):
        alt = image.get("alt") or image.get("title")
        _replace(image, fill(_spec.BROWSER_IMAGE, n=n, alt=alt) if alt else fill(_spec.BROWSER_IMAGE_WITHOUT_ALT, n=n))
    converter = html2text.HTML2Text()
    converter.ignore_links = True
    converter.ignore_images = True
    converter.ignore_emphasis = True
    converter.ignore_tables = True
    converter.unicode_snob = True
    converter.body_width = 0
    text = converter.handle(lxml.etree.tostring(root, encoding="unicode", method="html"))
    text = re.sub(r"^\s+$", "", text, flags=re.MULTILINE)
    text = re.sub(r"\n(\s*\n)+", "\n\n", text).strip()
    return Page(url, shown_title, _wrap(text), links)


def _search_page(query: str, hits: Sequence[SearchHit]) -> Page:
    lines: list[str] = []
    links: dict[int, str] = {}
    for i, hit in enumerate(hits):
        links[i] = hit.url
        title = _link_text(_squash(_plain(hit.title))) or hit.url
        marker = fill(_spec.BROWSER_LINK_OFF_SITE, id=i, text=title, domain=_domain(hit.url))
        lines += _wrap(fill(_spec.BROWSER_SEARCH_HIT, link=marker, snippet=_squash(_plain(hit.snippet))).rstrip())
    if not hits:
        lines = [fill(_spec.BROWSER_NO_RESULTS, query=query)]
    return Page("", query, lines, links, dict(enumerate(hits)))


def _hit_page(hit: SearchHit) -> Page:
    """A search hit opened without fetching it: what the search service said of it."""
    return Page(hit.url, _squash(hit.title) or hit.url, _wrap(_squash(_plain(hit.snippet)) or "(no text)"))


def citation_annotations(text: str, pages: Mapping[int, Citation]) -> list[Any]:
    """`url_citation` annotations for the citations in an answer (`【{cursor}†L{n}】`) of pages with a URL."""
    out: list[Any] = []
    for match in _CITATION.finditer(text):
        page = pages.get(int(match.group(1)))
        if page is None:
            continue
        out.append(UrlCitationBody(url=page.url, title=page.title, start_index=match.start(), end_index=match.end()))
    return out


def _allowed(url: str, domains: Sequence[str]) -> bool:
    host = _domain(url).lower()
    return not domains or any(host == d or host.endswith("." + d) for d in domains)


@dataclass(frozen=True)
class WebSearchOptions:
    """What a request's `web_search` tool asks (see the module docstring)."""

    allowed_domains: tuple[str, ...] = ()
    external: bool = True
    view_chars: int = _VIEW_TOKENS[_VIEW_DEFAULT] * _CHARS_PER_TOKEN

    @classmethod
    def of(cls, tool: Mapping[str, Any], where: str) -> WebSearchOptions:
        for key in tool:
            if key not in _WEB_SEARCH_FIELDS:
                raise RequestError.of(_spec.REQUEST_ERROR_UNKNOWN_FIELD, f"{where}.{key}")
        filters = tool.get("filters")
        domains: list[str] = []
        if filters is not None:
            if not isinstance(filters, Mapping) or set(filters) - {"allowed_domains"}:
                raise RequestError.of(
                    _spec.REQUEST_ERROR_NOT_HONOURED,
                    f"{where}.filters",
                    value=filters,
                    why=Verbatim("only `allowed_domains` filters web search here"),
                )
            given = filters.get("allowed_domains") or []
            if not isinstance(given, list) or not all(isinstance(d, str) and d.strip() for d in given):
                raise RequestError.of(
                    _spec.REQUEST_ERROR_INVALID,
                    f"{where}.filters.allowed_domains",
                    reason=Verbatim("a list of domain names is expected"),
                )
            domains = [
                _domain("//" + d.strip().lower().removeprefix("https://").removeprefix("http://")) for d in given
            ]
        external = tool.get("external_web_access")
        if external is not None and not isinstance(external, bool):
            raise RequestError.of(
                _spec.REQUEST_ERROR_INVALID, f"{where}.external_web_access", reason=Verbatim("true or false")
            )
        size = tool.get("search_context_size")
        if size is not None and size not in _VIEW_TOKENS:
            raise RequestError.of(
                _spec.REQUEST_ERROR_INVALID,
                f"{where}.search_context_size",
                reason=Verbatim(f"one of {', '.join(_VIEW_TOKENS)}"),
            )
        location = tool.get("user_location")
        if location is not None and (not isinstance(location, Mapping) or set(location) - {"type"}):
            raise RequestError.of(
                _spec.REQUEST_ERROR_NOT_HONOURED,
                f"{where}.user_location",
                value=location,
                why=Verbatim("this server's web search cannot localise results (leave it out, or give only its type)"),
            )
        return cls(tuple(domains), external is not False, _VIEW_TOKENS[size or _VIEW_DEFAULT] * _CHARS_PER_TOKEN)


class BrowserSession:
    """One response's browser: its pages (the cursor counts them), the search provider, the fetch policy."""

    def __init__(
        self, provider: SearchProvider, policy: FetchPolicy, options: WebSearchOptions, *, max_bytes: int, sources: bool
    ) -> None:
        self.provider = provider
        self.policy = policy
        self.options = options
        self.max_bytes = max_bytes
        self.sources = sources  # include `web_search_call.action.sources`
        self.pages: list[Page] = []
        self._client: httpx.AsyncClient | None = None

    # -- the session protocol -------------------------------------------------------------------------

    def namespaces(self) -> Sequence[ToolNamespaceConfig]:
        return [NAMESPACE]

    def items(self) -> Sequence[Mapping[str, Any]]:
        return ()

    def pending(self) -> Sequence[HostedCall]:
        return ()

    def claims(self, recipient: str) -> bool:
        return recipient.startswith(_PREFIX)

    def started(self, call: HostedCall) -> Mapping[str, Any]:
        args = _arguments(call.arguments)
        args = args if isinstance(args, dict) else {}
        if call.recipient == _OPEN:
            target = args.get("id")
            return {"action": {"type": "open_page", "url": target if isinstance(target, str) else None}}
        if call.recipient == _FIND:
            page = self._page_or_none(args.get("cursor", -1))
            return {
                "action": {
                    "type": "find_in_page",
                    "pattern": str(args.get("pattern", "")),
                    "url": page.url if page else "",
                }
            }
        query = args.get("query")
        return {"action": {"type": "search", "query": query if isinstance(query, str) else None}}

    async def call(self, call: HostedCall, *, timeout: float) -> HostedResult:
        action = dict(self.started(call)["action"])
        args = _arguments(call.arguments)
        try:
            if not isinstance(args, dict):
                raise ToolUsageError("the arguments should be a JSON object")
            if call.recipient == _SEARCH:
                page = await self._search(args, timeout)
                queries = [str(args.get("query", ""))]
                action["queries"] = queries
                if self.sources:
                    action["sources"] = [{"type": "url", "url": url} for url in page.links.values()]
            elif call.recipient == _OPEN:
                page, loc, lines = await self._open(args, timeout)
                action["url"] = page.url or None
                return self._shown(page, action, loc, lines)
            elif call.recipient == _FIND:
                page = self._find(args)
                action["url"] = self.pages[-2].url if len(self.pages) > 1 else ""
            else:
                raise ToolUsageError(f"the browser has no function `{call.recipient.removeprefix(_PREFIX)}`")
        except ToolUsageError as exc:
            return HostedResult(text=str(exc), error=str(exc), item={"action": action})
        return self._shown(page, action, 0, -1)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    # -- the functions ------------------------------------------------------------------------------

    def _page_or_none(self, cursor: Any) -> Page | None:
        try:
            return self._page(cursor)
        except ToolUsageError:
            return None

    def _page(self, cursor: Any) -> Page:
        if not self.pages:
            raise ToolUsageError("no page has been opened yet: search first")
        if cursor is None or cursor == -1:
            return self.pages[-1]
        if not isinstance(cursor, int) or isinstance(cursor, bool):
            raise ToolUsageError(f"`cursor` should be an integer, not `{type(cursor).__name__}`")
        if not 0 <= cursor < len(self.pages):
            raise ToolUsageError(f"cursor `{cursor}` is out of range: the cursors are 0 to {len(self.pages) - 1}")
        return self.pages[cursor]

    async def _search(self, args: Mapping[str, Any], timeout: float) -> Page:
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolUsageError("`query` should be a non-empty string")
        try:
            hits = await self.provider.search(query, count=_SEARCH_RESULTS * 3, timeout=timeout)
        except SearchError as exc:
            raise ToolUsageError(f"error during search for `{query}`: {exc}") from None
        kept = [h for h in hits if _allowed(h.url, self.options.allowed_domains)][:_SEARCH_RESULTS]
        page = _search_page(query, kept)
        self.pages.append(page)
        return page

    async def _open(self, args: Mapping[str, Any], timeout: float) -> tuple[Page, int, int]:
        target = args.get("id", -1)
        loc = args.get("loc", -1)
        lines = args.get("num_lines", -1)
        if not isinstance(loc, int) or not isinstance(lines, int):
            raise ToolUsageError("`loc` and `num_lines` should be integers")
        if isinstance(target, str):
            page = await self._fetch(target, timeout, None)
        elif isinstance(target, int) and not isinstance(target, bool):
            current = self._page(args.get("cursor", -1))
            if target < 0:
                page = current  # scroll
            else:
                url = current.links.get(target)
                if url is None:
                    raise ToolUsageError(f"invalid link id `{target}`")
                hit = current.hits.get(target) if current.hits is not None else None
                page = await self._fetch(url, timeout, hit)
        else:
            raise ToolUsageError("`id` should be a link id (a number) or a URL (a string)")
        self.pages.append(page)
        return page, max(loc, 0), lines

    async def _fetch(self, url: str, timeout: float, hit: SearchHit | None) -> Page:
        if not _allowed(url, self.options.allowed_domains):
            domains = ", ".join(self.options.allowed_domains)
            raise ToolUsageError(f"`{url}` is outside the domains this search may use ({domains})")
        if not self.options.external:
            if hit is not None:
                return _hit_page(hit)
            raise ToolUsageError(f"live web access is off for this request: `{url}` cannot be opened")
        if self._client is None:
            self._client = self.policy.client(timeout=timeout)
        try:
            async with self._client.stream("GET", url, timeout=timeout) as reply:
                if reply.status_code >= 400:
                    raise ToolUsageError(f"error fetching `{url}`: HTTP {reply.status_code}")
                body = await read_limited(reply, self.max_bytes)
                kind = reply.headers.get("content-type", "").split(";")[0].strip().lower()
                final = str(reply.url)
                charset = reply.charset_encoding or "utf-8"
        except FetchRefused as exc:
            raise ToolUsageError(f"error fetching `{url}`: refused: {exc.reason}") from None
        except httpx.TimeoutException:
            raise ToolUsageError(f"error fetching `{url}`: no answer within {timeout:g} s") from None
        except (httpx.HTTPError, ValueError) as exc:
            raise ToolUsageError(f"error fetching `{url}`: {exc}") from None
        text = body.decode(charset, errors="replace")
        if kind in _HTML_TYPES or (not kind and "<html" in text[:1000].lower()):
            return html_to_page(text, final)
        if kind in _TEXT_TYPES or kind.startswith("text/"):
            return Page(final, _domain(final), _wrap(_plain(text)))
        raise ToolUsageError(f"`{url}` is {kind or 'of no stated type'}, which the browser cannot show")

    def _find(self, args: Mapping[str, Any]) -> Page:
        pattern = args.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ToolUsageError("`pattern` should be a non-empty string")
        page = self._page(args.get("cursor", -1))
        if page.hits is not None or page.find:
            raise ToolUsageError("`find` cannot search a page of search or find results: open a page first")
        lines = [_LINK.sub(lambda m: m.group(1), line) for line in page.lines]
        chunks: list[str] = []
        at = 0
        wanted = pattern.lower()
        while at < len(lines) and len(chunks) < _FIND_LIMIT:
            if wanted not in lines[at].lower():
                at += 1
                continue
            marker = fill(_spec.BROWSER_FIND_MATCH, n=len(chunks), line=at)
            chunks.append(marker + "\n" + "\n".join(lines[at : at + _FIND_CONTEXT]))
            at += _FIND_CONTEXT
        text = "\n\n".join(chunks) if chunks else fill(_spec.BROWSER_FIND_NO_RESULTS, pattern=pattern)
        title = fill(_spec.BROWSER_FIND_TITLE, pattern=pattern, title=page.title)
        found = Page(f"{page.url}/find?pattern={quote(pattern)}" if page.url else "", title, text.split("\n"))
        found.find = True
        found.links = dict.fromkeys(range(len(chunks)), page.url)
        self.pages.append(found)
        return found

    # -- the display ---------------------------------------------------------------------------------

    def _shown(self, page: Page, action: dict[str, Any], loc: int, num_lines: int) -> HostedResult:
        cursor = len(self.pages) - 1
        total = len(page.lines)
        if total and loc >= total:
            self.pages.pop()
            message = f"invalid location `{loc}`: the page's last line is {total - 1}"
            return HostedResult(text=message, error=message, item={"action": action})
        end = total if num_lines <= 0 else min(total, loc + num_lines)
        if num_lines <= 0:
            budget, end = self.options.view_chars, loc
            while end < total and budget > 0:
                budget -= len(page.lines[end]) + 8
                end += 1
        shown = "\n".join(fill(_spec.BROWSER_LINE, n=n, text=page.lines[n]) for n in range(loc, end))
        display = fill(
            _spec.BROWSER_DISPLAY,
            cursor=cursor,
            title=page.title,
            url=fill(_spec.BROWSER_DISPLAY_URL, url=page.url) if page.url else "",
            first=loc,
            last=max(end - 1, loc),
            last_line=max(total - 1, 0),
            lines=shown,
        )
        cited = [Citation(cursor, page.url, page.title)] if page.url and not page.find else []
        return HostedResult(text=display, item={"action": action}, citations=cited)


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return None


class WebSearchBackend:
    """The `web_search` hosted tool: `browser` sessions over a search provider (`--web-search URL`)."""

    kind = HostedKind.WEB_SEARCH

    def __init__(self, provider: SearchProvider, *, max_bytes: int) -> None:
        self.provider = provider
        self.max_bytes = max_bytes

    def check(self, tool: Mapping[str, Any], where: str) -> None:
        WebSearchOptions.of(tool, where)

    async def open(self, tools: Sequence[Mapping[str, Any]], context: HostedContext) -> BrowserSession:
        options = WebSearchOptions.of(tools[0], "tools")
        sources = any(value in context.include for value in _spec.HOSTED_KINDS[self.kind.value]["includes"])
        return BrowserSession(self.provider, context.policy, options, max_bytes=self.max_bytes, sources=sources)

    async def aclose(self) -> None:
        await self.provider.aclose()
