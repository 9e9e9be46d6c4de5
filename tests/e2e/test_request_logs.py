"""Request ids in both processes' logs, JSON log lines, and polls left out of the access log."""

from __future__ import annotations

import json
import time

import httpx

from tests.support.server import model_name


def _entries(server) -> list[dict]:
    return [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]


def _wait_for_entry(server, predicate, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [e for e in _entries(server) if predicate(e)]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no such log entry in:\n{server.log()[-3000:]}")


def test_json_logs_carry_the_clients_request_id_in_the_gateway_and_the_worker(
    start_server, qwen3_path
):
    server = start_server(qwen3_path, "--log-format", "json", name="json-logs")
    try:
        for _ in range(3):
            assert server.health().status_code == 200
        body = {
            "model": model_name(qwen3_path),
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 4,
            "n": 2,
        }
        headers = {**server.headers, "x-request-id": "trace-e2e-7"}
        r = httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=60)
        assert r.status_code == 200 and r.headers["x-request-id"] == "trace-e2e-7"

        access = _wait_for_entry(
            server,
            lambda e: e["logger"] == "gateway.access" and "/v1/chat/completions" in e["message"],
        )
        assert access["request_id"] == "trace-e2e-7" and '" 200 ' in access["message"]
        assert access["process"] == "gateway" and access["level"] == "info"
        # Both choices' worker requests name the HTTP request.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            worker = [
                e
                for e in _entries(server)
                if e["logger"] == "worker.requests" and e.get("request_id") == "trace-e2e-7"
            ]
            if len(worker) == 2:
                break
            time.sleep(0.1)
        assert len(worker) == 2, server.log()[-3000:]
        assert {e["process"] for e in worker} == {"worker"}
        assert {e["pid"] for e in worker} == {server.worker_pid()}
        assert all("chat request finished (length) prompt=" in e["message"] for e in worker)
        # Every line of both processes is one JSON object; /health polls are not access-logged.
        lines = [line for line in server.log().splitlines() if line.strip()]
        not_json = [line for line in lines if not line.startswith("{")]
        assert all(line.startswith("Serving ") for line in not_json)
        assert not any(
            "/health" in e["message"] for e in _entries(server) if e["logger"] == "gateway.access"
        )
    finally:
        server.stop()
