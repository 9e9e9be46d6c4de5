"""What the supervisor holds of a running worker, local or on another host: one base class.

A `WorkerProcess` (a child process of this gateway) and a `RemoteWorker` (a process a worker
host runs for it) differ in how they are killed, how their end is learned and how it is
described; waiting, killing then waiting, and the grace period before a kill are the same.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections import deque

log = logging.getLogger(__name__)


class WorkerHandle(ABC):
    """One worker: `pid`, `exited` (done with its exit code once it is gone), `tail` (its
    last output lines, when this gateway reads its output)."""

    pid: int
    tail: deque[str]

    @property
    @abstractmethod
    def exited(self) -> asyncio.Future[int]:
        """Done once the worker is gone."""

    @property
    def returncode(self) -> int | None:
        return self.exited.result() if self.exited.done() else None

    @abstractmethod
    def kill(self) -> None:
        """End the worker now (SIGKILL, or asking its host); `exited` follows."""

    @abstractmethod
    def describe_exit(self) -> str:
        """How it ended, short and safe to show anyone ('worker pid N exited with code 1')."""

    def last_output(self) -> str:
        """Its last output lines, for the log."""
        return "\n".join(self.tail)

    async def wait(self) -> int:
        return await asyncio.shield(self.exited)

    async def kill_and_wait(self) -> int:
        self.kill()
        return await self.wait()

    async def wait_or_kill(self, grace: float) -> int:
        """Give the worker `grace` seconds to exit on its own, then kill it."""
        try:
            return await asyncio.wait_for(self.wait(), grace)
        except asyncio.TimeoutError:
            log.warning("worker pid %d did not exit within %g s; killing it", self.pid, grace)
            return await self.kill_and_wait()
