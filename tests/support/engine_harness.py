"""Helpers for the engine tests: a fast config, the fake worker's command line, a running engine."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from gateway.config import ServerConfig
from gateway.workers.client import WorkerEngineClient
from protocol import Endpoints
from protocol.inputs import CompleteInputs, SamplingParams
from protocol.messages import Delta

FAKE_WORKER = str(Path(__file__).with_name("fake_worker.py"))
TEST_TIMEOUT = 25.0


def fast_config(**overrides: Any) -> ServerConfig:
    base = ServerConfig(
        model="/models/alpha",
        served_model_name="alpha",
        max_num_seqs=2,
        max_queue=2,
        queue_timeout=8.0,
        drain_timeout=0.5,
        ready_timeout=8.0,
        heartbeat_interval=0.1,
        heartbeat_timeout=1.0,
        max_restarts=3,
        restart_window=60.0,
        log_level="warning",
    )
    return dataclasses.replace(base, **overrides)


class FakeWorkers:
    """Builds fake-worker command lines; `behaviour[path]` adds argv for one model path."""

    def __init__(self, tmp_path: Path, *extra: str) -> None:
        self.events_file = tmp_path / "events.jsonl"
        self.observations_file = tmp_path / "observations.json"
        self.extra = list(extra)
        self.behaviour: dict[str, list[str]] = {}

    def command(self, config: ServerConfig, path: str, endpoints: Endpoints) -> list[str]:
        import os

        return [
            sys.executable, FAKE_WORKER,
            "--model", path,
            "--to-worker", endpoints.to_worker,
            "--from-worker", endpoints.from_worker,
            "--parent-pid", str(os.getpid()),
            "--max-num-seqs", str(config.max_num_seqs),
            "--heartbeat-interval", str(config.heartbeat_interval),
            "--log-level", config.log_level,
            "--events", str(self.events_file),
            "--observations", str(self.observations_file),
            *self.extra,
            *self.behaviour.get(path, []),
        ]  # fmt: skip

    def observed(self) -> dict[str, Any]:
        """What the fake worker saw (aborted, submitted, http_request_ids, peak_active), as it
        wrote it at its last stats call."""
        return json.loads(self.observations_file.read_text())

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.events_file.exists():
            return []
        rows = [json.loads(line) for line in self.events_file.read_text().splitlines()]
        return [r for r in rows if kind is None or r["event"] == kind]


def async_test(fn: Callable[..., Any]) -> Callable[..., None]:
    """Run an async test function in a fresh event loop, with an overall timeout."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(fn(*args, **kwargs), TEST_TIMEOUT))

    return wrapper


@contextlib.asynccontextmanager
async def running_engine(
    config: ServerConfig, workers: FakeWorkers
) -> AsyncIterator[WorkerEngineClient]:
    engine = WorkerEngineClient(config, worker_command=workers.command)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


async def wait_until(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def wait_ready(engine: WorkerEngineClient, timeout: float = 10.0) -> None:
    await wait_until(lambda: engine.state == "ready", timeout)


def sampling(max_tokens: int = 5) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens)


async def collect(
    engine: WorkerEngineClient, prompt: str = "hi", max_tokens: int = 5
) -> list[Delta]:
    """Run one request to its end; every delta it yielded, flattened."""
    out: list[Delta] = []
    async with engine.request(CompleteInputs(prompt, sampling(max_tokens)), True) as ds:
        async for batch in ds:
            out.extend(batch)
    return out
