"""The operator's listening options through the real processes: HTTPS with several API keys
and CORS (the OpenAI SDK over TLS with a self-signed certificate), and a UNIX socket serving a
`--chat-template` file."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import ssl
import time
from pathlib import Path

import httpx
import openai
import pytest

from tests.support.server import ServerProcess
from worker.tiny_models import ensure_checkpoint

KEYS = ("first-key-0123", "second-key-4567")
ORIGIN = "https://app.example"
TEMPLATE = (
    "{% for m in messages %}[{{ m['role'] | upper }}] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[ASSISTANT]{% endif %}"
)


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    key_path, cert_path = folder / "key.pem", folder / "cert.pem"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key_path, cert_path


@pytest.fixture(scope="module")
def https(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    key, cert = _self_signed(folder)
    (folder / "keys.txt").write_text(f"# the second key\n{KEYS[1]}\n")
    args = [
        str(ensure_checkpoint("qwen3")), "--ssl-keyfile", str(key), "--ssl-certfile", str(cert),
        "--api-key-file", str(folder / "keys.txt"), "--allowed-origins", ORIGIN,
    ]  # fmt: skip
    verify = ssl.create_default_context(cafile=str(cert))
    server = ServerProcess(
        args, folder / "server.log", api_key=KEYS[0], client=httpx.Client(verify=verify), tls=True
    )
    server.cert = cert
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("key", KEYS)
def test_the_openai_sdk_chats_over_https_with_either_key(https, key):
    client = openai.OpenAI(
        base_url=f"{https.url}/v1",
        api_key=key,
        http_client=httpx.Client(verify=ssl.create_default_context(cafile=str(https.cert))),
        max_retries=0,
    )
    reply = client.chat.completions.create(
        model="qwen3-tiny-v3",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=4,
    )
    assert reply.usage.completion_tokens > 0
    named = f"key={hashlib.sha256(key.encode()).hexdigest()[:8]}"
    deadline = time.monotonic() + 10  # the access log's line is written as the response ends
    while named not in https.log_path.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = https.log_path.read_text()
    assert named in log
    assert key not in log


def test_a_wrong_key_and_plain_http_are_refused(https):
    headers = {"Authorization": "Bearer not-a-key"}
    assert https.client.get(f"{https.url}/v1/models", headers=headers).status_code == 401
    with pytest.raises(httpx.HTTPError):
        httpx.get(https.url.replace("https", "http") + "/health", timeout=5)


def test_cors_answers_the_allowed_origin_only(https):
    preflight = {"Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization, content-type"}  # fmt: skip
    url = f"{https.url}/v1/chat/completions"
    allowed = https.client.options(url, headers={"Origin": ORIGIN, **preflight})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ORIGIN
    other = https.client.options(url, headers={"Origin": "https://other.example", **preflight})
    assert "access-control-allow-origin" not in other.headers


@pytest.fixture(scope="module")
def socket_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("uds")
    (folder / "template.jinja").write_text(TEMPLATE)
    sock = folder / "server.sock"
    args = [str(ensure_checkpoint("qwen3")), "--uds", str(sock),
            "--chat-template", str(folder / "template.jinja")]  # fmt: skip
    client = httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=120)
    server = ServerProcess(args, folder / "server.log", client=client)
    server.url = "http://localhost"  # any host: the socket is the address
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


def test_a_unix_socket_serves_chats_rendered_by_the_template_file(socket_server):
    messages = [{"role": "user", "content": "hi there"}]
    tokenized = socket_server.client.post(
        "http://localhost/tokenize",
        json={"model": "qwen3-tiny-v3", "messages": messages, "add_generation_prompt": True},
    )
    assert tokenized.status_code == 200, tokenized.text
    tokens = tokenized.json()["tokens"]
    text = socket_server.client.post(
        "http://localhost/detokenize", json={"model": "qwen3-tiny-v3", "tokens": tokens}
    ).json()["prompt"]
    assert text == "[USER] hi there\n[ASSISTANT]"
    reply = socket_server.client.post(
        "http://localhost/v1/chat/completions",
        json={"model": "qwen3-tiny-v3", "messages": messages, "max_tokens": 4},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["prompt_tokens"] == len(tokens)
