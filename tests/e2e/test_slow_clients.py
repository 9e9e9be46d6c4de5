"""Slow clients ("slowloris"): a request that trickles its headers or its body is cut off at
the read deadlines (gateway/http/read_deadlines.py), while ordinary requests and streams go on."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.support.server import model_name

DEADLINE = 2.0


@pytest.fixture(scope="module")
def server(start_server, qwen3_path):
    return start_server(
        qwen3_path, "--header-timeout", str(DEADLINE), "--body-timeout", str(DEADLINE),
        name="slow-clients",
    )  # fmt: skip


def _closed_after(server, first: bytes, trickle: bytes, every: float = 0.5) -> float:
    """Seconds until the server closes a connection that sends `first`, then `trickle` bytes
    every `every` seconds."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(first)
        try:
            while time.monotonic() - started < 30:
                time.sleep(every)
                sock.sendall(trickle)
                sock.settimeout(0.01)
                try:
                    if sock.recv(65536) == b"":
                        break
                except TimeoutError:
                    pass
        except (BrokenPipeError, ConnectionResetError):
            pass
    return time.monotonic() - started


def test_trickled_headers_are_cut_off_at_the_header_deadline(server):
    elapsed = _closed_after(server, b"GET /v1/models HTTP/1.1\r\nHost: x\r\n", b"X-a: b\r\n")
    assert DEADLINE <= elapsed < DEADLINE + 3


def test_a_connection_that_sends_nothing_is_closed_too(server):
    assert _closed_after(server, b"", b"", every=0.5) < DEADLINE + 3


def test_a_trickled_body_is_cut_off_at_the_body_deadline(server):
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + server.api_key.encode() + b"\r\nContent-Length: 1000\r\n\r\n{"
    )
    elapsed = _closed_after(server, head, b" ")
    assert DEADLINE <= elapsed < DEADLINE + 3


def test_eight_slow_clients_leave_the_server_serving(server, qwen3_path):
    import threading

    threads = [
        threading.Thread(
            target=_closed_after, args=(server, b"GET / HTTP/1.1\r\nHost: x\r\n", b"X: y\r\n")
        )
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    body = {"model": model_name(qwen3_path), "max_tokens": 600, "stream": True,
            "messages": [{"role": "user", "content": "Tell me a long story."}]}  # fmt: skip
    started = time.monotonic()
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body,
                      headers=server.headers, timeout=60) as r:  # fmt: skip
        assert r.status_code == 200
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    for thread in threads:
        thread.join()
    assert time.monotonic() - started < 30
