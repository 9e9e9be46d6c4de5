"""Admission control: a bounded FIFO queue in front of a fixed number of worker slots.

At most `capacity` requests hold a slot; up to `max_queue` more wait in arrival order; past
that, QueueFull. The gate closes while no worker is ready (starting, restarting, swapping):
requests then wait in the same bounded queue until it opens again or their timeout passes.

Invariants: `in_flight` counts granted, unreleased slots; a waiter whose future holds a result
owns a slot. Every path out of `acquire` (timeout, cancellation, failure) either returns with a
slot owned by the caller or leaves no slot and no waiter behind.
"""

from __future__ import annotations

import asyncio
from collections import deque

from gateway.workers.errors import EngineUnavailable, QueueFull

QUEUE_FULL_RETRY_AFTER = 1.0


class Admission:
    def __init__(self, capacity: int, max_queue: int) -> None:
        self.capacity = max(1, capacity)
        self.max_queue = max(0, max_queue)
        self.in_flight = 0
        self._open = False
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)  # granted, failed and abandoned waiters leave the deque

    @property
    def is_open(self) -> bool:
        return self._open

    def open(self) -> None:
        self._open = True
        self._grant()

    def close(self) -> None:
        """New and queued requests wait (bounded by their timeout) until open() is called."""
        self._open = False

    def fail_waiters(self, exc: EngineUnavailable) -> None:
        """Wake every queued request with `exc` (the engine failed or stopped)."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(exc)

    async def acquire(self, timeout: float, front: bool = False) -> None:
        """Wait for a slot. `front` re-queues a request that lost its slot ahead of the others,
        without counting against the queue bound (it was already admitted once)."""
        if self._open and self.in_flight < self.capacity and not self._waiters:
            self.in_flight += 1
            return
        if not front and self.waiting >= self.max_queue:
            raise QueueFull(
                f"the admission queue is full ({self.max_queue} waiting)", QUEUE_FULL_RETRY_AFTER
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if front:
            self._waiters.appendleft(waiter)
        else:
            self._waiters.append(waiter)
        try:
            # asyncio.wait never cancels `waiter`, so a slot granted at the last moment is seen.
            await asyncio.wait({waiter}, timeout=timeout)
        except BaseException:  # cancelled: give back a slot granted meanwhile, or leave the queue
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()
            else:
                self._abandon(waiter)
            raise
        if not waiter.done():
            self._abandon(waiter)
            raise EngineUnavailable(f"no worker became available within {timeout:g} s", 1.0)
        waiter.result()  # raises what fail_waiters set

    def release(self) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        self._grant()

    def _grant(self) -> None:
        while self._open and self.in_flight < self.capacity and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.in_flight += 1
                waiter.set_result(None)

    def _abandon(self, waiter: asyncio.Future[None]) -> None:
        waiter.cancel()
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass
