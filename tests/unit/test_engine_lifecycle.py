"""Engine start-up and shutdown against the fake worker: READY handshake, load failures, stop."""

from __future__ import annotations

import asyncio
import os

import pytest

from gateway.workers.client import WorkerEngineClient
from gateway.workers.errors import EngineUnavailable
from protocol.inputs import CompleteInputs
from protocol.messages import PROTOCOL_VERSION
from tests.support.engine_harness import (
    FakeWorkers,
    async_test,
    collect,
    fast_config,
    running_engine,
    sampling,
    wait_ready,
    wait_until,
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@async_test
async def test_health_is_503_starting_until_ready_then_200(tmp_path):
    workers = FakeWorkers(tmp_path, "--ready-delay", "0.3")
    async with running_engine(fast_config(), workers) as engine:
        status, body = engine.health()
        assert (status, body["status"], body["model"]) == (503, "starting", "alpha")
        await wait_ready(engine)
        pid = workers.events("start")[0]["pid"]
        assert engine.health() == (200, {"status": "ok", "model": "alpha", "worker_pid": pid})
        assert engine.ready_info is not None and engine.ready_info.capabilities


@async_test
async def test_ready_with_another_protocol_version_is_refused_naming_both(tmp_path):
    workers = FakeWorkers(tmp_path, "--protocol-version", str(PROTOCOL_VERSION + 41))
    async with running_engine(fast_config(), workers) as engine:
        await wait_until(lambda: engine.state == "failed")
        status, body = engine.health()
        assert status == 503
        assert str(PROTOCOL_VERSION + 41) in body["reason"]
        assert str(PROTOCOL_VERSION) in body["reason"]
        assert not _alive(workers.events("start")[0]["pid"])


@async_test
async def test_ready_of_another_layout_is_still_refused_by_its_version(tmp_path):
    version = str(PROTOCOL_VERSION + 1)
    workers = FakeWorkers(tmp_path, "--protocol-version", version, "--ready-extra-field")
    async with running_engine(fast_config(), workers) as engine:
        await wait_until(lambda: engine.state == "failed")
        assert f"protocol version {version}" in engine.reason


@async_test
async def test_fatal_at_load_fails_fast_with_the_workers_message(tmp_path):
    workers = FakeWorkers(tmp_path, "--fail-load", "no such checkpoint: /models/alpha")
    async with running_engine(fast_config(), workers) as engine:
        await wait_until(lambda: engine.state == "failed", timeout=5)
        assert "no such checkpoint: /models/alpha" in engine.reason
        assert len(workers.events("start")) == 1  # a model that cannot load is not retried


@async_test
async def test_exit_at_load_reports_the_exit_code_and_logs_the_output(tmp_path, caplog):
    workers = FakeWorkers(tmp_path, "--exit-at-load", "3")
    async with running_engine(fast_config(), workers) as engine:
        await wait_until(lambda: engine.state == "failed", timeout=5)
        assert "exited with code 3" in engine.reason
        assert "cannot load the model" not in engine.reason  # the worker's output: log only
        assert "its last output:\nfake worker: cannot load the model" in caplog.text


@async_test
async def test_a_fatal_detail_is_logged_and_never_shown(tmp_path, caplog):
    workers = FakeWorkers(tmp_path, "--fail-load", "the model failed to load (OSError)")
    async with running_engine(fast_config(), workers) as engine:
        await wait_until(lambda: engine.state == "failed", timeout=5)
        status, body = engine.health()
        assert body["reason"] == "the model failed to load (OSError)"
        assert "fake load failure" not in str(body) and "fake load failure" in caplog.text


@async_test
async def test_requests_fail_at_once_when_the_engine_failed(tmp_path):
    workers = FakeWorkers(tmp_path, "--fail-load", "broken")
    async with running_engine(fast_config(), workers) as engine:
        await wait_until(lambda: engine.state == "failed", timeout=5)
        with pytest.raises(EngineUnavailable) as info:
            await collect(engine)
        assert "broken" in info.value.reason


@async_test
async def test_requests_queued_during_a_failing_load_get_unavailable(tmp_path):
    workers = FakeWorkers(tmp_path, "--ready-delay", "0.3", "--fail-load", "broken")
    async with running_engine(fast_config(), workers) as engine:
        with pytest.raises(EngineUnavailable) as info:
            await collect(engine)
        assert "broken" in info.value.reason


@async_test
async def test_request_sent_while_starting_waits_for_ready(tmp_path):
    workers = FakeWorkers(tmp_path, "--ready-delay", "0.3")
    async with running_engine(fast_config(), workers) as engine:
        assert engine.state == "starting"
        deltas = await collect(engine, max_tokens=2)
        assert deltas[-1].finish_reason == "length"


@async_test
async def test_no_ready_within_ready_timeout_kills_the_worker_and_fails(tmp_path):
    workers = FakeWorkers(tmp_path, "--ready-delay", "30")
    # Long enough for the fake worker to start (and log it) on a loaded 2-core machine.
    async with running_engine(fast_config(ready_timeout=3.0), workers) as engine:
        await wait_until(lambda: engine.state == "failed", timeout=15)
        assert "no READY within 3 s" in engine.reason
        assert not _alive(workers.events("start")[0]["pid"])


@async_test
async def test_local_model_directory_runs_the_worker_offline(tmp_path):
    model = tmp_path / "alpha"
    model.mkdir()
    workers = FakeWorkers(tmp_path)
    async with running_engine(fast_config(model=str(model)), workers) as engine:
        await wait_ready(engine)
    assert workers.events("start")[0]["hf_hub_offline"] == "1"


@async_test
async def test_stop_ends_open_requests_and_the_worker_exits(tmp_path):
    workers = FakeWorkers(tmp_path, "--token-interval", "0.05")
    engine = WorkerEngineClient(fast_config(), worker_command=workers.command)
    await engine.start()
    await wait_ready(engine)
    pid = engine.ready_info.pid
    got: list = []

    async def consume() -> None:
        async with engine.request(CompleteInputs("x", sampling(1000)), True) as ds:
            async for batch in ds:
                got.extend(batch)

    task = asyncio.create_task(consume())
    await wait_until(lambda: any(d.text for d in got))
    await engine.stop()
    await asyncio.wait_for(task, 2)
    assert got[-1].finish_reason == "error"
    assert engine.health()[1]["status"] == "stopped"
    assert [e["pid"] for e in workers.events("exit")] == [pid]  # it shut down cleanly
    assert not _alive(pid)
