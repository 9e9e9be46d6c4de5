"""Fetch remote media over http(s) without letting a client reach private networks (SSRF).

Every connection goes through `VettingBackend`: it resolves the host itself, refuses the
connection unless *every* resolved address is public (addresses.py), and connects to a vetted
IP, so a DNS answer that changes between a check and the connect (rebinding) cannot slip
through. TLS still verifies and sends SNI for the URL's host name (httpcore passes it to
`start_tls`). Redirects are followed by hand, each hop re-checked; no proxy environment
variable is read (httpcore reads none); the whole fetch has one deadline, and the body is
counted while it streams, so a huge or endless response is cut off at the byte cap.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpcore

from gateway.media.addresses import AddressPolicy, address_problem, hostname_problem
from gateway.media.problems import FETCH_FAILED, REFUSED_ADDRESS, TOO_LARGE, MediaRejected

log = logging.getLogger(__name__)

MAX_REDIRECTS = 5
_REDIRECTS = {301, 302, 303, 307, 308}
_USER_AGENT = b"vllm-omni-mlx media fetch"


@dataclass(frozen=True, slots=True)
class FetchLimits:
    max_bytes: int
    timeout: float  # seconds for the whole fetch, redirects included
    policy: AddressPolicy = address_problem
    ssl_context: ssl.SSLContext | None = None  # None: httpcore's (system CAs + certifi)


class VettingBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that connects only to addresses the policy allows."""

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._vetted(host, port)
        error: Exception | None = None
        for address in addresses:  # the first one that answers, like a normal client
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise MediaRejected("unix sockets are not fetched from", REFUSED_ADDRESS)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def _vetted(self, host: str, port: int) -> list[str]:
        problem = hostname_problem(host)
        if problem:
            raise MediaRejected(f"refused to fetch from {host!r}: {problem}", REFUSED_ADDRESS)
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise MediaRejected(f"cannot resolve host {host!r}: {exc}", FETCH_FAILED) from None
        addresses: list[str] = []
        for *_, sockaddr in infos:
            text = str(sockaddr[0]).split("%", 1)[0]
            ip = ipaddress.ip_address(text)
            problem = self._policy(ip)
            if problem:
                raise MediaRejected(_refusal(host, ip, problem), REFUSED_ADDRESS)
            if text not in addresses:
                addresses.append(text)
        if not addresses:
            raise MediaRejected(f"cannot resolve host {host!r}", FETCH_FAILED)
        return addresses


def _refusal(host: str, ip: ipaddress.IPv4Address | ipaddress.IPv6Address, problem: str) -> str:
    """Why `host` is not fetched. An address the caller wrote is named with its class; what a
    name resolves to stays in the server's log: told to the caller, it would make the server a
    DNS resolver for the host's own network."""
    if _is_literal(host):
        return f"refused to fetch from {host!r}: it is {problem}; only public addresses are fetched"
    log.info("refused a media fetch from %r: it resolves to %s (%s)", host, ip, problem)
    return (
        f"refused to fetch from {host!r}: it resolves to a non-public address; only public "
        "addresses are fetched"
    )


def _is_literal(host: str) -> bool:
    """Whether `host` is an address itself (`10.0.0.1`, `[::ffff:10.0.0.1]`), not a name."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise MediaRejected(
            f"refused to fetch {url!r}: only http and https URLs are fetched", REFUSED_ADDRESS
        )
    if not parts.hostname:
        raise MediaRejected(f"refused to fetch {url!r}: the URL has no host", REFUSED_ADDRESS)
    if parts.username is not None or parts.password is not None:
        raise MediaRejected(f"refused to fetch {url!r}: credentials in URLs", REFUSED_ADDRESS)


async def fetch(url: str, limits: FetchLimits) -> bytes:
    """The body of `url` (redirects followed), or MediaRejected saying why not."""
    try:
        return await asyncio.wait_for(_fetch(url, limits), limits.timeout)
    except asyncio.TimeoutError:
        raise MediaRejected(
            f"fetching {url!r} took longer than {limits.timeout:g} s", FETCH_FAILED
        ) from None


async def _fetch(url: str, limits: FetchLimits) -> bytes:
    async with httpcore.AsyncConnectionPool(
        network_backend=VettingBackend(limits.policy), retries=0, ssl_context=limits.ssl_context
    ) as pool:
        for _ in range(MAX_REDIRECTS + 1):
            _check_url(url)
            location = await _get(pool, url, limits.max_bytes)
            if isinstance(location, bytes):
                return location
            url = urljoin(url, location)
    raise MediaRejected(f"more than {MAX_REDIRECTS} redirects", FETCH_FAILED)


async def _get(pool: httpcore.AsyncConnectionPool, url: str, max_bytes: int) -> bytes | str:
    """The body, or the Location of a redirect."""
    headers = [(b"User-Agent", _USER_AGENT), (b"Accept", b"*/*")]
    try:
        async with pool.stream("GET", url, headers=headers) as response:
            if response.status in _REDIRECTS:
                location = _header(response.headers, b"location")
                if not location:
                    raise MediaRejected(
                        f"{url!r} answered {response.status} without a Location", FETCH_FAILED
                    )
                return location
            if response.status != 200:
                raise MediaRejected(f"{url!r} answered HTTP {response.status}", FETCH_FAILED)
            length = _header(response.headers, b"content-length")
            if length.isdigit() and int(length) > max_bytes:
                raise _too_large(url, max_bytes)
            chunks, size = [], 0
            async for chunk in response.aiter_stream():
                size += len(chunk)
                if size > max_bytes:
                    raise _too_large(url, max_bytes)
                chunks.append(chunk)
            return b"".join(chunks)
    except httpcore.TimeoutException:
        raise MediaRejected(f"fetching {url!r} timed out", FETCH_FAILED) from None
    except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol) as exc:
        raise MediaRejected(
            f"fetching {url!r} failed: {exc or type(exc).__name__}", FETCH_FAILED
        ) from None


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str:
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1").strip()
    return ""


def _too_large(url: str, max_bytes: int) -> MediaRejected:
    return MediaRejected(f"{url!r} is larger than the {max_bytes}-byte media limit", TOO_LARGE)
