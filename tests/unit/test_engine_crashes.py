"""Worker crashes and hangs: open requests end with worker_died, the worker restarts, or the
engine gives up with a reason."""

from __future__ import annotations

import asyncio

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
async def test_crash_mid_request_ends_it_with_worker_died_then_the_engine_recovers(tmp_path):
    workers = FakeWorkers(tmp_path)
    async with running_engine(fast_config(), workers) as engine:
        await wait_ready(engine)
        first_pid = engine.ready_info.pid
        deltas = await collect(engine, prompt="CRASH please", max_tokens=100)
        assert deltas[-1].finish_reason == "error"
        assert deltas[-1].error.code == "worker_died"
        assert "exited with code 7" in deltas[-1].error.message
        assert any(d.text for d in deltas)  # what it produced before dying was delivered
        status, body = engine.health()
        assert status == 503 and body["status"] == "restarting"
        await wait_ready(engine)
        assert engine.health()[1]["worker_pid"] != first_pid
        after = await collect(engine, max_tokens=3)
    assert after[-1].finish_reason == "length"


@async_test
async def test_every_open_request_gets_worker_died_when_the_worker_crashes(tmp_path):
    workers = FakeWorkers(tmp_path, "--token-interval", "0.05")
    async with running_engine(fast_config(max_num_seqs=4), workers) as engine:
        await wait_ready(engine)
        bystanders = [asyncio.create_task(collect(engine, max_tokens=1000)) for _ in range(2)]
        await wait_until(lambda: engine.queue_stats()["in_flight"] == 2)
        crasher = await collect(engine, prompt="CRASH", max_tokens=1000)
        results = await asyncio.wait_for(asyncio.gather(*bystanders), 3)
    for deltas in [crasher, *results]:
        assert deltas[-1].error.code == "worker_died"
    assert engine.queue_stats()["in_flight"] == 0


@async_test
async def test_request_sent_during_the_restart_waits_and_is_served(tmp_path):
    workers = FakeWorkers(tmp_path)
    async with running_engine(fast_config(), workers) as engine:
        await wait_ready(engine)
        await collect(engine, prompt="CRASH")
        assert engine.state == "restarting"
        deltas = await collect(engine, max_tokens=2)
    assert deltas[-1].finish_reason == "length"


@async_test
async def test_silent_worker_is_killed_after_the_heartbeat_timeout_and_restarted(tmp_path):
    workers = FakeWorkers(tmp_path)
    config = fast_config(heartbeat_timeout=0.6)
    async with running_engine(config, workers) as engine:
        await wait_ready(engine)
        hung_pid = engine.ready_info.pid
        deltas = await collect(engine, prompt="HANG")
        assert deltas[-1].error.code == "worker_died"
        assert "sent nothing for" in deltas[-1].error.message
        await wait_ready(engine)
        assert engine.ready_info.pid != hung_pid
        assert (await collect(engine, max_tokens=2))[-1].finish_reason == "length"
    assert [e["pid"] for e in workers.events("hang")] == [hung_pid]


@async_test
async def test_repeated_crashes_give_up_with_a_reason_in_health(tmp_path):
    workers = FakeWorkers(tmp_path)
    async with running_engine(fast_config(max_restarts=2), workers) as engine:
        await wait_ready(engine)
        await collect(engine, prompt="CRASH")
        await wait_ready(engine)
        await collect(engine, prompt="CRASH")
        await wait_until(lambda: engine.state == "failed", timeout=3)
        status, body = engine.health()
    assert status == 503 and body["status"] == "failed"
    assert "gave up after 2 crashes" in body["reason"] and "exited with code 7" in body["reason"]
    assert len(workers.events("start")) == 2


@async_test
async def test_a_worker_that_was_ready_is_restarted_after_every_crash_by_default(tmp_path):
    workers = FakeWorkers(tmp_path)
    config = fast_config(max_restarts=None, restart_backoff_max=0.2)
    async with running_engine(config, workers) as engine:
        await wait_ready(engine)
        for crash in range(1, 7):  # more than the old fixed limit of 5
            await collect(engine, prompt="CRASH")
            status, body = engine.health()
            if status == 503:
                assert body["status"] == "restarting" and body["restarts"] == crash
                assert "exited with code 7" in body["last_exit"]
            await wait_ready(engine)
        status, body = engine.health()
        assert status == 200 and body["restarts"] == 6
        assert (await collect(engine, max_tokens=2))[-1].finish_reason == "length"
    assert len(workers.events("start")) == 7


def test_the_backoff_doubles_per_crash_up_to_its_cap():
    from gateway.workers.supervisor import Supervisor

    sup = Supervisor.__new__(Supervisor)
    sup.config = fast_config(restart_backoff_max=3.0)
    assert [sup.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


@async_test
async def test_a_fatal_error_ends_requests_and_shows_restarting_before_the_worker_exits(
    tmp_path, caplog
):
    workers = FakeWorkers(tmp_path, "--token-interval", "0.05")
    async with running_engine(fast_config(max_num_seqs=4), workers) as engine:
        await wait_ready(engine)
        bystander = asyncio.create_task(collect(engine, max_tokens=1000))
        await wait_until(lambda: engine.queue_stats()["in_flight"] == 1)
        fatal = await asyncio.wait_for(collect(engine, prompt="FATAL"), 1.0)
        status, body = engine.health()
        assert workers.events("exit") == []  # the worker is still winding down
        assert (status, body["status"]) == (503, "restarting")
        for deltas in (fatal, await asyncio.wait_for(bystander, 1.0)):
            error = deltas[-1].error
            assert error.code == "worker_died"
            assert error.message == "the worker failed: the worker loop failed (KeyError)"
        assert "Traceback" not in body["reason"] and "/srv/secret" not in body["reason"]
        assert "/srv/secret/worker.py" in caplog.text
        await wait_ready(engine)
        assert (await collect(engine, max_tokens=2))[-1].finish_reason == "length"
