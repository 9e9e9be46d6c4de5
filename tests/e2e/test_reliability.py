"""Client disconnects, worker crashes and model swaps, against the real processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time

import httpx

from tests.support import direct
from tests.support.server import CLI, model_name, openai_client, pid_alive

LONG = {"messages": [{"role": "user", "content": "Tell me everything."}], "max_tokens": 3000}


def _stream_lines(server, body: dict, timeout: float = 120):
    return httpx.stream(
        "POST",
        f"{server.url}/v1/chat/completions",
        json={**body, "stream": True, "temperature": 0},
        headers=server.headers,
        timeout=timeout,
    )


def _wait_for(predicate, timeout: float = 30.0, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def test_client_disconnect_mid_stream_stops_generation(default_server, qwen3_path):
    before = default_server.stats()
    with _stream_lines(default_server, {"model": model_name(qwen3_path), **LONG}) as r:
        for n, _ in enumerate(r.iter_lines()):
            if n >= 10:
                break  # leaving the block closes the connection mid-stream

    stats = _wait_for(
        lambda: (
            (s := default_server.stats())["active"] == 0
            and s["requests_aborted"] > before["requests_aborted"]
            and s
        )
    )
    time.sleep(0.5)
    assert default_server.stats()["tokens_generated"] == stats["tokens_generated"]
    assert stats["tokens_generated"] - before["tokens_generated"] < 3000


def test_client_disconnect_during_non_stream_request_aborts_it(default_server, qwen3_path):
    before = default_server.stats()
    body = {"model": model_name(qwen3_path), **LONG, "temperature": 0}
    try:
        httpx.post(
            f"{default_server.url}/v1/chat/completions",
            json=body,
            headers=default_server.headers,
            timeout=1.0,
        )
    except httpx.TimeoutException:
        pass  # the client gave up and closed the connection

    _wait_for(
        lambda: (
            (s := default_server.stats())["active"] == 0
            and s["requests_aborted"] > before["requests_aborted"]
        )
    )


def test_worker_kill_ends_stream_with_error_then_recovers(start_server, qwen3_path):
    server = start_server(qwen3_path, "--heartbeat-timeout", "10", name="crash")
    pid = server.worker_pid()
    lines: list[str] = []
    with _stream_lines(server, {"model": model_name(qwen3_path), **LONG}) as r:
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue  # the blank separators, and the keep-alive comments of a stalled stream
            lines.append(line)
            if len(lines) == 5:
                os.kill(pid, signal.SIGKILL)

    events = [json.loads(line[6:]) for line in lines[:-1]]
    assert lines[-1] == "data: [DONE]"
    assert "error" in events[-1], events[-1]
    assert all("error" not in e for e in events[:-1])

    assert _wait_for(lambda: server.health().status_code == 503, timeout=10)
    health = server.wait_healthy(timeout=120)
    assert health["worker_pid"] != pid and not pid_alive(pid)
    reply = openai_client(server).chat.completions.create(
        model=model_name(qwen3_path), messages=LONG["messages"], max_tokens=3
    )
    assert reply.choices[0].finish_reason == "length"


def test_a_frozen_worker_is_reported_late_and_its_waiting_request_is_a_503_to_retry(
    start_server, qwen3_path
):
    """SIGSTOP: /health says `unresponsive` after a few missed beats (not after the whole
    timeout), and a request sent into the frozen worker is a 503 with Retry-After once the
    worker is replaced; the new worker then serves it."""
    server = start_server(qwen3_path, "--heartbeat-timeout", "6", name="frozen")
    pid = server.worker_pid()
    os.kill(pid, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        body = _wait_for(lambda: (r := server.health()).status_code == 503 and r.json())
        assert time.monotonic() - stopped < 5
        assert body["status"] == "unresponsive" and "no heartbeat" in body["reason"], body
        keyless = httpx.get(f"{server.url}/health", timeout=5).json()
        assert keyless == {"status": "unresponsive"}
        request = {"model": model_name(qwen3_path), **LONG, "max_tokens": 3}
        r = httpx.post(
            f"{server.url}/v1/chat/completions", json=request, headers=server.headers, timeout=60
        )
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "worker_died" and r.headers["retry-after"]
    finally:
        with contextlib.suppress(ProcessLookupError):  # killed as unresponsive, as it should be
            os.kill(pid, signal.SIGCONT)
    health = server.wait_healthy(timeout=120)
    assert health["worker_pid"] != pid
    r = httpx.post(
        f"{server.url}/v1/chat/completions", json=request, headers=server.headers, timeout=60
    )
    assert r.status_code == 200, r.text


def test_a_crash_loop_never_leaves_the_server_dead(start_server, qwen3_path):
    """Six kill -9s within a minute (the old policy gave up for good after five): the worker
    comes back every time, /health says `restarting` with the count and the exit reason."""
    server = start_server(qwen3_path, "--restart-backoff-max", "0.5", name="crash-loop")
    for kill in range(1, 7):
        pid = server.worker_pid()
        os.kill(pid, signal.SIGKILL)
        body = _wait_for(lambda k=kill: (b := server.health().json()).get("restarts") == k and b)
        if body["status"] != "ok":  # still coming back (it may already be, on a fast machine)
            assert body["status"] == "restarting" and "SIGKILL" in body["last_exit"], body
        health = server.wait_healthy(timeout=120)
        assert health["worker_pid"] != pid and health["restarts"] == kill
    reply = openai_client(server).chat.completions.create(
        model=model_name(qwen3_path), messages=LONG["messages"], max_tokens=3
    )
    assert reply.choices[0].finish_reason == "length"


def test_swap_under_load_never_hangs_and_serves_the_new_model(start_server, qwen3_path, llama_path):
    server = start_server(qwen3_path, "--drain-timeout", "2", name="swap")
    old_pid = server.worker_pid()
    outcomes: list[str] = []

    def client_loop():
        client = openai_client(server)
        for _ in range(3):
            try:
                stream = client.chat.completions.create(
                    model=model_name(qwen3_path),
                    messages=LONG["messages"],
                    max_tokens=400,
                    temperature=0,
                    stream=True,
                )
                finish = [c.choices[0].finish_reason for c in stream if c.choices]
                outcomes.append(finish[-1] or "none")
            except Exception as exc:  # an error is an outcome; a hang is not
                outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=client_loop) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    done = subprocess.run(
        [CLI, "models", "load", llama_path, "--url", server.url, "--admin-key", server.admin_key],
        capture_output=True,
        text=True,
        timeout=300,
    )
    for t in threads:
        t.join(timeout=300)

    assert done.returncode == 0, done.stdout + done.stderr
    assert not any(t.is_alive() for t in threads), "a request hung across the swap"
    assert len(outcomes) == 9
    assert not pid_alive(old_pid)
    models = openai_client(server).models.list()
    assert [m.id for m in models.data] == [model_name(llama_path)]
    messages = [{"role": "user", "content": "After the swap."}]
    reply = openai_client(server).chat.completions.create(
        model=model_name(llama_path), messages=messages, max_tokens=12, temperature=0
    )
    assert reply.choices[0].message.content == direct.greedy_chat(llama_path, messages, 12).text


def test_serve_from_a_folder_holding_files_named_like_our_packages(
    start_server, qwen3_path, tmp_path
):
    """The worker runs without the current directory on sys.path (protocol/launch/python.py),
    so `protocol.py`, `worker.py` and `gateway.py` where `serve` was started are never
    imported in place of ours."""
    for name in ("protocol", "worker", "gateway"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the folder\\'s {name}.py')\n")
    server = start_server(qwen3_path, name="odd-folder", cwd=tmp_path)
    assert server.health().json()["status"] == "ok"
    reply = openai_client(server).chat.completions.create(
        model=model_name(qwen3_path), messages=[{"role": "user", "content": "Hi"}], max_tokens=2
    )
    assert reply.choices[0].message.content is not None
