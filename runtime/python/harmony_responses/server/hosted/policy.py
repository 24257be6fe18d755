"""Where hosted tools may connect: the allow/deny policy every fetch of a hosted backend goes through.

A model that can open URLs must not become a way into the operator's network. By default a hosted tool may
connect only to public addresses: loopback (`127.0.0.0/8`, `::1`), private ranges (`10/8`, `172.16/12`,
`192.168/16`, `fc00::/7`), link-local (`169.254/16`, where cloud metadata lives; `fe80::/10`), shared, reserved,
multicast and unspecified addresses are refused — whatever `ipaddress` does not call global. The operator widens
it with `--hosted-allow HOST|CIDR` (repeatable; `HARMONY_RESPONSES_HOSTED_ALLOW` takes a comma-separated list):
a host name is allowed whatever it resolves to, a CIDR or address allows those addresses. `--hosted-deny HOST|CIDR`
refuses hosts or ranges that would be allowed otherwise (it wins over the allow-list).

The check is made where it cannot be dodged: at the connection. `FetchPolicy.client()` is an httpx client whose
transport resolves each host itself, keeps only the addresses the policy allows, connects to one of them by
address (TLS still verifies the host name), and checks the address the socket is actually connected to before a
byte is sent. So a name that resolves to a public address when checked and to `127.0.0.1` when connected (DNS
rebinding) is refused, and every redirect hop is checked the same way. That step is one function,
`FetchPolicy.connect`: the MCP SDK's HTTP stack (httpx2/httpcore2, in `mcp.py`) connects through it too, each
stack's network backend only saying how to open a stream to an address. The client ignores proxy variables
(`trust_env=False`): behind a proxy the connected address would be the proxy's, not the page's.

A backend the operator configured with a URL (`--web-search http://127.0.0.1:8888`) gets `policy.trusting(url)`:
the same policy with that URL's host allowed, for that backend's own requests only; pages the model chooses are
fetched with the plain policy. MCP server URLs come from clients, so they get the plain policy too.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import anyio
import httpcore
import httpx

__all__ = ["UNIX_SOCKETS_REFUSED", "FetchPolicy", "FetchRefused", "PolicyError", "parse_rule"]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_SCHEMES = ("http", "https")
UNIX_SOCKETS_REFUSED = "hosted tools do not connect to Unix sockets"


class PolicyError(ValueError):
    """A `--hosted-allow` / `--hosted-deny` entry that is neither a host name nor an address or CIDR."""


class FetchRefused(httpx.TransportError):
    """The policy refused a connection (an httpx transport error, so callers handle it as a failed fetch).

    `reason` says why in words fit for the model and the log (`127.0.0.1 is a loopback address`)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"refused {url}: {reason}")
        self.url = url
        self.reason = reason


@dataclass(frozen=True)
class _Rules:
    hosts: frozenset[str] = frozenset()  # lower-case host names
    networks: tuple[IPNetwork, ...] = ()

    def matches(self, host: str, address: IPAddress | None) -> bool:
        if host.lower().rstrip(".") in self.hosts:
            return True
        return address is not None and any(address.version == n.version and address in n for n in self.networks)


def parse_rule(text: str) -> str | IPNetwork:
    """One allow/deny entry: an address or CIDR (`10.0.0.0/8`, `::1`), or a host name (`search.internal`)."""
    entry = text.strip()
    if not entry:
        raise PolicyError("an empty entry")
    try:
        return ipaddress.ip_network(entry, strict=False)
    except ValueError:
        pass
    name = entry.lower().rstrip(".")
    labels = name.split(".")
    if not all(label and len(label) <= 63 and all(c.isalnum() or c == "-" for c in label) for label in labels):
        raise PolicyError(f"{text!r} is neither an address, a CIDR, nor a host name")
    return name


def _rules(entries: Iterable[str]) -> _Rules:
    hosts: set[str] = set()
    networks: list[IPNetwork] = []
    for entry in entries:
        rule = parse_rule(entry)
        if isinstance(rule, str):
            hosts.add(rule)
        else:
            networks.append(rule)
    return _Rules(frozenset(hosts), tuple(networks))


def _address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _why_not_public(address: IPAddress) -> str | None:
    """Why `address` is not a public one (None when it is)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _why_not_public(address.ipv4_mapped)
    for test, words in (
        ("is_unspecified", "the unspecified address"),
        ("is_loopback", "a loopback address"),
        ("is_link_local", "a link-local address"),
        ("is_multicast", "a multicast address"),
        ("is_private", "a private address"),
        ("is_reserved", "a reserved address"),
    ):
        if getattr(address, test):
            return words
    return None if address.is_global else "not a public address"


@dataclass(frozen=True)
class FetchPolicy:
    """The allow/deny policy (see the module docstring). `allow` and `deny` are `--hosted-allow`/`--hosted-deny`."""

    allow: Sequence[str] = ()
    deny: Sequence[str] = ()
    _allow: _Rules = field(init=False, repr=False, compare=False)
    _deny: _Rules = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow", tuple(self.allow))
        object.__setattr__(self, "deny", tuple(self.deny))
        object.__setattr__(self, "_allow", _rules(self.allow))
        object.__setattr__(self, "_deny", _rules(self.deny))

    def trusting(self, url: str) -> FetchPolicy:
        """This policy with `url`'s host allowed too: for the requests of a backend the operator configured with it."""
        host = httpx.URL(url).host
        return FetchPolicy((*self.allow, host), self.deny) if host else self

    def refusal(self, host: str, address: IPAddress | None) -> str | None:
        """Why a connection to `host` at `address` is refused (None: allowed). `address` None: the name alone."""
        if self._deny.matches(host, address):
            return f"{address or host} is denied by --hosted-deny"
        if self._allow.matches(host, address):
            return None
        if address is None:
            return None  # a name is judged by the addresses it resolves to
        why = _why_not_public(address)
        return None if why is None else f"{address} is {why} (allow it with --hosted-allow)"

    def check_url(self, url: str) -> httpx.URL:
        """`url` parsed, if it can be fetched at all: http or https, with a host (no user info). Addresses written
        in the URL are checked here too; names are checked when they are resolved (`client()`)."""
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise FetchRefused(str(url), f"not a URL ({exc})") from None
        if parsed.scheme not in _SCHEMES:
            raise FetchRefused(url, f"only {' and '.join(_SCHEMES)} URLs are fetched")
        if not parsed.host:
            raise FetchRefused(url, "the URL names no host")
        if parsed.userinfo:
            raise FetchRefused(url, "a URL with user info is not fetched")
        reason = self.refusal(parsed.host, _address(parsed.host))
        if reason is not None:
            raise FetchRefused(url, reason)
        return parsed

    async def addresses(self, host: str, port: int) -> list[IPAddress]:
        """The addresses `host` resolves to that the policy allows, in the resolver's order; `FetchRefused` if none."""
        literal = _address(host)
        if literal is not None:
            found = [literal]
        else:
            try:
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise FetchRefused(host, f"the host name does not resolve ({exc})") from None
            found = []
            for info in infos:
                address = _address(str(info[4][0]))
                if address is not None and address not in found:
                    found.append(address)
        reasons = []
        allowed = []
        for address in found:
            reason = self.refusal(host, address)
            if reason is None:
                allowed.append(address)
            else:
                reasons.append(reason)
        if not allowed:
            raise FetchRefused(host, "; ".join(reasons) or "the host name resolves to no address")
        return allowed

    async def connect(
        self,
        host: str,
        port: int,
        open_: Callable[[str], Awaitable[_StreamT]],
        *,
        errors: tuple[type[Exception], ...],
        failed: Callable[[str], Exception],
    ) -> _StreamT:
        """A TCP connection to `host` held to the policy: the one connect-and-check step of every hosted backend's
        HTTP stack (httpx's here, httpx2's in `mcp.py`), which only supply how to open a stream to an address.

        `open_(address)` is tried on each address `addresses()` allows, in order, by address (never by the name,
        which could resolve elsewhere the second time); one failing with `errors` moves on to the next. The first
        stream opened is checked again by the address it is actually connected to (its `server_addr`) before a
        byte is sent, and closed with `FetchRefused` if the policy refuses that. `failed(reason)` is the library's
        connect error, raised when no address could be reached."""
        failures: list[str] = []
        for address in await self.addresses(host, port):
            try:
                stream = await open_(str(address))
            except errors as exc:
                failures.append(f"{address}: {exc or type(exc).__name__}")
                continue
            peer = stream.get_extra_info("server_addr")
            connected = _address(str(peer[0])) if isinstance(peer, tuple) and peer else None
            reason = "the connected address is unknown" if connected is None else self.refusal(host, connected)
            if reason is not None:
                await stream.aclose()
                raise FetchRefused(host, reason)
            return stream
        raise failed("; ".join(failures) or f"could not connect to {host}")

    def client(self, *, timeout: float, max_redirects: int = 5, **options: Any) -> httpx.AsyncClient:
        """An httpx client whose every connection (redirects included) the policy checks (see the module docstring)."""
        return httpx.AsyncClient(
            transport=PolicyTransport(self),
            timeout=timeout,
            follow_redirects=True,
            max_redirects=max_redirects,
            trust_env=False,
            **options,
        )


class _Stream(Protocol):
    """What `FetchPolicy.connect` needs of a connected stream (httpcore's and httpcore2's both are one)."""

    def get_extra_info(self, info: str) -> Any: ...

    async def aclose(self) -> None: ...


_StreamT = TypeVar("_StreamT", bound=_Stream)


class _CheckedNetwork(httpcore.AsyncNetworkBackend):
    """httpcore's network backend, with every TCP connection made by `FetchPolicy.connect`."""

    def __init__(self, policy: FetchPolicy) -> None:
        self.policy = policy
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        async def open_(address: str) -> httpcore.AsyncNetworkStream:
            return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)

        return await self.policy.connect(
            host, port, open_, errors=(httpcore.ConnectError, httpcore.ConnectTimeout), failed=httpcore.ConnectError
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise FetchRefused(path, UNIX_SOCKETS_REFUSED)

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class PolicyTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose network backend is held to the policy."""

    def __init__(self, policy: FetchPolicy) -> None:
        super().__init__(trust_env=False)
        self.policy = policy
        # httpx builds its pool with httpcore's default backend; the same pool with the checked backend instead.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl.create_default_context(),
            max_connections=16,
            max_keepalive_connections=4,
            keepalive_expiry=5.0,
            network_backend=_CheckedNetwork(policy),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.policy.check_url(str(request.url))  # the scheme, user info and literal addresses; names at connect
        return await super().handle_async_request(request)
