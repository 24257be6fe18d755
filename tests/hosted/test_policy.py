"""The fetch policy of hosted tools (server/hosted/policy.py), a unit at a time; the servers' refusals of loopback
are in test_web_search.py and test_mcp_serve.py.

Two HTTP stacks reach the network under the policy: httpx/httpcore (web search, pages) and the MCP SDK's
httpx2/httpcore2. Each has its own network backend class, but both connect by `FetchPolicy.connect`, so the
connection tests run on both."""

from __future__ import annotations

import asyncio
import ipaddress
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import pytest

from harmony_responses.server.hosted import mcp, policy
from harmony_responses.server.hosted.policy import FetchPolicy, FetchRefused, PolicyError, parse_rule
from harmony_responses.server.settings import Settings, SettingsError


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("127.0.0.1", "loopback"),
        ("127.5.6.7", "loopback"),
        ("::1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.9", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),  # where cloud metadata answers
        ("fe80::1", "link-local"),
        ("::ffff:127.0.0.1", "loopback"),  # an IPv4-mapped address is judged as the IPv4 one
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("100.64.0.1", "not a public address"),  # shared address space
    ],
)
def test_non_public_addresses_are_refused_by_default(address: str, words: str) -> None:
    reason = FetchPolicy().refusal("example.test", ipaddress.ip_address(address))
    assert reason is not None and words in reason and "--hosted-allow" in reason


def test_public_addresses_pass_and_the_operator_widens_or_narrows() -> None:
    public = ipaddress.ip_address("93.184.216.34")
    assert FetchPolicy().refusal("example.com", public) is None
    allowed = FetchPolicy(allow=["10.0.0.0/8", "search.internal"])
    assert allowed.refusal("x", ipaddress.ip_address("10.9.9.9")) is None
    assert allowed.refusal("search.internal", ipaddress.ip_address("192.168.0.5")) is None  # a name, wherever it is
    assert allowed.refusal("x", ipaddress.ip_address("192.168.0.5")) is not None
    denied = FetchPolicy(allow=["10.0.0.0/8"], deny=["10.0.0.7", "example.com"])
    assert "--hosted-deny" in (denied.refusal("x", ipaddress.ip_address("10.0.0.7")) or "")
    assert denied.refusal("example.com", public) is not None  # deny wins, names too
    trusted = FetchPolicy().trusting("http://127.0.0.1:8888")  # the operator's own search service
    assert trusted.refusal("127.0.0.1", ipaddress.ip_address("127.0.0.1")) is None


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("gopher://example.com/", "only http and https"),
        ("http://user:pw@example.com/", "user info"),
        ("http://127.0.0.1:8000/admin", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ],
)
def test_urls_are_checked_before_any_connection(url: str, words: str) -> None:
    with pytest.raises(FetchRefused) as caught:
        FetchPolicy().check_url(url)
    assert words in caught.value.reason


@pytest.mark.parametrize("entry", ["10.0.0.0/8", "::1", "127.0.0.1", "search.internal", "Localhost."])
def test_allow_entries_parse(entry: str) -> None:
    parse_rule(entry)


@pytest.mark.parametrize("entry", ["", "not a host", "a..b", "-x-/8/"])
def test_bad_allow_entries_are_refused_by_name(entry: str) -> None:
    with pytest.raises(PolicyError):
        parse_rule(entry)
    with pytest.raises(SettingsError, match="hosted_allow"):
        Settings(hosted_allow=(entry,)).validate()


@pytest.fixture
def page() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_the_client_refuses_loopback_names_and_allows_them_when_told(page: str) -> None:
    port = page.split(":")[1]

    async def fetch(policy: FetchPolicy, url: str) -> bytes:
        async with policy.client(timeout=5) as client:
            return (await client.get(url)).content

    with pytest.raises(FetchRefused, match="loopback"):
        asyncio.run(fetch(FetchPolicy(), f"http://localhost:{port}/"))  # a name that resolves to loopback
    assert asyncio.run(fetch(FetchPolicy(allow=["127.0.0.1"]), f"http://localhost:{port}/")) == b"ok"


class _Rebound:
    """A stream connected elsewhere than the address asked for (what DNS rebinding or a NAT trick gives)."""

    closed = False

    def get_extra_info(self, info: str) -> Any:
        return ("10.0.0.5", 80) if info == "server_addr" else None

    async def aclose(self) -> None:
        self.closed = True


class _Elsewhere:
    def __init__(self) -> None:
        self.asked: list[str] = []
        self.stream = _Rebound()

    async def connect_tcp(self, host: str, port: int, *args: Any) -> Any:
        self.asked.append(host)
        return self.stream


class _Network(Protocol):
    inner: Any

    async def connect_tcp(self, host: str, port: int) -> Any: ...

    async def connect_unix_socket(self, path: str) -> Any: ...


NETWORKS: dict[str, Any] = {"httpcore": policy._CheckedNetwork, "httpcore2 (MCP)": mcp._CheckedNetwork}


@pytest.mark.parametrize("kind", NETWORKS)
def test_the_address_actually_connected_to_is_checked(kind: str) -> None:
    network: _Network = NETWORKS[kind](FetchPolicy(allow=["93.184.216.34"]))
    inner = _Elsewhere()
    network.inner = inner
    with pytest.raises(FetchRefused, match="10.0.0.5 is a private address"):
        asyncio.run(network.connect_tcp("93.184.216.34", 80))
    assert inner.asked == ["93.184.216.34"]  # it connected by the checked address, not by a name resolved again
    assert inner.stream.closed


@pytest.mark.parametrize("kind", NETWORKS)
def test_both_stacks_connect_by_the_one_policy_step(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SSRF rule lives once: each backend hands its connection to `FetchPolicy.connect`."""
    seen: list[tuple[str, int]] = []

    async def connect(self: FetchPolicy, host: str, port: int, *args: Any, **kwargs: Any) -> str:
        seen.append((host, port))
        return "stream"

    monkeypatch.setattr(FetchPolicy, "connect", connect)
    network: _Network = NETWORKS[kind](FetchPolicy())
    assert asyncio.run(network.connect_tcp("example.org", 443)) == "stream"
    assert seen == [("example.org", 443)]


class _TwoAddresses(FetchPolicy):
    async def addresses(self, host: str, port: int) -> list[Any]:
        return [ipaddress.ip_address("10.0.0.1"), ipaddress.ip_address("10.0.0.2")]


class _Unreachable(Exception):
    pass


class _Failed(Exception):
    pass


def test_connect_moves_past_an_unreachable_address_and_names_each_failure() -> None:
    asked: list[str] = []

    class Connected(_Rebound):
        def get_extra_info(self, info: str) -> Any:
            return (asked[-1], 80) if info == "server_addr" else None

    async def open_(address: str, reach: tuple[str, ...]) -> Any:
        asked.append(address)
        if address not in reach:
            raise _Unreachable("no route")
        return Connected()

    rules = _TwoAddresses(allow=["10.0.0.0/8"])

    async def connect(*reach: str) -> Any:
        return await rules.connect("h", 80, lambda a: open_(a, reach), errors=(_Unreachable,), failed=_Failed)

    assert isinstance(asyncio.run(connect("10.0.0.2")), Connected)
    assert asked == ["10.0.0.1", "10.0.0.2"]
    with pytest.raises(_Failed, match="10.0.0.1: no route; 10.0.0.2: no route"):
        asyncio.run(connect())


@pytest.mark.parametrize("kind", NETWORKS)
def test_unix_sockets_are_never_used(kind: str) -> None:
    with pytest.raises(FetchRefused):
        asyncio.run(NETWORKS[kind](FetchPolicy()).connect_unix_socket("/var/run/docker.sock"))
