"""Model swap against fake workers: drain or abort, one model resident at a time, failure
restores the previous model, swaps are serialized."""

from __future__ import annotations

import asyncio

import pytest

from gateway.workers.errors import SwapFailed
from tests.support.engine_harness import (
    FakeWorkers,
    async_test,
    collect,
    fast_config,
    running_engine,
    wait_ready,
    wait_until,
)


@async_test
async def test_swap_under_load_ends_every_request_and_serves_the_new_model(tmp_path):
    workers = FakeWorkers(tmp_path, "--token-interval", "0.02")
    config = fast_config(max_num_seqs=2, max_queue=4, drain_timeout=0.3)
    async with running_engine(config, workers) as engine:
        await wait_ready(engine)
        old_pid = engine.ready_info.pid
        short = asyncio.create_task(collect(engine, max_tokens=5))  # finishes while draining
        long = asyncio.create_task(collect(engine, max_tokens=1000))  # outlives the drain
        await wait_until(lambda: engine.queue_stats()["in_flight"] == 2)
        swap = asyncio.create_task(engine.swap("/models/beta"))
        await wait_until(lambda: engine.state == "swapping")
        queued = asyncio.create_task(collect(engine, max_tokens=2))  # waits for the new model
        result = await swap
        outcomes = await asyncio.wait_for(asyncio.gather(short, long, queued), 5)
        assert engine.model_name == "beta" and engine.model_path == "/models/beta"
        assert engine.health()[0] == 200
    assert result["model"] == "beta" and result["previous_model"] == "alpha"
    assert outcomes[0][-1].finish_reason == "length"
    assert outcomes[1][-1].error.code == "model_swap"
    assert outcomes[2][-1].finish_reason == "length"
    old_exit = next(e for e in workers.events("exit") if e["pid"] == old_pid)
    new_start = next(e for e in workers.events("start") if e["model"] == "/models/beta")
    assert old_exit["time"] < new_start["time"]  # never two models resident


@async_test
async def test_health_during_a_swap_names_the_old_model_and_the_one_loading(tmp_path):
    workers = FakeWorkers(tmp_path)
    workers.behaviour["/models/beta"] = ["--ready-delay", "0.5"]
    async with running_engine(fast_config(), workers) as engine:
        await wait_ready(engine)
        swap = asyncio.create_task(engine.swap("/models/beta", "beta-chat"))
        await wait_until(lambda: engine.state == "swapping")
        status, body = engine.health()
        assert status == 503
        assert (body["status"], body["model"], body["loading"]) == (
            "swapping",
            "alpha",
            "beta-chat",
        )
        await swap
        assert engine.health()[1]["model"] == "beta-chat"


@async_test
async def test_swap_to_a_model_that_fails_raises_and_the_old_model_serves_again(tmp_path):
    workers = FakeWorkers(tmp_path)
    workers.behaviour["/models/broken"] = ["--fail-load", "unsupported architecture"]
    async with running_engine(fast_config(), workers) as engine:
        await wait_ready(engine)
        with pytest.raises(SwapFailed) as info:
            await engine.swap("/models/broken")
        assert info.value.restored
        assert "unsupported architecture" in info.value.message
        assert engine.state == "ready" and engine.model_name == "alpha"
        assert (await collect(engine, max_tokens=2))[-1].finish_reason == "length"
        stats = await engine.worker_stats()
    assert stats["model"] == "/models/alpha"


@async_test
async def test_swap_from_a_failed_engine_brings_it_back(tmp_path):
    workers = FakeWorkers(tmp_path)
    workers.behaviour["/models/alpha"] = ["--fail-load", "broken"]
    async with running_engine(fast_config(), workers) as engine:
        await wait_until(lambda: engine.state == "failed")
        await engine.swap("/models/beta")
        assert engine.health()[0] == 200 and engine.model_name == "beta"


@async_test
async def test_concurrent_swaps_run_one_after_the_other(tmp_path):
    workers = FakeWorkers(tmp_path)
    async with running_engine(fast_config(), workers) as engine:
        await wait_ready(engine)
        first, second = await asyncio.gather(
            engine.swap("/models/beta"), engine.swap("/models/gamma")
        )
        assert engine.model_name == "gamma"
    assert first["previous_model"] == "alpha" and second["previous_model"] == "beta"
    lives = sorted(workers.events("start") + workers.events("exit"), key=lambda e: e["time"])
    assert [e["event"] for e in lives] == ["start", "exit"] * 3  # one process at a time


@async_test
async def test_swap_continues_when_its_caller_is_cancelled(tmp_path):
    workers = FakeWorkers(tmp_path)
    workers.behaviour["/models/beta"] = ["--ready-delay", "0.3"]
    async with running_engine(fast_config(), workers) as engine:
        await wait_ready(engine)
        caller = asyncio.create_task(engine.swap("/models/beta"))
        await wait_until(lambda: engine.state == "swapping")
        caller.cancel()
        await wait_until(lambda: engine.state == "ready", timeout=5)
        assert engine.model_name == "beta"
