"""Workers on other hosts (`vllm-omni-mlx worker --listen`, `remote:` in a models file),
against the real processes on loopback: a worker host over CURVE answering as direct mlx-lm,
a wrong key refused with a reason, plain TCP only with --insecure on both sides, a kill -9 of
the remote worker, and a network drop (the host stopped past the heartbeat timeout)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support import direct
from tests.support.server import ADMIN_KEY, API_KEY, CLI, SAME_BLAS, ServerProcess, openai_client

MESSAGES = [{"role": "user", "content": "Name three prime numbers."}]
LONG = {"messages": [{"role": "user", "content": "Tell me everything."}], "max_tokens": 3000}
HEARTBEAT_TIMEOUT = 3.0


def _free_port_pair() -> int:
    """A port P with P and P + 1 free (the worker host binds both)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port >= 65534:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no two consecutive free ports")


class HostProcess:
    """`vllm-omni-mlx worker --listen tcp://127.0.0.1:PORT MODEL ...` and its log."""

    def __init__(
        self, model: str, security: list[str], log_path: Path, port: int | None = None
    ) -> None:
        self.port = port or _free_port_pair()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = open(log_path, "wb")
        cmd = [CLI, "worker", "--listen", self.address, *security, *SAME_BLAS,
               "--restart-backoff-max", "1", "--prefix-cache-bytes", "0", model]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _models_file(tmp_path: Path, address: str) -> str:
    path = tmp_path / "remote.yaml"
    path.write_text(
        f"models:\n  - id: far\n    remote: {address}\n    kind: chat\n    aliases: [faraway]\n"
        f"    preload: true\n    options: {{heartbeat_timeout: {HEARTBEAT_TIMEOUT}}}\n"
    )
    return str(path)


def _gateway(tmp_path: Path, address: str, *flags: str, wait: bool = True) -> ServerProcess:
    server = ServerProcess(
        ["--models", _models_file(tmp_path, address), "--restart-backoff-max", "1", *flags],
        tmp_path / "gateway.log",
        api_key=API_KEY,
        admin_key=ADMIN_KEY,
    )
    if wait:
        try:
            server.wait_healthy(120)
        except BaseException:
            server.stop()
            raise
    return server


def _card(server: ServerProcess) -> dict:
    """The model's card ({} while the gateway is not listening yet)."""
    try:
        r = httpx.get(f"{server.url}/v1/models/far", headers=server.headers, timeout=10)
    except httpx.TransportError:
        return {}
    r.raise_for_status()
    return r.json()


def _wait(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def _stream(server: ServerProcess, body: dict, out: list) -> None:
    with httpx.stream(
        "POST", f"{server.url}/v1/chat/completions", headers=server.headers, timeout=120,
        json={"model": "far", "stream": True, "temperature": 0, **body},
    ) as r:  # fmt: skip
        for line in r.iter_lines():
            if line.startswith("data: "):
                out.append((time.monotonic(), line[6:]))


def _text_of(events) -> str:
    chunks = [json.loads(e) for _, e in events if e != "[DONE]" and '"choices"' in e]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("keys")
    run = subprocess.run([CLI, "keys", str(root)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return root


@pytest.fixture(scope="module")
def remote(tmp_path_factory, keys, qwen3_path):
    """A worker host over CURVE and a gateway whose models file names it."""
    logs = tmp_path_factory.mktemp("remote")
    host = HostProcess(qwen3_path, ["--keys", str(keys / "host")], logs / "host.log")
    try:
        server = _gateway(logs, host.address, "--keys", str(keys / "gateway"))
    except BaseException:
        host.stop()
        raise
    yield host, server
    server.stop()
    host.stop()


def test_a_remote_worker_over_curve_answers_as_direct_mlx_lm(remote, qwen3_path):
    host, server = remote
    expected = direct.greedy_chat(qwen3_path, MESSAGES, 24)
    reply = openai_client(server).chat.completions.create(
        model="faraway", messages=MESSAGES, max_tokens=24, temperature=0
    )
    assert reply.model == "far"
    direct.assert_chat_equals(reply, expected, 24)
    events: list = []
    _stream(server, {"messages": MESSAGES, "max_tokens": 24}, events)
    assert events[-1][1] == "[DONE]" and _text_of(events) == expected.text
    card = _card(server)
    assert card["state"] == "ready" and card["remote"] == host.address
    assert "CURVE" in host.log() and "resident_bytes" not in card


def test_unloading_a_remote_model_shuts_its_worker_down_and_a_request_starts_another(remote):
    host, server = remote
    pid = _card(server)["worker_pid"]
    r = httpx.post(f"{server.url}/v1/admin/models/unload", json={"model": "far"},
                   headers=server.admin_headers, timeout=60)  # fmt: skip
    assert r.status_code == 200 and r.json()["state"] == "unloaded"
    _wait(lambda: f"worker pid {pid} exited with code 0" in host.log(), 20)
    reply = openai_client(server).chat.completions.create(
        model="far", messages=MESSAGES, max_tokens=3
    )
    assert reply.usage.completion_tokens == 3
    card = _card(server)
    assert card["state"] == "ready" and card["worker_pid"] != pid


def test_a_kill_9_of_the_remote_worker_ends_its_streams_and_the_host_restarts_it(remote):
    host, server = remote
    pid = _card(server)["worker_pid"]
    events: list = []
    thread = threading.Thread(target=_stream, args=(server, LONG, events))
    thread.start()
    _wait(lambda: len(events) > 3, 30)  # generating
    killed_at = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    thread.join(60)
    assert not thread.is_alive()
    assert events[-1][1] == "[DONE]" and '"error"' in events[-2][1]
    assert events[-1][0] - killed_at < 5.0
    card = _wait(lambda: (c := _card(server))["state"] == "ready" and c["worker_pid"] != pid and c)
    assert "killed by signal 9" in host.log() or "SIGKILL" in host.log()
    reply = openai_client(server).chat.completions.create(
        model="far", messages=MESSAGES, max_tokens=3
    )
    assert reply.usage.completion_tokens == 3 and card["worker_pid"] != pid


def test_a_network_drop_fails_open_requests_and_the_model_serves_again(remote):
    host, server = remote
    pid = _card(server)["worker_pid"]
    events: list = []
    thread = threading.Thread(target=_stream, args=(server, LONG, events))
    thread.start()
    _wait(lambda: len(events) > 3, 30)
    os.kill(host.proc.pid, signal.SIGSTOP)  # the host (and its end of the link) freezes
    stopped_at = time.monotonic()
    try:
        thread.join(HEARTBEAT_TIMEOUT + 10)
        assert not thread.is_alive(), "a request hung through the drop"
        assert events[-1][1] == "[DONE]" and '"error"' in events[-2][1]
        assert "the network or the host is down" in events[-2][1]
        assert events[-1][0] - stopped_at < HEARTBEAT_TIMEOUT + 5
        health = server.health().json()
        assert health["models"]["far"]["state"] in ("restarting", "loading")
        time.sleep(3.0)  # past ZeroMQ's heartbeat timeout too: the connection is dropped
    finally:
        os.kill(host.proc.pid, signal.SIGCONT)
    card = _wait(lambda: (c := _card(server))["state"] == "ready" and c, 60)
    # The worker the gateway gave up on (its request already failed) was replaced.
    assert card["worker_pid"] != pid
    reply = openai_client(server).chat.completions.create(
        model="far", messages=MESSAGES, max_tokens=3
    )
    assert reply.usage.completion_tokens == 3


def test_a_restarted_host_is_reconnected_to(tmp_path, keys, qwen3_path):
    host = HostProcess(qwen3_path, ["--keys", str(keys / "host")], tmp_path / "host.log")
    server = None
    try:
        server = _gateway(tmp_path, host.address, "--keys", str(keys / "gateway"))
        pid = _card(server)["worker_pid"]
        host.proc.kill()  # the host and (its parent watchdog) its worker die at once
        host.proc.wait()
        _wait(lambda: _card(server)["state"] != "ready", HEARTBEAT_TIMEOUT + 10)
        host.stop()
        again = HostProcess(qwen3_path, ["--keys", str(keys / "host")], tmp_path / "again.log",
                            port=host.port)  # fmt: skip
        host = again
        card = _wait(lambda: (c := _card(server))["state"] == "ready" and c, 60)
        assert card["worker_pid"] != pid
        reply = openai_client(server).chat.completions.create(
            model="far", messages=MESSAGES, max_tokens=3
        )
        assert reply.usage.completion_tokens == 3
    finally:
        if server is not None:
            server.stop()
        host.stop()


def test_a_gateway_with_the_wrong_key_is_refused_with_a_reason(remote, tmp_path, keys):
    host, _ = remote
    other = tmp_path / "other"
    run = subprocess.run([CLI, "keys", str(other)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    # The right host key but a client key the host does not list.
    (other / "gateway" / "server.key").write_bytes((keys / "gateway" / "server.key").read_bytes())
    server = _gateway(tmp_path, host.address, "--keys", str(other / "gateway"), wait=False)
    try:
        card = _wait(lambda: (c := _card(server)).get("state") == "failed" and c, 30)
        assert "refused" in card["reason"] and "key" in card["reason"]
        assert server.health().status_code == 503
    finally:
        server.stop()


def test_plain_tcp_needs_insecure_on_both_sides(tmp_path, qwen3_path):
    port = _free_port_pair()
    run = subprocess.run([CLI, "worker", "--listen", f"tcp://127.0.0.1:{port}", qwen3_path],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode != 0 and "--insecure" in run.stderr
    models = _models_file(tmp_path, f"tcp://127.0.0.1:{port}")
    run = subprocess.run([CLI, "serve", "--models", models, "--port", "0"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert run.returncode != 0 and "is remote: give --keys DIR" in run.stderr
    host = HostProcess(qwen3_path, ["--insecure"], tmp_path / "host.log")
    try:
        server = _gateway(tmp_path, host.address, "--insecure")
        try:
            reply = openai_client(server).chat.completions.create(
                model="far", messages=MESSAGES, max_tokens=3
            )
            assert reply.usage.completion_tokens == 3
        finally:
            server.stop()
        # A CURVE gateway cannot talk to a plain host either: refused, with a reason.
        keys = tmp_path / "k"
        subprocess.run([CLI, "keys", str(keys)], check=True, capture_output=True, timeout=60)
        secure = ServerProcess(
            ["--models", _models_file(tmp_path, host.address), "--keys", str(keys / "gateway")],
            tmp_path / "secure.log",
            api_key=API_KEY,
        )
        try:
            card = _wait(lambda: (c := _card(secure)).get("state") == "failed" and c, 30)
            assert "handshake failed" in card["reason"]
        finally:
            secure.stop()
    finally:
        host.stop()
