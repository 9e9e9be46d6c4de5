"""`serve`'s listening and access options (gateway/cli/listening.py): several API keys named in
logs by their ids, CORS, and the start-time refusals of UNIX socket, TLS, origins, keys and a
chat template file. Through the real app (TestClient) and the real CLI (CliRunner)."""

from __future__ import annotations

import hashlib
import logging

import pytest
from click.testing import CliRunner

from gateway.cli import main as cli
from tests.support.fake_engine import FakeEngine, make_client

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}


def _id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


@pytest.fixture
def two_keys():
    with make_client(FakeEngine(), api_keys=("first-key", "second-key")) as client:
        yield client


@pytest.mark.parametrize("key", ["first-key", "second-key"])
def test_each_of_several_keys_opens_the_api(two_keys, key):
    assert two_keys.get("/v1/models", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert two_keys.get("/v1/models", headers={"x-api-key": key}).status_code == 200


def test_a_key_that_is_none_of_them_is_refused(two_keys):
    assert two_keys.get("/v1/models", headers={"Authorization": "Bearer third"}).status_code == 401
    assert two_keys.get("/v1/models").status_code == 401


def test_the_access_log_names_the_key_by_its_id_never_the_key(two_keys, caplog):
    caplog.set_level(logging.INFO, logger="gateway.access")
    two_keys.get("/v1/models", headers={"Authorization": "Bearer second-key"})
    two_keys.get("/v1/models", headers={"Authorization": "Bearer wrong-key"})
    lines = [r.getMessage() for r in caplog.records if r.name == "gateway.access"]
    assert f"key={_id('second-key')}" in lines[0]
    assert "key=" not in lines[1]  # refused: no key to name
    assert not any("second-key" in line or "wrong-key" in line for line in lines)


ORIGIN = "https://app.example"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type, x-stainless-lang",
}


@pytest.fixture
def cors():
    with make_client(FakeEngine(), api_keys=("k",), allowed_origins=(ORIGIN,)) as client:
        yield client


def test_a_preflight_from_an_allowed_origin_is_answered_without_the_key(cors):
    response = cors.options("/v1/chat/completions", headers={"Origin": ORIGIN, **PREFLIGHT})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "x-stainless-lang" in response.headers["access-control-allow-headers"].lower()


def test_a_request_from_an_allowed_origin_carries_the_cors_headers(cors):
    headers = {"Origin": ORIGIN, "Authorization": "Bearer k"}
    response = cors.post("/v1/chat/completions", json=CHAT, headers=headers)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "x-request-id" in response.headers["access-control-expose-headers"]
    # The key is still needed: CORS lets the browser read the answer, not skip the check.
    assert (
        cors.post("/v1/chat/completions", json=CHAT, headers={"Origin": ORIGIN}).status_code == 401
    )


def test_another_origin_gets_no_cors_headers(cors):
    other = {"Origin": "https://evil.example"}
    assert cors.options("/v1/models", headers={**other, **PREFLIGHT}).status_code == 400
    response = cors.get("/v1/models", headers={**other, "Authorization": "Bearer k"})
    assert "access-control-allow-origin" not in response.headers


def test_cors_is_off_by_default():
    with make_client(FakeEngine()) as client:
        response = client.get("/v1/models", headers={"Origin": ORIGIN})
        assert "access-control-allow-origin" not in response.headers
        assert (
            client.options("/v1/models", headers={"Origin": ORIGIN, **PREFLIGHT}).status_code != 200
        )


def test_serve_takes_keys_from_flags_a_file_and_the_environment(no_serving, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# the team's keys\nfile-key-1\n\nfile-key-2\nflag-key\n")
    args = ["serve", str(tmp_path), "--api-key", "flag-key", "--api-key", "other-flag-key",
            "--api-key-file", str(keys)]  # fmt: skip
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    expected = ("flag-key", "other-flag-key", "file-key-1", "file-key-2")
    assert no_serving[0].config.api_keys == expected
    assert _id("file-key-1") in result.output and "file-key-1" not in result.output
    env = {"VOMLX_API_KEY": "env-a env-b"}
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path)], env=env)
    assert no_serving[1].config.api_keys == ("env-a", "env-b")


def test_serve_passes_origins_socket_tls_and_template_on(no_serving, tmp_path):
    from tests.support.fake_server import FakeServer

    (tmp_path / "key.pem").write_text("k")
    (tmp_path / "cert.pem").write_text("c")
    (tmp_path / "t.jinja").write_text("{{ messages[0]['content'] }}")
    args = ["serve", str(tmp_path), "--allowed-origins", "https://a.example, http://b.example:8080/",
            "--uds", str(tmp_path / "s.sock"), "--ssl-keyfile", str(tmp_path / "key.pem"),
            "--ssl-certfile", str(tmp_path / "cert.pem"),
            "--chat-template", str(tmp_path / "t.jinja")]  # fmt: skip
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 0, result.output
    config = no_serving[0].config
    assert config.allowed_origins == ("https://a.example", "http://b.example:8080")
    assert config.chat_template == str(tmp_path / "t.jinja")
    uvicorn_config = FakeServer.instances[0].config
    assert uvicorn_config.uds == str(tmp_path / "s.sock")
    assert uvicorn_config.ssl_keyfile == str(tmp_path / "key.pem")
    assert f"on unix:{tmp_path / 's.sock'} (TLS)" in result.output


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--ssl-keyfile", "{d}/key.pem"], "needs both --ssl-keyfile and --ssl-certfile"),
        (["--allowed-origins", "app.example"], "is not an origin"),
        (["--allowed-origins", "https://app.example/path"], "is not an origin"),
        (["--uds", "{d}/no/such/dir/s.sock"], "no directory"),
        (["--uds", "{d}/key.pem"], "exists and is not a socket"),
        (["--api-key", "two words"], "holds a space"),
        (["--chat-template", "{d}/binary.jinja"], "not UTF-8 text"),
    ],
)
def test_serve_refuses_what_it_cannot_listen_with(no_serving, tmp_path, extra, says):
    (tmp_path / "key.pem").write_text("k")
    (tmp_path / "binary.jinja").write_bytes(b"\xff\xfe{{")
    args = ["serve", str(tmp_path), *(a.format(d=tmp_path) for a in extra)]
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code != 0
    assert says in result.output, result.output
    assert not no_serving  # refused before anything started
