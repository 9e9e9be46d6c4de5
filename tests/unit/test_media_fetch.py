"""Remote media fetches: public addresses only (checked on the address connected to, every
redirect hop included), a byte cap while streaming, one deadline for the whole fetch.

Real sockets on loopback: an injected policy treats 127.0.0.2 as "public" and everything else
by the real rules, so 127.0.0.1 stays a refused loopback address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time

import pytest

from gateway.media import problems
from gateway.media.addresses import address_problem
from gateway.media.fetch import MAX_REDIRECTS, FetchLimits, fetch
from gateway.media.problems import MediaRejected
from tests.support.media_http import MediaServer

PUBLIC = "127.0.0.2"
BODY = b"\x89PNG fake image bytes"


def policy(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    return None if str(ip) == PUBLIC else address_problem(ip)


def limits(max_bytes: int = 1 << 20, timeout: float = 5.0, test_policy=policy) -> FetchLimits:
    return FetchLimits(max_bytes=max_bytes, timeout=timeout, policy=test_policy)


def refused(url: str, lim: FetchLimits | None = None) -> MediaRejected:
    with pytest.raises(MediaRejected) as info:
        asyncio.run(fetch(url, lim or limits()))
    return info.value


@pytest.fixture
def private():
    """A server on 127.0.0.1 that must never be reached."""
    with MediaServer("127.0.0.1", {"/": (200, {}, BODY), "/x.png": (200, {}, BODY)}) as server:
        yield server


@pytest.fixture
def public():
    with MediaServer(PUBLIC, {"/img.png": (200, {}, BODY)}) as server:
        yield server


def test_a_public_address_is_fetched(public):
    assert asyncio.run(fetch(public.url("/img.png"), limits())) == BODY


def test_loopback_is_refused_without_connecting(private):
    error = refused(private.url("/x.png"), limits(test_policy=address_problem))
    assert error.code == problems.REFUSED_ADDRESS
    assert "127.0.0.1" in error.message and "loopback" in error.message
    assert private.hits == []


def test_the_metadata_address_is_refused():
    error = refused("http://169.254.169.254/latest/meta-data/", limits(timeout=2))
    assert error.code == problems.REFUSED_ADDRESS
    assert "link-local" in error.message


def test_localhost_is_refused_by_what_it_resolves_to_without_saying_the_address(private):
    error = refused(f"http://localhost:{private.port}/", limits(test_policy=address_problem))
    assert error.code == problems.REFUSED_ADDRESS
    assert "resolves to a non-public address" in error.message
    assert "127.0.0.1" not in error.message and "loopback" not in error.message
    assert private.hits == []


def test_a_metadata_host_name_is_refused_before_lookup():
    error = refused("http://metadata.google.internal/computeMetadata/v1/")
    assert "metadata" in error.message


def test_a_redirect_to_loopback_is_refused_at_the_hop(private):
    routes = {"/r": (302, {"Location": private.url("/x.png")}, b"")}
    with MediaServer(PUBLIC, routes) as hop:
        error = refused(hop.url("/r"))
        assert hop.hits and hop.hits[0][0] == "/r"  # the first hop was fetched
    assert error.code == problems.REFUSED_ADDRESS
    assert "loopback" in error.message
    assert private.hits == []


def test_redirects_are_followed_to_public_addresses():
    routes = {"/a": (301, {"Location": "/b"}, b""), "/b": (200, {}, BODY)}
    with MediaServer(PUBLIC, routes) as server:
        assert asyncio.run(fetch(server.url("/a"), limits())) == BODY


def test_a_redirect_loop_stops_after_the_limit():
    with MediaServer(PUBLIC, {"/loop": (302, {"Location": "/loop"}, b"")}) as server:
        error = refused(server.url("/loop"))
    assert f"more than {MAX_REDIRECTS} redirects" in error.message
    assert len(server.hits) == MAX_REDIRECTS + 1


def test_every_resolved_address_must_be_public(private, monkeypatch):
    # A name with one "public" and one private address (a rebinding setup) is refused whole.
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):
        if host == "rebind.test":
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    error = refused(f"http://rebind.test:{private.port}/x.png")
    assert "resolves to a non-public address" in error.message
    assert "127.0.0.1" not in error.message  # the address stays in the server's log
    assert private.hits == []


def test_the_vetted_address_is_connected_to_with_the_original_host_name(public, monkeypatch):
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):
        if host == "images.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    got = asyncio.run(fetch(f"http://images.test:{public.port}/img.png", limits()))
    assert got == BODY
    assert public.hits == [("/img.png", f"images.test:{public.port}")]


@pytest.mark.parametrize(
    "url", ["ftp://example.com/a.png", "gopher://x/", "http:///nohost", "http://u:p@example.com/"]
)
def test_only_plain_http_and_https_urls_are_fetched(url):
    assert refused(url).code == problems.REFUSED_ADDRESS


def test_a_declared_length_over_the_cap_is_refused_before_reading():
    with MediaServer(PUBLIC, {"/big": (200, {}, b"x" * 1000)}) as server:
        error = refused(server.url("/big"), limits(max_bytes=999))
    assert error.code == problems.TOO_LARGE


def _chunked(handler) -> None:
    handler.send_response(200)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    for _ in range(100):  # 100 x 100 bytes with no Content-Length
        handler.wfile.write(b"64\r\n" + b"y" * 100 + b"\r\n")
    handler.wfile.write(b"0\r\n\r\n")


def test_a_streamed_body_over_the_cap_is_cut_off():
    with MediaServer(PUBLIC, {"/stream": _chunked}) as server:
        error = refused(server.url("/stream"), limits(max_bytes=5000))
        assert asyncio.run(fetch(server.url("/stream"), limits(max_bytes=10_000))) == b"y" * 10_000
    assert error.code == problems.TOO_LARGE


def _slow(handler) -> None:
    time.sleep(3)
    handler.send_response(200)
    handler.send_header("Content-Length", "1")
    handler.end_headers()
    handler.wfile.write(b"z")


def test_the_whole_fetch_has_a_deadline():
    with MediaServer(PUBLIC, {"/slow": _slow}) as server:
        started = time.monotonic()
        error = refused(server.url("/slow"), limits(timeout=0.5))
        elapsed = time.monotonic() - started
    assert error.code == problems.FETCH_FAILED
    assert "longer than 0.5 s" in error.message
    assert elapsed < 2.5


def test_an_http_error_status_is_a_fetch_failure():
    with MediaServer(PUBLIC) as server:
        error = refused(server.url("/missing.png"))
    assert error.code == problems.FETCH_FAILED
    assert "404" in error.message


def test_proxy_environment_variables_are_not_used(public, monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    assert asyncio.run(fetch(public.url("/img.png"), limits())) == BODY
