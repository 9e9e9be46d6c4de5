"""Requests through the engine to the fake worker: streaming, abort, admission, errors."""

from __future__ import annotations

import asyncio

import pytest

from gateway.http.request_id import REQUEST_ID
from gateway.workers.client import WorkerEngineClient
from gateway.workers.errors import EngineUnavailable, QueueFull
from protocol.inputs import CompleteInputs
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


async def _stats(engine, tmp_path) -> dict:
    """The worker's counters, with what the fake worker saw (FakeWorkers.observed)."""
    stats = await engine.worker_stats()
    return {**stats, **FakeWorkers(tmp_path).observed()}


async def _stats_when(engine, tmp_path, predicate, timeout: float = 5.0) -> dict:
    """Poll the worker's stats until `predicate` holds (the Abort travels asynchronously)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        stats = await _stats(engine, tmp_path)
        if predicate(stats) or loop.time() > deadline:
            return stats
        await asyncio.sleep(0.05)


@async_test
async def test_request_streams_accepted_text_then_one_terminal_delta(tmp_path):
    async with running_engine(fast_config(), FakeWorkers(tmp_path)) as engine:
        await wait_ready(engine)
        deltas = await collect(engine, max_tokens=4)
    assert "".join(d.text for d in deltas) == " t1 t2 t3 t4"
    assert [d.finish_reason for d in deltas if d.finish_reason] == ["length"]
    assert deltas[-1].finish_reason == "length" and deltas[-1].usage.completion_tokens == 4
    assert engine.queue_stats()["in_flight"] == 0


@async_test
async def test_leaving_the_context_early_aborts_the_request_at_the_worker(tmp_path):
    async with running_engine(fast_config(), FakeWorkers(tmp_path)) as engine:
        await wait_ready(engine)
        async with engine.request(CompleteInputs("x", sampling(1000)), True) as ds:
            rid = ds.request_id
            async for batch in ds:
                if any(d.text for d in batch):
                    break
        assert engine.queue_stats()["in_flight"] == 0  # slot freed at once
        stats = await _stats_when(engine, tmp_path, lambda s: s["aborted"])
    assert stats["aborted"] == [rid] and stats["active"] == 0


@async_test
async def test_cancelled_request_task_aborts_and_frees_its_slot(tmp_path):
    async with running_engine(fast_config(), FakeWorkers(tmp_path)) as engine:
        await wait_ready(engine)
        task = asyncio.create_task(collect(engine, max_tokens=1000))
        await wait_until(lambda: engine.queue_stats()["in_flight"] == 1)
        await asyncio.sleep(0.1)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert engine.queue_stats()["in_flight"] == 0
        stats = await _stats_when(engine, tmp_path, lambda s: s["aborted"])
    assert len(stats["aborted"]) == 1 and stats["active"] == 0


@async_test
async def test_at_most_max_num_seqs_run_and_past_the_queue_bound_queue_full(tmp_path):
    config = fast_config(max_num_seqs=2, max_queue=1)
    async with running_engine(config, FakeWorkers(tmp_path, "--token-interval", "0.05")) as engine:
        await wait_ready(engine)
        running = [asyncio.create_task(collect(engine, max_tokens=10)) for _ in range(3)]
        await wait_until(lambda: engine.queue_stats()["waiting"] == 1)
        assert engine.queue_stats()["in_flight"] == 2
        with pytest.raises(QueueFull) as info:
            await collect(engine)
        assert info.value.retry_after is not None
        results = await asyncio.gather(*running)
        stats = await _stats(engine, tmp_path)
    assert [r[-1].finish_reason for r in results] == ["length"] * 3
    assert len(stats["submitted"]) == 3 and stats["peak_active"] == 2


@async_test
async def test_request_scoped_error_reaches_the_reader_as_the_terminal_delta(tmp_path):
    async with running_engine(fast_config(), FakeWorkers(tmp_path)) as engine:
        await wait_ready(engine)
        deltas = await collect(engine, prompt="please FAIL")
        assert engine.state == "ready"
    assert deltas[-1].finish_reason == "error" and deltas[-1].error.code == "bad_request"


@async_test
async def test_slow_reader_gets_merged_text_not_one_delta_per_token(tmp_path):
    async with running_engine(
        fast_config(), FakeWorkers(tmp_path, "--token-interval", "0")
    ) as engine:
        await wait_ready(engine)
        async with engine.request(CompleteInputs("x", sampling(50)), True) as ds:
            await asyncio.sleep(0.5)  # everything arrives while nobody reads
            batches = [batch async for batch in ds]
    assert len(batches) == 1 and len(batches[0]) == 2
    assert batches[0][0].text == "".join(f" t{n}" for n in range(1, 51))


@async_test
async def test_worker_stats_without_a_ready_worker_is_unavailable(tmp_path):
    workers = FakeWorkers(tmp_path, "--ready-delay", "5")
    async with running_engine(fast_config(), workers) as engine:
        with pytest.raises(EngineUnavailable) as info:
            await engine.worker_stats()
    assert "starting" in info.value.reason


def test_the_worker_client_and_the_http_tests_fake_are_both_engine_clients():
    from gateway.workers.protocol import EngineClient
    from tests.support.fake_engine import FakeEngine

    assert isinstance(WorkerEngineClient(fast_config()), EngineClient)
    assert isinstance(FakeEngine(), EngineClient)


@async_test
async def test_worker_requests_carry_the_http_request_id_and_keep_their_own(tmp_path):
    async with running_engine(fast_config(), FakeWorkers(tmp_path)) as engine:
        await wait_ready(engine)
        token = REQUEST_ID.set("trace-1")
        try:
            first = engine.request(CompleteInputs("x", sampling(2)), True)
            second = engine.request(CompleteInputs("x", sampling(2)), True)
            async with first as a, second as b:
                async for _ in a:
                    pass
                async for _ in b:
                    pass
        finally:
            REQUEST_ID.reset(token)
        stats = await _stats(engine, tmp_path)
    assert stats["http_request_ids"] == ["trace-1", "trace-1"]
    assert len(set(stats["submitted"])) == 2 and "trace-1" not in stats["submitted"]
