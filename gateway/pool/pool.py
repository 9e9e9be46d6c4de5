"""The model pool: one supervised worker (a `WorkerEngineClient`) per configured model, loaded
when a request needs it, unloaded when room is needed or it has been idle too long.

Invariants:
- a model with a lease (a request between its arrival and the end of its response, streams
  included) is never unloaded; a lease is taken before the model is loaded, so nothing can
  evict it between its load and its request;
- at most `max_loaded_models` workers are alive, and their estimated sizes (weights on disk
  plus the cache budgets, `Entry.estimate`) stay within `memory_budget_gb`: to load a model
  the least recently used idle, unpinned model is unloaded first, as often as needed; when
  nothing can make room within the queue timeout the request gets a 503 with Retry-After;
- loads and unloads are serialized by one lock, so two requests never load one model twice
  nor evict the same one; waiting for room or for a model's READY happens outside it;
- each worker is supervised on its own (gateway/workers/supervisor.py): a crash of one fails
  only that model's open requests and restarts only it.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.config import ServerConfig
from gateway.pool.memory import estimate_bytes, gib, resident_bytes
from gateway.pool.models_file import ModelsFile, ModelSpec
from gateway.workers.client import WorkerEngineClient
from gateway.workers.errors import EngineUnavailable
from gateway.workers.observer import EngineObserver
from gateway.workers.served_models import (
    CHAT,
    EMBEDDING,
    IMAGE,
    RERANK,
    SPEECH,
    TRANSCRIPTION,
    VIDEO,
    ServedModel,
    served_models,
)
from gateway.workers.worker_process import WorkerCommand

log = logging.getLogger("gateway.pool")

KIND_OF_SPEC = {
    "chat": (CHAT,),
    "speech": (SPEECH,),
    "transcription": (TRANSCRIPTION,),
    "embed": (EMBEDDING, RERANK),  # an embedding model also scores by cosine
    "rerank": (RERANK,),
    "image": (IMAGE,),
    "video": (VIDEO,),
    "auto": (),  # known once loaded
}
EXPECTED_CAPABILITIES = {
    CHAT: ("chat", "complete"),
    SPEECH: ("speech",),
    TRANSCRIPTION: ("transcribe",),
    EMBEDDING: ("embed",),
    RERANK: ("rerank", "score"),
    IMAGE: ("image_out",),
    VIDEO: ("video_out",),
}
RETRY_AFTER = 1.0
IDLE_CHECK_SECONDS = 1.0
READY_POLL_SECONDS = 0.05
RETRY_FAILED_AFTER = 30.0  # a model whose load failed is tried again by a request after this


@dataclass(eq=False)
class Entry:
    spec: ModelSpec
    config: ServerConfig  # its worker's
    estimate: int  # bytes: weights on disk + cache budgets
    pinned: bool = False
    engine: WorkerEngineClient | None = None
    leases: int = 0
    last_used: float = 0.0
    loading: asyncio.Task[None] | None = None
    failure: str | None = None  # why its last load failed
    failed_at: float = 0.0

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def state(self) -> str:
        """unloaded | loading | ready | failed | restarting (a worker crashed, coming back)."""
        if self.engine is None:
            return "failed" if self.failure else "unloaded"
        state = self.engine.state
        return {"starting": "loading", "swapping": "loading", "stopped": "unloaded"}.get(
            state, state
        )

    def answers_to(self, name: str) -> bool:
        return name == self.spec.id or name in self.spec.aliases


def entry_config(base: ServerConfig, spec: ModelSpec, path: str) -> ServerConfig:
    """The worker config of one model: the server's, its path and name, its own options (a
    remote entry: its worker host's address as both `remote` and the model shown)."""
    return dataclasses.replace(
        base,
        model=spec.remote or path,
        remote=spec.remote,
        served_model_name=spec.id,
        omni=spec.kind in ("speech", "transcription"),
        adapter_path=spec.adapter,
        speech_model=None,
        transcription_model=None,
        embedding_model=None,
        rerank_model=None,
        image_model=None,
        video_model=None,
        model_aliases=(),
        **spec.options,
    )


class ModelPool:
    def __init__(
        self,
        models: ModelsFile,
        base: ServerConfig,
        paths: dict[str, str],
        worker_command: WorkerCommand | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`paths`: each model id's checkpoint directory (hub ids resolved by the caller)."""
        self.models = models
        self.base = base
        self._worker_command = worker_command
        self._clock = clock
        self.entries: dict[str, Entry] = {}
        for spec in models.models:
            config = entry_config(base, spec, paths.get(spec.id, ""))
            # A remote model takes no memory here: outside max_loaded_models and the budget.
            estimate = 0 if spec.remote else estimate_bytes(paths[spec.id], config, spec.kind)
            self.entries[spec.id] = Entry(spec, config, estimate, pinned=spec.pinned)
        self.budget = (
            int(models.memory_budget_gb * 2**30) if models.memory_budget_gb is not None else None
        )
        for entry in self.entries.values():
            if self.budget is not None and entry.estimate > self.budget:
                raise ValueError(
                    f"model {entry.id!r} alone is estimated at {gib(entry.estimate)} "
                    f"(weights + caches), over memory_budget_gb {models.memory_budget_gb:g}"
                )
        self._lock = asyncio.Lock()  # loads and unloads
        self._changed = asyncio.Event()  # set (and replaced) when a lease ends or a model goes
        self._tasks: set[asyncio.Task[Any]] = set()
        self._observer: EngineObserver | None = None
        self._stopped = False

    # -- what the HTTP layer reads -------------------------------------------------------

    model_name = "models-file"  # engine-wide metrics' label (each model's requests: its id)
    ready_info = None

    async def worker_stats(self) -> dict[str, Any]:
        raise EngineUnavailable("a models file has a worker per model: /v1/admin/stats", None)

    def find(self, name: str) -> Entry | None:
        return next((e for e in self.entries.values() if e.answers_to(name)), None)

    @property
    def state(self) -> str:
        """ready while any model serves or can be loaded; else why not."""
        if self._stopped:
            return "stopped"
        states = {e.state for e in self.entries.values()}
        if "ready" in states or "unloaded" in states:
            return "ready"
        return "loading" if "loading" in states or "restarting" in states else "failed"

    def served_models(self) -> list[ServedModel]:
        return [self._served(entry) for entry in self.entries.values()]

    def _served(self, entry: Entry) -> ServedModel:
        spec = entry.spec
        kinds: tuple[str, ...] = KIND_OF_SPEC[spec.kind]
        # Until it is loaded, what its kind surely does (the worker's Ready says the rest).
        capabilities = tuple(c for kind in kinds for c in EXPECTED_CAPABILITIES[kind])
        max_context = None
        engine = entry.engine
        if engine is not None and engine.ready_info is not None:
            first = served_models(engine)[0]
            kinds, capabilities, max_context = first.kinds, first.capabilities, first.max_context
        return ServedModel(
            spec.id,
            entry.config.model,
            kinds,
            capabilities,
            other_names=(),
            aliases=spec.aliases,
            max_context=max_context,
        )

    def card(self, entry: Entry) -> dict[str, Any]:
        """What /v1/models and /health say of a model beyond OpenAI's fields."""
        info: dict[str, Any] = {
            "state": entry.state,
            "kind": entry.spec.kind,
            "pinned": entry.pinned,
            "in_flight": entry.leases,
            "estimated_bytes": entry.estimate,
        }
        if entry.engine is not None and entry.engine.ready_info is not None:
            pid = entry.engine.ready_info.pid
            info["worker_pid"] = pid
            if entry.spec.remote:
                info["remote"] = entry.spec.remote  # its pid is on that host
            else:
                info["resident_bytes"] = resident_bytes(pid)
        if entry.failure:
            info["reason"] = entry.failure
        elif entry.engine is not None and entry.engine.reason and entry.state != "ready":
            info["reason"] = entry.engine.reason
        return info

    def health(self) -> tuple[int, dict[str, Any]]:
        """/health (no key needed): each model's card without a remote host's address."""
        models = {}
        for entry in self.entries.values():
            card = self.card(entry)
            card.pop("remote", None)
            models[entry.id] = card
        state = self.state
        body = {"status": "ok" if state == "ready" else state, "models": models}
        return (200 if state == "ready" else 503), body

    # -- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        self._spawn(self._idle_loop(), "pool-idle")
        for entry in self.entries.values():
            if entry.spec.preload or entry.spec.pinned:
                self._spawn(self._preload(entry), f"preload-{entry.id}")

    async def stop(self) -> None:
        self._stopped = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        engines = [e.engine for e in self.entries.values() if e.engine is not None]
        await asyncio.gather(*(engine.stop() for engine in engines), return_exceptions=True)
        for entry in self.entries.values():
            entry.engine = None

    def observe(self, observer: EngineObserver) -> None:
        """Report every model's requests to `observer`, labelled with the model's id when the
        observer can label them (gateway/metrics: `for_model`)."""
        self._observer = observer
        for entry in self.entries.values():
            if entry.engine is not None:
                entry.engine.observe(self._observer_of(entry))

    def _observer_of(self, entry: Entry) -> EngineObserver:
        assert self._observer is not None
        for_model = getattr(self._observer, "for_model", None)
        return for_model(entry.id) if for_model is not None else self._observer

    # -- leases --------------------------------------------------------------------------

    async def acquire(self, entry: Entry) -> WorkerEngineClient:
        """The model's engine, loaded if it was not; holds a lease until `release(entry)`."""
        entry.leases += 1
        entry.last_used = self._clock()
        try:
            await self._ensure_loaded(entry, self._clock() + entry.config.queue_timeout)
        except BaseException:
            self.release(entry)
            raise
        assert entry.engine is not None
        return entry.engine

    def release(self, entry: Entry) -> None:
        """End a lease (synchronous: it runs in `finally` blocks of cancelled requests too)."""
        entry.leases -= 1
        entry.last_used = self._clock()
        self._signal()

    # -- loading and unloading -----------------------------------------------------------

    async def load(self, entry: Entry) -> None:
        """Load (admin, preload) as a request would, without keeping a lease; a model whose
        load failed is tried again at once."""
        entry.failed_at = 0.0
        await self.acquire(entry)
        self.release(entry)

    async def unload(self, entry: Entry) -> bool:
        """Unload now (admin); False if requests hold it."""
        async with self._lock:
            if entry.leases:
                return False
            await self._unload(entry, "unloaded on request")
            entry.failure = None
            return True

    def pin(self, entry: Entry, pinned: bool) -> None:
        entry.pinned = pinned

    async def _ensure_loaded(self, entry: Entry, deadline: float) -> None:
        while True:
            if self._stopped:
                raise EngineUnavailable("the server is shutting down", None)
            engine = entry.engine
            if engine is not None and engine.state == "ready":
                return
            if engine is not None and engine.state != "failed":
                await self._wait_ready(entry, engine, deadline)
                return
            if entry.failure and self._clock() - entry.failed_at < RETRY_FAILED_AFTER:
                raise EngineUnavailable(
                    f"model {entry.id!r} failed to load: {entry.failure}", RETRY_FAILED_AFTER
                )
            async with self._lock:
                if entry.engine is not None and entry.engine.state != "failed":
                    continue  # another request loaded it meanwhile
                if entry.engine is not None:  # failed: start afresh
                    await self._unload(entry, "its worker failed")
                changed = self._changed  # taken before the room is judged: no wake-up lost
                if await self._make_room(entry):
                    entry.engine = self._new_engine(entry)
                    entry.failure = None
                    log.info("loading model %s (%s)", entry.id, entry.config.model)
                    # In a context of its own: the worker's tasks outlive this request, and
                    # their log lines must not carry its id.
                    start = entry.engine.start()
                    try:
                        await contextvars.Context().run(asyncio.ensure_future, start)
                    except Exception as exc:  # sockets, key files: the model did not start
                        engine, entry.engine = entry.engine, None
                        await engine.stop()
                        entry.failure = f"its worker could not be started ({type(exc).__name__})"
                        entry.failed_at = self._clock()
                        log.exception("starting model %s failed", entry.id)
                        raise EngineUnavailable(
                            f"model {entry.id!r} failed to load: {entry.failure}",
                            RETRY_FAILED_AFTER,
                        ) from None
                    continue
            # No room yet: wait, without the lock, for a lease to end or a model to go.
            remaining = deadline - self._clock()
            if remaining <= 0:
                busy = [e.id for e in self.entries.values() if e.engine is not None]
                raise EngineUnavailable(
                    f"no room to load model {entry.id!r}: the loaded models ({', '.join(busy)}) "
                    "are pinned or serving requests",
                    RETRY_AFTER,
                )
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def _wait_ready(self, entry: Entry, engine: WorkerEngineClient, deadline: float) -> None:
        load_deadline = max(deadline, self._clock() + entry.config.ready_timeout)
        while engine.state != "ready":
            if engine.state == "failed":
                entry.failure = engine.reason or "the worker did not start"
                entry.failed_at = self._clock()
                raise EngineUnavailable(
                    f"model {entry.id!r} failed to load: {entry.failure}", RETRY_FAILED_AFTER
                )
            if entry.engine is not engine or engine.state == "stopped":
                raise EngineUnavailable(f"model {entry.id!r} was unloaded", RETRY_AFTER)
            if self._clock() > load_deadline:
                raise EngineUnavailable(f"model {entry.id!r} is still loading", RETRY_AFTER)
            await asyncio.sleep(READY_POLL_SECONDS)

    def _new_engine(self, entry: Entry) -> WorkerEngineClient:
        engine = WorkerEngineClient(entry.config, self._worker_command)
        if self._observer is not None:
            engine.observe(self._observer_of(entry))
        return engine

    async def _make_room(self, entry: Entry) -> bool:
        """Unload least recently used idle, unpinned models until `entry` fits (the caller
        holds the lock); False when what is left cannot be unloaded now."""
        victims = sorted(
            (
                e
                for e in self.entries.values()
                if e is not entry
                and e.engine is not None
                and not e.leases
                and not e.pinned
                and not e.spec.remote
            ),
            key=lambda e: e.last_used,
        )
        if not self._fits(entry, without=victims):
            return False  # even unloading them all would not make room: unload none
        for victim in victims:
            if self._fits(entry):
                break
            await self._unload(victim, f"room for {entry.id}")
        return True

    def _fits(self, entry: Entry, without: list[Entry] | tuple[Entry, ...] = ()) -> bool:
        """Whether `entry` fits next to the loaded models (but those in `without`)."""
        if entry.spec.remote:
            return True  # its memory is another host's
        loaded = [
            e
            for e in self.entries.values()
            if e.engine is not None and e is not entry and not e.spec.remote and e not in without
        ]
        if len(loaded) >= self.models.max_loaded_models:
            return False
        if self.budget is None:
            return True
        return sum(e.estimate for e in loaded) + entry.estimate <= self.budget

    async def _unload(self, entry: Entry, why: str) -> None:
        engine, entry.engine = entry.engine, None
        if engine is not None:
            log.info("unloading model %s: %s", entry.id, why)
            await engine.stop()
        self._signal()

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _preload(self, entry: Entry) -> None:
        try:
            await self.load(entry)
        except EngineUnavailable as exc:
            log.error("preloading model %s failed: %s", entry.id, exc.reason)

    async def _idle_loop(self) -> None:
        idle = self.models.idle_unload_seconds
        if idle <= 0:
            return
        while True:
            await asyncio.sleep(min(IDLE_CHECK_SECONDS, idle / 4))
            now = self._clock()
            for entry in self.entries.values():
                if (
                    entry.state == "ready"
                    and not entry.leases
                    and not entry.pinned
                    and now - entry.last_used >= idle
                ):
                    async with self._lock:
                        if not entry.leases and entry.engine is not None:
                            await self._unload(entry, f"idle for {idle:g} s")

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def resolve_paths(models: ModelsFile, resolve: Callable[[str], str]) -> dict[str, str]:
    """Each local model id's checkpoint directory (`resolve` turns a hub id into one); a
    remote model's worker host knows its own."""
    return {
        spec.id: resolve(os.path.expanduser(spec.path))
        for spec in models.models
        if spec.remote is None
    }
