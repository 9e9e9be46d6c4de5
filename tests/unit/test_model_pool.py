"""The model pool with fake workers: loading on demand, eviction order, pins, leases, the
memory budget, idle unloading, failed loads."""

from __future__ import annotations

import asyncio

import pytest

from gateway.pool.models_file import ModelsFile, ModelSpec
from gateway.pool.pool import ModelPool
from gateway.workers.errors import EngineUnavailable
from tests.support.engine_harness import FakeWorkers, async_test, collect, fast_config

MIB = 2**20


def _pool(tmp_path, workers, *specs: ModelSpec, queue_timeout=3.0, **limits) -> ModelPool:
    models = ModelsFile(specs, limits.pop("max_loaded_models", len(specs)), **limits)
    paths = {spec.id: f"/models/{spec.id}" for spec in specs}
    config = fast_config(queue_timeout=queue_timeout, prefix_cache_bytes=0)
    return ModelPool(models, config, paths, worker_command=workers.command)


def _spec(name: str, **fields) -> ModelSpec:
    return ModelSpec(id=name, path=f"/models/{name}", kind="chat", **fields)


async def _use(pool: ModelPool, name: str) -> None:
    entry = pool.find(name)
    engine = await pool.acquire(entry)
    try:
        deltas = await collect(engine, max_tokens=2)
        assert deltas[-1].finish_reason == "length"
    finally:
        pool.release(entry)


def _loaded(pool: ModelPool) -> list[str]:
    return sorted(e.id for e in pool.entries.values() if e.engine is not None)


@async_test
async def test_a_model_loads_on_its_first_request_and_answers(tmp_path):
    pool = _pool(tmp_path, FakeWorkers(tmp_path), _spec("a"), _spec("b", aliases=("bee",)))
    await pool.start()
    try:
        assert [e.state for e in pool.entries.values()] == ["unloaded", "unloaded"]
        await _use(pool, "bee")
        assert _loaded(pool) == ["b"] and pool.find("b").state == "ready"
        assert pool.health()[0] == 200
    finally:
        await pool.stop()


@async_test
async def test_the_least_recently_used_idle_model_makes_room(tmp_path):
    pool = _pool(tmp_path, FakeWorkers(tmp_path), _spec("a"), _spec("b"), _spec("c"),
                 max_loaded_models=2)  # fmt: skip
    await pool.start()
    try:
        await _use(pool, "a")
        await _use(pool, "b")
        await _use(pool, "c")
        assert _loaded(pool) == ["b", "c"]  # a was the least recently used
        await _use(pool, "b")
        await _use(pool, "a")
        assert _loaded(pool) == ["a", "b"]  # then c was
    finally:
        await pool.stop()


@async_test
async def test_a_pinned_model_is_never_evicted(tmp_path):
    pool = _pool(tmp_path, FakeWorkers(tmp_path), _spec("a", pinned=True), _spec("b"),
                 _spec("c"), max_loaded_models=2)  # fmt: skip
    await pool.start()
    try:
        await _use(pool, "a")
        await _use(pool, "b")
        await _use(pool, "c")
        assert _loaded(pool) == ["a", "c"]
        pool.pin(pool.find("a"), False)
        await _use(pool, "b")
        assert _loaded(pool) == ["b", "c"]
    finally:
        await pool.stop()


@async_test
async def test_a_model_serving_a_request_is_not_evicted_the_new_one_waits(tmp_path):
    pool = _pool(tmp_path, FakeWorkers(tmp_path), _spec("a"), _spec("b"), max_loaded_models=1)
    await pool.start()
    try:
        a = pool.find("a")
        await pool.acquire(a)  # a request on a, still running
        waiting = asyncio.ensure_future(_use(pool, "b"))
        await asyncio.sleep(0.5)
        assert not waiting.done() and _loaded(pool) == ["a"]
        pool.release(a)
        await waiting
        assert _loaded(pool) == ["b"]
    finally:
        await pool.stop()


@async_test
async def test_without_room_within_the_queue_timeout_a_request_gets_unavailable(tmp_path):
    pool = _pool(tmp_path, FakeWorkers(tmp_path), _spec("a"), _spec("b"), max_loaded_models=1,
                 queue_timeout=0.5)  # fmt: skip
    await pool.start()
    try:
        a = pool.find("a")
        await pool.acquire(a)
        with pytest.raises(EngineUnavailable) as caught:
            await pool.acquire(pool.find("b"))
        assert caught.value.retry_after == 1.0 and "no room to load model 'b'" in str(caught.value)
        assert pool.find("b").leases == 0
        pool.release(a)
    finally:
        await pool.stop()


@async_test
async def test_the_memory_budget_limits_what_is_loaded_together(tmp_path):
    specs = [_spec(n, options={"prefix_cache_bytes": 600 * MIB}) for n in ("a", "b")]
    pool = _pool(tmp_path, FakeWorkers(tmp_path), *specs, memory_budget_gb=1.0)
    assert [e.estimate for e in pool.entries.values()] == [600 * MIB, 600 * MIB]
    await pool.start()
    try:
        await _use(pool, "a")
        await _use(pool, "b")
        assert _loaded(pool) == ["b"]  # both would be 1.17 GiB
    finally:
        await pool.stop()


def test_a_model_over_the_budget_alone_is_refused_at_start(tmp_path):
    spec = _spec("big", options={"prefix_cache_bytes": 2 << 30})
    with pytest.raises(ValueError, match="'big' alone is estimated at 2.00 GiB"):
        _pool(tmp_path, FakeWorkers(tmp_path), spec, memory_budget_gb=1.0)


@async_test
async def test_an_idle_model_is_unloaded_after_idle_unload_seconds(tmp_path):
    pool = _pool(tmp_path, FakeWorkers(tmp_path), _spec("a"), _spec("p", pinned=True),
                 idle_unload_seconds=0.4)  # fmt: skip
    await pool.start()
    try:
        await _use(pool, "a")
        await _use(pool, "p")
        for _ in range(100):
            if pool.find("a").state == "unloaded":
                break
            await asyncio.sleep(0.05)
        assert pool.find("a").state == "unloaded" and pool.find("p").state == "ready"
    finally:
        await pool.stop()


@async_test
async def test_preload_and_pinned_models_load_at_start(tmp_path):
    pool = _pool(tmp_path, FakeWorkers(tmp_path), _spec("a", preload=True), _spec("b"))
    await pool.start()
    try:
        for _ in range(100):
            if pool.find("a").state == "ready":
                break
            await asyncio.sleep(0.05)
        assert _loaded(pool) == ["a"]
    finally:
        await pool.stop()


@async_test
async def test_a_model_that_fails_to_load_is_reported_and_others_serve(tmp_path):
    workers = FakeWorkers(tmp_path)
    workers.behaviour["/models/bad"] = ["--fail-load", "no weights here"]
    pool = _pool(tmp_path, workers, _spec("bad"), _spec("good"))
    await pool.start()
    try:
        with pytest.raises(EngineUnavailable, match="'bad' failed to load"):
            await pool.acquire(pool.find("bad"))
        assert pool.find("bad").state == "failed"
        await _use(pool, "good")
        status, body = pool.health()
        assert status == 200 and body["models"]["bad"]["state"] == "failed"
        assert "reason" in body["models"]["bad"]
    finally:
        await pool.stop()


def test_a_remote_model_takes_no_room_here_and_its_worker_config_names_its_host(tmp_path):
    from gateway.pool.pool import Entry

    remote = ModelSpec(id="far", path="", kind="chat", remote="tcp://gpu:7070")
    pool = _pool(tmp_path, FakeWorkers(tmp_path), _spec("a"), remote, max_loaded_models=1,
                 memory_budget_gb=0.001)  # fmt: skip
    far, local = pool.entries["far"], pool.entries["a"]
    assert far.estimate == 0 and far.config.remote == "tcp://gpu:7070"
    assert far.config.model == "tcp://gpu:7070" and local.config.remote is None
    far.engine = object()  # type: ignore[assignment]  # loaded: it still takes no room
    assert pool._fits(local) and pool._fits(far)
    local.engine = object()  # type: ignore[assignment]
    another = Entry(_spec("b"), local.config, 0)
    assert pool._fits(far) and not pool._fits(another)  # max_loaded_models counts `a` only


@async_test
async def test_nothing_is_evicted_when_evicting_all_that_may_go_would_not_make_room(tmp_path):
    specs = [
        _spec("small", options={"prefix_cache_bytes": 200 * MIB}),
        _spec("busy", options={"prefix_cache_bytes": 700 * MIB}),
        _spec("big", options={"prefix_cache_bytes": 900 * MIB}),
    ]
    pool = _pool(tmp_path, FakeWorkers(tmp_path), *specs, memory_budget_gb=1.0, queue_timeout=0.5)
    await pool.start()
    try:
        await _use(pool, "small")
        busy = pool.find("busy")
        await pool.acquire(busy)
        with pytest.raises(EngineUnavailable, match="no room"):
            await pool.acquire(pool.find("big"))
        assert _loaded(pool) == ["busy", "small"]  # small stayed: unloading it was no use
        pool.release(busy)
    finally:
        await pool.stop()


@async_test
async def test_an_explicit_load_retries_a_failed_model_at_once(tmp_path):
    workers = FakeWorkers(tmp_path)
    workers.behaviour["/models/a"] = ["--fail-load", "boom"]
    pool = _pool(tmp_path, workers, _spec("a"))
    await pool.start()
    try:
        with pytest.raises(EngineUnavailable, match="boom"):
            await pool.acquire(pool.find("a"))
        workers.behaviour.clear()
        with pytest.raises(EngineUnavailable, match="failed to load"):
            await pool.acquire(pool.find("a"))  # a request waits out the retry delay
        await pool.load(pool.find("a"))  # models load does not
        assert pool.find("a").state == "ready"
    finally:
        await pool.stop()


@async_test
async def test_a_model_waits_for_room_as_long_as_its_own_queue_timeout(tmp_path):
    specs = [_spec("a"), _spec("b", options={"queue_timeout": 0.3})]
    pool = _pool(tmp_path, FakeWorkers(tmp_path), *specs, max_loaded_models=1, queue_timeout=5.0)
    await pool.start()
    try:
        a = pool.find("a")
        await pool.acquire(a)
        started = asyncio.get_running_loop().time()
        with pytest.raises(EngineUnavailable, match="no room"):
            await pool.acquire(pool.find("b"))
        assert asyncio.get_running_loop().time() - started < 2.0
        pool.release(a)
    finally:
        await pool.stop()
