"""What the IO threads hand the MLX thread: the inbox, the abort set and the shutdown flag.

The receiver thread puts Submits (and a shutdown request) in the inbox in arrival order and
adds aborted ids to the abort set; the MLX thread drains both between steps and peeks at the
abort set between prefill chunks. The order in which the MLX thread drains (aborts first,
then the inbox) guarantees an abort is never drained before its own Submit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.messages import Submit


@dataclass(frozen=True, slots=True)
class ShutdownRequest:
    """A ControlCall("shutdown"): abort everything, reply to `call_id`, exit 0."""

    call_id: int


@dataclass(frozen=True, slots=True)
class AdapterChange:
    """A ControlCall("load_adapter" | "unload_adapter"): applied on the MLX thread between
    steps (worker/text/adapters/control.py), answered to `call_id`. `path` None: unload."""

    call_id: int
    name: str
    path: str | None
    replace: bool = False


@dataclass(frozen=True, slots=True)
class _Wake:
    """Put by `Handoff.wake`: ends a wait for the inbox, carries nothing."""


_WAKE = _Wake()

InboxItem = Submit | ShutdownRequest | AdapterChange


class AbortSet:
    """Request ids the gateway aborted, not yet applied by the MLX thread (thread-safe)."""

    def __init__(self) -> None:
        self._ids: set[str] = set()
        self._lock = threading.Lock()

    def add(self, request_ids: Iterable[str]) -> None:
        with self._lock:
            self._ids.update(request_ids)

    def __contains__(self, request_id: str) -> bool:
        with self._lock:
            return request_id in self._ids

    def drain(self) -> set[str]:
        """Takes every id out; ids of requests already finished are simply dropped by the caller."""
        with self._lock:
            ids, self._ids = self._ids, set()
        return ids


@dataclass
class Handoff:
    """The receiver thread's side of the conversation with the MLX thread."""

    inbox: queue.SimpleQueue[InboxItem | _Wake] = field(default_factory=queue.SimpleQueue)
    aborts: AbortSet = field(default_factory=AbortSet)
    shutdown: threading.Event = field(default_factory=threading.Event)

    def take(self, block_for: float | None) -> list[InboxItem]:
        """Everything in the inbox now; waits up to `block_for` seconds for a first item (or
        a `wake()`)."""
        got: list[InboxItem | _Wake] = []
        if block_for:
            try:
                got.append(self.inbox.get(timeout=block_for))
            except queue.Empty:
                return []
        while True:
            try:
                got.append(self.inbox.get_nowait())
            except queue.Empty:
                return [item for item in got if not isinstance(item, _Wake)]

    def wake(self) -> None:
        """Ends the MLX thread's wait for the inbox now (any thread): an engine's work that ran
        off that thread is ready for its next step."""
        self.inbox.put(_WAKE)
