"""`GET /metrics`: Prometheus metrics of one app, in a registry of its own.

Where vLLM has a metric of the same meaning it has vLLM's name, labels and buckets (so vLLM
dashboards work); the server's own are `vomlx:`. Three sources:

- the requests, observed as their deltas pass through the engine (observer.py, an
  `EngineObserver` the engine calls: gateway/engine/observer.py);
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
from gateway.metrics.worker import EngineCollector, WorkerTotals

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
        self.registry.register(EngineCollector(engine, self.names, self.worker_totals))
        self._refresh = asyncio.Lock()  # worker snapshots applied in the order they were taken
        observe = getattr(engine, "observe", None)
        if observe is not None:
            observe(self.observer)

    async def scrape(self) -> bytes:
        """The exposition text, after fetching the worker's counters (if one is ready)."""
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
