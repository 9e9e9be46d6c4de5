"""What the engine reports as it goes, for whoever keeps metrics (gateway/metrics/).

`EngineObserver` does nothing; `WorkerEngineClient.observe(observer)` replaces it with one that
counts. Every call comes from the gateway's event loop, synchronously, from where the event
happens: admission (client.py), each worker delta of an open request and its end
(open_requests.py), worker loads, crashes and swaps (supervisor.py). Times are
`time.monotonic()`. Nothing here may raise or block: it runs once per delta.
"""

from __future__ import annotations

from protocol.messages import Delta


class EngineObserver:
    def admitted(self, request_id: str, op: str, arrived: float) -> None:
        """The request holds an admission slot and is about to be sent to the worker;
        `arrived`: when it asked for admission (entered `engine.request()`)."""

    def delta(self, delta: Delta, now: float) -> None:
        """A non-terminal delta of an open request, as the worker sent it (before merging)."""

    def ended(self, request_id: str, terminal: Delta | None, now: float) -> None:
        """The request left the open requests: with its `terminal` delta (the worker's, or
        one made in the gateway), or None when its reader left first (counted as an abort)."""

    def rejected(self, reason: str) -> None:
        """A request was refused admission: "queue_full" (the bounded queue was full) or
        "unavailable" (the engine failed or is stopping, or no worker became ready within the
        queue timeout)."""

    def worker_loaded(self, model_name: str, seconds: float) -> None:
        """A worker sent READY `seconds` after it was spawned (first load, restart, swap)."""

    def worker_crashed(self, model_name: str) -> None:
        """A worker died unexpectedly (exit, Fatal, or silence past the heartbeat timeout)."""

    def swap_finished(self, model_name: str, seconds: float, ok: bool) -> None:
        """A model swap to `model_name` ended (drain, old worker out, new one in), or failed."""


NO_OBSERVER = EngineObserver()
