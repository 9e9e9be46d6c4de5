"""`GET /metrics`: Prometheus metrics of one app, in a registry of its own.

Where vLLM has a metric of the same meaning it has vLLM's name, labels and buckets (so vLLM
dashboards work); the server's own are `vomlx:`. Three sources:

- the requests, observed as their deltas pass through the engine (observer.py, an
  `EngineObserver` the engine calls: gateway/workers/observer.py);
- the engine's state and admission queue, read at scrape time (worker.py);
- the worker's own counters (prefix cache, audio), fetched with the `stats` control call at
  scrape time and kept monotonic over worker restarts (worker.py).

A scrape answers 200 whether or not a worker is ready: without one, the worker counters keep
their last values. Nothing here runs between scrapes except the observer's counting.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from gateway.metrics.names import ModelNames
from gateway.metrics.observer import MetricsObserver
from gateway.metrics.worker import POOL_STATES, STATES, EngineCollector, Source, WorkerTotals

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]

log = logging.getLogger("gateway.metrics")


class Metrics:
    """The metrics of an app serving `engine`; observes the engine if it can be observed
    (`WorkerEngineClient.observe`; a stand-in without it only gets the scrape-time ones)."""

    def __init__(self, engine: Any) -> None:
        self._engine = engine
        self.registry = CollectorRegistry()
        self.names = ModelNames(engine)
        self.observer = MetricsObserver(self.registry, self.names)
        self.worker_totals = WorkerTotals()
        # A models file (gateway/pool/): every model's engine, worker totals and names.
        self._pool = engine if hasattr(engine, "entries") else None
        self._model_totals: dict[str, WorkerTotals] = {}
        self.registry.register(EngineCollector(self._sources))
        self._refresh = asyncio.Lock()  # worker snapshots applied in the order they were taken
        observe = getattr(engine, "observe", None)
        if observe is not None:
            observe(self.observer)

    def _sources(self) -> list[Source]:
        if self._pool is None:
            queue_stats = getattr(self._engine, "queue_stats", None)
            return [
                Source(
                    self.names.main(),
                    self._engine.state,
                    STATES,
                    queue_stats() if queue_stats is not None else None,
                    self.worker_totals,
                )
            ]
        sources = []
        for entry in self._pool.entries.values():
            engine = entry.engine
            queue = engine.queue_stats() if engine is not None else {"in_flight": 0, "waiting": 0}
            totals = self._model_totals.setdefault(entry.id, WorkerTotals())
            sources.append(Source(entry.id, entry.state, POOL_STATES, queue, totals))
        return sources

    async def _refresh_pool(self) -> None:
        for entry in list(self._pool.entries.values()):
            engine = entry.engine
            if engine is None or engine.state != "ready":
                continue
            try:
                stats = await engine.worker_stats()
            except Exception as exc:  # went away meanwhile: keep the last totals
                log.debug("metrics: no worker stats of %s (%s)", entry.id, exc)
                continue
            totals = self._model_totals.setdefault(entry.id, WorkerTotals())
            totals.update(stats, ModelNames(engine))

    async def scrape(self) -> bytes:
        """The exposition text, after fetching the workers' counters (those ready)."""
        if self._pool is not None:
            async with self._refresh:
                await self._refresh_pool()
            return generate_latest(self.registry)
        async with self._refresh:
            if self._engine.state == "ready":
                try:
                    stats = await self._engine.worker_stats()
                except Exception as exc:  # went away meanwhile: keep the last totals
                    log.debug("metrics: no worker stats (%s)", exc)
                else:
                    self.worker_totals.update(stats, self.names)
        self.observer.touch(self.names.main())
        return generate_latest(self.registry)
