"""HTTPS media fetches: connected to the vetted address, verified against the URL's host name.

The fetcher connects to an IP it resolved and vetted itself, so TLS must still send the URL's
host name (SNI) and check the certificate against that name, not against the IP. A local TLS
server on 127.0.0.2 (treated as public by the injected policy) with a certificate from a test
CA; the name `media.test` resolves to it through a patched resolver.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import ssl
from pathlib import Path

import pytest

from gateway.media import problems
from gateway.media.addresses import address_problem
from gateway.media.fetch import FetchLimits, fetch
from gateway.media.problems import MediaRejected
from tests.support.media_http import MediaServer

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

PUBLIC = "127.0.0.2"
HOST = "media.test"
BODY = b"\x89PNG bytes over TLS"


def policy(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    return None if str(ip) == PUBLIC else address_problem(ip)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def issue(tmp: Path, dns_name: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context with a certificate for `dns_name`, client context trusting its CA)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("test CA"))
        .issuer_name(_name("test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(dns_name))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (tmp / "cert.pem").write_bytes(cert.public_bytes(pem) + ca.public_bytes(pem))
    (tmp / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(tmp / "cert.pem", tmp / "key.pem")
    client = ssl.create_default_context(cadata=ca.public_bytes(pem).decode())
    return server, client


@pytest.fixture
def resolve_media_test(monkeypatch):
    """`media.test` resolves to the 'public' test address; other names as usual."""
    real = asyncio.base_events.BaseEventLoop.getaddrinfo

    async def getaddrinfo(self, host, port, *args, **kwargs):
        if host == HOST:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port))]
        return await real(self, host, port, *args, **kwargs)

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "getaddrinfo", getaddrinfo)


def serve_tls(tmp: Path, dns_name: str) -> tuple[MediaServer, ssl.SSLContext, list[str]]:
    server_context, client_context = issue(tmp, dns_name)
    seen_sni: list[str] = []
    server_context.sni_callback = lambda sock, name, ctx: seen_sni.append(name)
    server = MediaServer(PUBLIC, {"/img.png": (200, {}, BODY)}, tls=server_context)
    return server, client_context, seen_sni


def test_https_sends_the_host_name_and_verifies_it(tmp_path, resolve_media_test):
    server, client_context, seen_sni = serve_tls(tmp_path, HOST)
    limits = FetchLimits(1 << 20, 5.0, policy, ssl_context=client_context)
    with server:
        body = asyncio.run(fetch(f"https://{HOST}:{server.port}/img.png", limits))
    assert body == BODY
    assert seen_sni == [HOST]
    assert server.hits == [("/img.png", f"{HOST}:{server.port}")]


def test_a_certificate_for_another_name_is_refused(tmp_path, resolve_media_test):
    server, client_context, _ = serve_tls(tmp_path, "other.test")
    limits = FetchLimits(1 << 20, 5.0, policy, ssl_context=client_context)
    with server, pytest.raises(MediaRejected) as info:
        asyncio.run(fetch(f"https://{HOST}:{server.port}/img.png", limits))
    assert info.value.code == problems.FETCH_FAILED
    assert server.hits == []


def test_https_to_a_private_address_is_refused_before_any_handshake(tmp_path, monkeypatch):
    server, client_context, seen_sni = serve_tls(tmp_path, HOST)
    limits = FetchLimits(1 << 20, 5.0, address_problem, ssl_context=client_context)
    with server, pytest.raises(MediaRejected) as info:
        asyncio.run(fetch(f"https://{PUBLIC}:{server.port}/img.png", limits))
    assert info.value.code == problems.REFUSED_ADDRESS
    assert seen_sni == [] and server.hits == []
