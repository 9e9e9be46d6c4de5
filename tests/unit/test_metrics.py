"""GET /metrics: the request observer, the worker totals over restarts, the route and its key,
and the real engine client (fake worker) reporting to them."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from gateway.metrics import Metrics
from gateway.metrics.observer import MetricsObserver
from gateway.metrics.worker import WorkerTotals
from gateway.workers.errors import EngineUnavailable, QueueFull
from protocol.inputs import CompleteInputs
from protocol.messages import Delta, Usage
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
from tests.support.fake_engine import FakeEngine, make_client


class Names:
    """ModelNames' interface with fixed answers."""

    def __init__(self, main: str = "m") -> None:
        self.main_name = main

    def main(self) -> str:
        return self.main_name

    def for_op(self, op: str) -> str:
        return {"speech": "tts"}.get(op, self.main_name)

    def for_kind(self, kind: str) -> str:
        return {"speech": "tts"}.get(kind, self.main_name)


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    got = registry.get_sample_value(name, labels)
    return 0.0 if got is None else got


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, from an exposition text."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def observer(registry) -> MetricsObserver:
    return MetricsObserver(registry, Names())


# -- the observer ----------------------------------------------------------------------------


def test_a_streamed_chat_is_counted_from_its_deltas(registry, observer):
    observer.admitted("r", "chat", arrived=10.0)
    observer.delta(Delta("r", usage=Usage(7, 0, cached_tokens=3)), 10.5)  # accepted
    observer.delta(Delta("r", text="a", token_ids=[1]), 11.0)
    observer.delta(Delta("r", text="b", token_ids=[2]), 11.25)
    observer.delta(Delta("r", text="cd", token_ids=[3, 4]), 11.75)
    observer.ended("r", Delta("r", finish_reason="stop", usage=Usage(7, 4, 3)), 12.0)

    m = {"model_name": "m"}
    assert value(registry, "vllm:prompt_tokens_total", **m) == 7
    assert value(registry, "vllm:generation_tokens_total", **m) == 4
    assert value(registry, "vllm:request_success_total", finished_reason="stop", **m) == 1
    assert (
        value(registry, "vomlx:requests_total", operation="chat", finished_reason="stop", **m) == 1
    )
    assert value(registry, "vllm:request_queue_time_seconds_sum", **m) == 0.5
    assert value(registry, "vllm:time_to_first_token_seconds_count", **m) == 1
    assert value(registry, "vllm:time_to_first_token_seconds_sum", **m) == 1.0
    # one interval per token-bearing delta after the first, as vLLM's one per engine step
    assert value(registry, "vllm:inter_token_latency_seconds_count", **m) == 2
    assert value(registry, "vllm:inter_token_latency_seconds_sum", **m) == 0.75
    assert value(registry, "vllm:e2e_request_latency_seconds_sum", **m) == 2.0
    assert value(registry, "vllm:e2e_request_latency_seconds_count", **m) == 1


def test_the_terminal_usage_tops_up_what_the_deltas_did_not_show(registry, observer):
    observer.admitted("r", "complete", 0.0)
    observer.delta(Delta("r"), 0.1)  # accepted, without usage
    observer.delta(Delta("r", token_ids=[1]), 0.2)
    observer.ended("r", Delta("r", token_ids=[2], finish_reason="length", usage=Usage(5, 3)), 0.3)
    assert value(registry, "vllm:prompt_tokens_total", model_name="m") == 5
    assert value(registry, "vllm:generation_tokens_total", model_name="m") == 3
    assert value(registry, "vllm:inter_token_latency_seconds_count", model_name="m") == 1


def test_a_reader_leaving_first_is_an_abort_with_what_was_seen(registry, observer):
    observer.admitted("r", "chat", 0.0)
    observer.delta(Delta("r", usage=Usage(4, 0)), 0.1)
    observer.delta(Delta("r", token_ids=[1]), 0.2)
    observer.ended("r", None, 0.4)
    observer.ended("r", Delta("r", finish_reason="abort", usage=Usage(4, 2)), 0.5)  # stale
    m = {"model_name": "m"}
    assert value(registry, "vllm:request_success_total", finished_reason="abort", **m) == 1
    assert value(registry, "vllm:generation_tokens_total", **m) == 1
    assert value(registry, "vllm:e2e_request_latency_seconds_count", **m) == 1


def test_a_gateway_made_error_says_nothing_about_the_queue(registry, observer):
    observer.admitted("r", "chat", 0.0)
    error = Delta("r", finish_reason="error")  # worker_died: no usage, no worker delta before
    observer.ended("r", error, 3.0)
    m = {"model_name": "m"}
    assert value(registry, "vllm:request_queue_time_seconds_count", **m) == 0
    assert value(registry, "vllm:request_success_total", finished_reason="error", **m) == 1


def test_speech_and_embeddings_count_no_generation_tokens(registry, observer):
    observer.admitted("s", "speech", 0.0)
    observer.delta(Delta("s"), 0.1)
    observer.delta(Delta("s", audio=b"\0\0" * 10, sample_rate=10), 0.2)
    observer.ended("s", Delta("s", finish_reason="stop", usage=Usage(12, 9)), 0.3)
    observer.admitted("e", "embed", 0.0)
    observer.ended(
        "e", Delta("e", finish_reason="stop", usage=Usage(6, 0), embeddings=[b"", b""]), 1
    )
    assert value(registry, "vllm:prompt_tokens_total", model_name="tts") == 0  # characters
    assert value(registry, "vllm:prompt_tokens_total", model_name="m") == 6
    assert value(registry, "vllm:generation_tokens_total", model_name="tts") == 0
    assert value(registry, "vllm:time_to_first_token_seconds_count", model_name="tts") == 0
    assert (
        value(registry, "vllm:request_success_total", model_name="tts", finished_reason="stop") == 1
    )
    assert value(registry, "vomlx:embedding_inputs_total", model_name="m") == 2


def test_engine_events_are_counted(registry, observer):
    observer.rejected("queue_full")
    observer.worker_loaded("m", 2.5)
    observer.worker_crashed("m")
    observer.swap_finished("n", 4.0, ok=True)
    observer.swap_finished("x", 1.0, ok=False)
    assert (
        value(registry, "vomlx:request_rejections_total", model_name="m", reason="queue_full") == 1
    )
    assert value(registry, "vomlx:model_load_seconds_sum", model_name="m") == 2.5
    assert value(registry, "vomlx:worker_restarts_total", model_name="m") == 1
    assert value(registry, "vomlx:model_swap_seconds_count", model_name="n", result="ok") == 1
    assert value(registry, "vomlx:model_swap_seconds_count", model_name="x", result="failed") == 1


# -- worker totals -----------------------------------------------------------------------------


def test_worker_totals_carry_over_restarts_and_stay_monotonic():
    totals, names = WorkerTotals(), Names()
    totals.update({"pid": 1, "prefix_cache_queries": 10, "prefix_cache_hits": 4}, names)
    totals.update({"pid": 1, "prefix_cache_queries": 30, "prefix_cache_hits": 9}, names)
    assert totals.totals("prefix_cache_queries") == {"m": 30}
    totals.update({"pid": 2, "prefix_cache_queries": 5, "prefix_cache_hits": 0}, names)
    assert totals.totals("prefix_cache_queries") == {"m": 35}
    assert totals.totals("prefix_cache_hits") == {"m": 9}
    # the same pid again, but counting from zero: another worker all the same
    totals.update({"pid": 2, "prefix_cache_queries": 1}, names)
    assert totals.totals("prefix_cache_queries") == {"m": 36}
    totals.update({"pid": 3, "speech_seconds": 1.5}, names)
    assert totals.totals("speech_seconds") == {"tts": 1.5}
    assert totals.totals("prefix_cache_queries") == {"m": 36}


def test_speculation_counters_carry_vllms_names_and_a_series_per_position():
    from gateway.metrics.worker import EngineCollector, Source

    totals, names = WorkerTotals(), Names()
    spec = {
        "spec_decode_num_drafts": 4,
        "spec_decode_num_draft_tokens": 12,
        "spec_decode_num_accepted_tokens": 7,
        "spec_decode_num_accepted_tokens_per_pos": [4, 2, 1],
    }
    totals.update({"pid": 1, **spec}, names)
    restarted = {"spec_decode_num_accepted_tokens_per_pos": [1], "spec_decode_num_drafts": 1}
    totals.update({"pid": 2, **restarted}, names)
    registry = CollectorRegistry()
    source = Source("m", "ready", ("ready",), None, totals)
    registry.register(EngineCollector(lambda: [source]))
    assert value(registry, "vllm:spec_decode_num_drafts_total", model_name="m") == 5
    assert value(registry, "vllm:spec_decode_num_draft_tokens_total", model_name="m") == 12
    assert value(registry, "vllm:spec_decode_num_accepted_tokens_total", model_name="m") == 7
    per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    assert [value(registry, per_pos, model_name="m", position=str(p)) for p in range(4)] == [
        5,
        2,
        1,
        0,
    ]


# -- the route ---------------------------------------------------------------------------------


def test_metrics_need_the_api_key_and_parse():
    engine = FakeEngine()
    with make_client(engine, api_key="sekrit") as client:
        assert client.get("/metrics").status_code == 401
        response = client.get("/metrics", headers={"Authorization": "Bearer sekrit"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    got = samples(response.text)
    assert got[("vomlx:worker_state", (("model_name", "tiny"), ("state", "ready")))] == 1
    assert got[("vomlx:worker_state", (("model_name", "tiny"), ("state", "failed")))] == 0
    assert got[("vllm:prompt_tokens_total", (("model_name", "tiny"),))] == 0


def test_metrics_answer_while_no_worker_is_ready():
    engine = FakeEngine()
    engine.state, engine.reason = "restarting", "a crash"
    with make_client(engine) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    got = samples(response.text)
    assert got[("vomlx:worker_state", (("model_name", "tiny"), ("state", "restarting")))] == 1


def test_two_apps_keep_separate_registries():
    first, second = Metrics(FakeEngine()), Metrics(FakeEngine())
    first.observer.admitted("r", "chat", 0.0)
    first.observer.ended("r", Delta("r", finish_reason="stop", usage=Usage(3, 0)), 1.0)
    assert value(first.registry, "vllm:prompt_tokens_total", model_name="tiny") == 3
    assert value(second.registry, "vllm:prompt_tokens_total", model_name="tiny") == 0


# -- the engine client reporting to it (fake worker) ------------------------------------------


@async_test
async def test_the_engine_client_reports_requests_restarts_and_rejections(tmp_path):
    config = fast_config(max_num_seqs=1, max_queue=0)
    async with running_engine(config, FakeWorkers(tmp_path)) as engine:
        metrics = Metrics(engine)
        r = metrics.registry
        await wait_ready(engine)
        deltas = await collect(engine, max_tokens=3)
        usage = deltas[-1].usage
        m = {"model_name": "alpha"}
        assert value(r, "vllm:prompt_tokens_total", **m) == usage.prompt_tokens
        assert value(r, "vllm:generation_tokens_total", **m) == usage.completion_tokens == 3
        assert value(r, "vllm:request_success_total", finished_reason="length", **m) == 1
        assert value(r, "vllm:time_to_first_token_seconds_count", **m) == 1
        assert value(r, "vllm:inter_token_latency_seconds_count", **m) == 2
        assert value(r, "vllm:request_queue_time_seconds_count", **m) == 1

        # one slot, no queue: a second request while the first runs is refused
        async with engine.request(CompleteInputs("x", sampling(1000)), True) as ds:
            async for batch in ds:
                if any(d.token_ids for d in batch):
                    break
            with pytest.raises(QueueFull):
                async with engine.request(CompleteInputs("y", sampling(1)), True):
                    pass
        assert value(r, "vomlx:request_rejections_total", reason="queue_full", **m) == 1
        assert value(r, "vllm:request_success_total", finished_reason="abort", **m) == 1

        got = samples((await metrics.scrape()).decode())
        # the fake worker reports its submitted requests as prefix-cache queries
        assert got[("vllm:prefix_cache_queries_total", (("model_name", "alpha"),))] == 2

        # a crash: the new worker counts from zero, the export does not go back
        async with engine.request(CompleteInputs("CRASH", sampling(10)), True) as ds:
            async for _ in ds:
                pass
        await wait_until(lambda: value(r, "vomlx:worker_restarts_total", **m) == 1)
        await wait_ready(engine)
        await collect(engine, max_tokens=1)
        got = samples((await metrics.scrape()).decode())
        # 2 from the first worker (its CRASH request came after the last scrape: lost) + 1
        assert got[("vllm:prefix_cache_queries_total", (("model_name", "alpha"),))] == 3
        assert got[("vomlx:model_load_seconds_count", (("model_name", "alpha"),))] == 2
        assert value(r, "vllm:request_success_total", finished_reason="error", **m) == 1
        assert got[("vllm:num_requests_running", (("model_name", "alpha"),))] == 0


@async_test
async def test_a_swap_is_timed(tmp_path):
    async with running_engine(fast_config(), FakeWorkers(tmp_path)) as engine:
        metrics = Metrics(engine)
        await wait_ready(engine)
        await engine.swap("/models/beta", "beta")
        await asyncio.sleep(0)
    r = metrics.registry
    assert value(r, "vomlx:model_swap_seconds_count", model_name="beta", result="ok") == 1
    assert value(r, "vomlx:model_load_seconds_count", model_name="beta") == 1


@async_test
async def test_requests_to_a_failed_engine_are_counted_as_unavailable(tmp_path):
    workers = FakeWorkers(tmp_path, "--fail-load", "broken")
    async with running_engine(fast_config(), workers) as engine:
        metrics = Metrics(engine)
        await wait_until(lambda: engine.state == "failed")
        with pytest.raises(EngineUnavailable):
            async with engine.request(CompleteInputs("x", sampling(1)), True):
                pass
        got = samples((await metrics.scrape()).decode())  # 200 without a worker
    r = metrics.registry
    assert value(r, "vomlx:request_rejections_total", model_name="alpha", reason="unavailable") == 1
    assert value(r, "vomlx:model_load_seconds_count", model_name="alpha") == 0
    assert got[("vomlx:worker_state", (("model_name", "alpha"), ("state", "failed")))] == 1
