"""The benchmark client and runner against a small fake OpenAI server on a real socket.

Functional checks only (what is sent, what is counted); no timing is asserted.
"""

from __future__ import annotations

import asyncio
import csv
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway.cli.bench.report import rows
from gateway.cli.bench.runner import BenchConfig, run_bench
from gateway.cli.main import main

OVERHEAD = 5  # the fake's "template" tokens; each word is one token


@dataclass
class FakeState:
    bodies: list[dict] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    send_usage: bool = True
    fail_status: int | None = None  # for requests of more than one token
    error_event: bool = False


def _prompt_words(body: dict) -> int:
    if "messages" in body:
        return sum(len(m["content"].split()) for m in body["messages"])
    return len(body["prompt"].split())


def _stream(state: FakeState, body: dict):
    chat = "messages" in body
    head = {"id": "x", "object": "chat.completion.chunk" if chat else "text_completion"}

    def chunk(text: str | None, finish: str | None = None) -> bytes:
        if chat:
            choice = {"index": 0, "delta": {} if text is None else {"content": text}}
        else:
            choice = {"index": 0, "text": text or ""}
        choice["finish_reason"] = finish
        return f"data: {json.dumps({**head, 'choices': [choice]})}\n\n".encode()

    async def events():
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            if chat:
                yield b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
            left = body["max_tokens"]
            while left > 0:
                await asyncio.sleep(0.002)
                if state.error_event and body["max_tokens"] > 1:
                    yield b'data: {"error": {"message": "worker died"}}\n\ndata: [DONE]\n\n'
                    return
                merged = min(2, left)  # two tokens per chunk, like a lagging server
                yield chunk("w " * merged)
                left -= merged
            yield chunk(None, "length")
            if state.send_usage:
                usage = {"prompt_tokens": OVERHEAD + _prompt_words(body)}
                usage["completion_tokens"] = body["max_tokens"]
                yield f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n".encode()
            yield b"data: [DONE]\n\n"
        finally:
            state.in_flight -= 1

    return events()


def make_app(holder: dict[str, FakeState]) -> Starlette:
    """The fake server; each test swaps in a fresh FakeState through `holder`."""

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "fake-model"}, {"id": "other"}]})

    async def generate(request: Request) -> Response:
        state, body = holder["state"], await request.json()
        state.bodies.append(body)
        if state.fail_status and body["max_tokens"] > 1:
            return JSONResponse({"error": {"message": "busy"}}, status_code=state.fail_status)
        return StreamingResponse(_stream(state, body), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/v1/models", models),
            Route("/v1/chat/completions", generate, methods=["POST"]),
            Route("/v1/completions", generate, methods=["POST"]),
        ]
    )


@pytest.fixture(scope="module")
def fake_server():
    holder: dict[str, FakeState] = {"state": FakeState()}
    config = uvicorn.Config(make_app(holder), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield holder, f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def fake(fake_server):
    holder, url = fake_server
    holder["state"] = FakeState()
    return holder["state"], url


def bench(url: str, **overrides: Any):
    options = {"url": url, "prompt_tokens": 100, "max_tokens": 6, "warmup": 0, "seed": 3}
    return asyncio.run(run_bench(BenchConfig(**{**options, **overrides})))


def measured_bodies(state: FakeState) -> list[dict]:
    return [b for b in state.bodies if b["max_tokens"] > 1]


def test_every_level_sends_its_requests_and_counts_tokens_from_usage(fake):
    state, url = fake
    report = bench(url, concurrency=(1, 2), requests=3)
    assert [(r.concurrency, r.requests, r.errors, r.output_tokens) for r in rows(report)] == [
        (1, 3, 0, 18),
        (2, 3, 0, 18),
    ]
    result = report.levels[0].records[0].result
    assert (result.completion_tokens, len(result.token_times)) == (6, 3)  # merged chunks
    assert result.tokens_from_usage


def test_requests_are_greedy_streams_with_usage_and_the_listed_model(fake):
    state, url = fake
    bench(url, requests=1)
    body = measured_bodies(state)[0]
    assert body["temperature"] == 0 and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert (body["model"], body["max_tokens"]) == ("fake-model", 6)


def test_prompts_are_calibrated_to_the_requested_token_count(fake):
    state, url = fake
    report = bench(url, prompt_tokens=300, requests=2)
    assert [r.result.prompt_tokens for r in report.levels[0].records] == [300, 300]


def test_concurrency_bounds_the_requests_in_flight(fake):
    state, url = fake
    bench(url, concurrency=(3,), requests=9, max_tokens=20)
    assert len(measured_bodies(state)) == 9
    assert state.max_in_flight == 3


def test_later_turns_carry_the_history_and_the_reply(fake):
    state, url = fake
    report = bench(url, requests=1, turns=2, history_tokens=50, prompt_tokens=10)
    first, second = measured_bodies(state)
    assert len(first["messages"]) == 1
    assert second["messages"][0] == first["messages"][0]
    assert second["messages"][1] == {"role": "assistant", "content": "w " * 6}
    assert len(second["messages"][2]["content"].split()) == 10
    assert [r.turn for r in rows(report)] == ["all", "1", "2"]


def test_completions_endpoint_sends_a_text_prompt(fake):
    state, url = fake
    report = bench(url, endpoint="completions", requests=1)
    assert isinstance(measured_bodies(state)[0]["prompt"], str)
    assert report.levels[0].records[0].result.completion_tokens == 6


def test_an_http_error_is_recorded_not_raised(fake):
    state, url = fake
    state.fail_status = 503
    report = bench(url, requests=2)
    assert rows(report)[0].errors == 2
    assert "HTTP 503" in report.levels[0].records[0].result.error


def test_an_error_event_in_the_stream_is_recorded(fake):
    state, url = fake
    state.error_event = True
    report = bench(url, requests=1)
    assert report.levels[0].records[0].result.error == "worker died"


def test_without_usage_tokens_are_counted_per_chunk_and_a_warning_is_given(fake):
    state, url = fake
    state.send_usage = False
    report = bench(url, requests=1)
    result = report.levels[0].records[0].result
    assert (result.completion_tokens, result.tokens_from_usage) == (3, False)
    assert report.warnings


def test_bench_command_prints_a_table_and_writes_json_and_csv(fake, tmp_path):
    state, url = fake
    out_json, out_csv = tmp_path / "b.json", tmp_path / "b.csv"
    args = ["bench", "--url", url, "--prompt-tokens", "40", "--max-tokens", "4"]
    args += ["--concurrency", "1,2", "--requests", "2", "--warmup", "1"]
    args += ["--json", str(out_json), "--csv", str(out_csv), "--no-progress"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "agg tok/s" in result.output
    data = json.loads(out_json.read_text())
    assert [row["concurrency"] for row in data["rows"]] == [1, 2]
    assert len(data["requests"]) == 4
    with open(out_csv) as handle:
        lines = list(csv.DictReader(handle))
    assert [line["output_tokens"] for line in lines] == ["8", "8"]


def test_bench_command_rejects_a_malformed_concurrency_list():
    result = CliRunner().invoke(main, ["bench", "--concurrency", "1,x"])
    assert result.exit_code == 2
    assert "comma-separated" in result.output


def test_bench_command_reports_an_unreachable_server():
    result = CliRunner().invoke(main, ["bench", "--url", "http://127.0.0.1:9", "--no-progress"])
    assert result.exit_code == 1
    assert "failed" in result.output


def test_the_bench_client_imports_no_mlx_or_transformers():
    forbidden = ("mlx", "mlx_lm", "mlx_vlm", "mlx_audio", "transformers")
    code = (
        "import sys, gateway.cli.bench.command, gateway.cli.bench.report, gateway.cli.bench.runner\n"
        f"print([m for m in sys.modules if m.split('.')[0] in {forbidden!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
