"""A worker on another host, as the supervisor sees it: the counterpart of WorkerProcess.

The worker host (`vllm-omni-mlx worker --listen tcp://HOST:PORT`, worker/host/host.py) owns
the worker process and restarts it after a crash by itself; the gateway connects to it
(`WorkerClient.connect`) and keeps its own supervisor unchanged:

- `RemoteHost.spawn()` is the supervisor's spawn: it sends `HostCommand("start")` and waits
  for `HostEvent("started", pid)`; READY then arrives as from a local worker (the host resends
  it for a worker that had loaded already). A CURVE handshake the host refused (wrong key) or
  a mechanism mismatch (one side --insecure) is a LaunchError that is not retried; a host
  that does not answer is one that is (the link may come back).
- `RemoteWorker.exited` is done when the host reports that worker's exit (`HostEvent
  ("exited")`); silence longer than --heartbeat-timeout (a network drop, a hung host) is
  noticed by the supervisor's watch as for a local worker, and also while the worker loads
  (the host says `loading` every 0.5 s until READY): the worker is then `kill()`ed: ask the
  host to stop it (best effort: the link may be down) and consider it gone at once. The next
  start names that pid, so a host that comes back replaces it instead of adopting it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from gateway.workers.errors import LaunchError
from gateway.workers.worker_channel import WorkerClient
from gateway.workers.worker_handle import WorkerHandle
from protocol.host import HostAction, HostCommand, HostEvent, HostEventKind

log = logging.getLogger("gateway.workers.remote_worker")

POLL_SECONDS = 0.05
LINK_POLL_SECONDS = 0.1  # how often a worker's link events are read


class RemoteWorker(WorkerHandle):
    """One worker process on the host: its end is the host's report, or the link's silence."""

    def __init__(self, host: RemoteHost, pid: int, silence_limit: float) -> None:
        self.host = host
        self.pid = pid
        self.tail: deque[str] = deque()  # its output is in the host's log, not here
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._how = "is still running"
        self._link = asyncio.create_task(self._watch_link(silence_limit), name=f"remote-{pid}")

    async def _watch_link(self, limit: float) -> None:
        """Gone when the link is silent past `limit`, loading included (the host says
        `loading` meanwhile; once loaded, the worker's heartbeats keep it busy), or as soon as
        the link drops: frames sent while it was down are lost (PUSH drops what it cannot
        deliver), so requests in flight could wait forever for deltas that never come."""
        client = self.host.client
        while not self.exited.done():
            client.handshake_failure()  # reads the link's events: `connected`
            if not client.connected:
                self.kill("lost its link to the gateway (frames in flight may be lost)")
                return
            silence = time.monotonic() - client.last_seen
            if silence >= limit:
                self.kill(f"sent nothing for {silence:.1f} s (the network or the host is down)")
                return
            await asyncio.wait({self.exited}, timeout=min(limit - silence, LINK_POLL_SECONDS))

    @property
    def exited(self) -> asyncio.Future[int]:
        return self._exited

    def ended(self, how: str) -> None:
        if not self.exited.done():
            self._how = how
            self.exited.set_result(0)

    def kill(self, how: str = "was given up on by the gateway") -> None:
        if not self.exited.done():
            self.host.command(HostAction.STOP, self.pid)
            self.ended(how)

    terminate = kill

    def describe_exit(self) -> str:
        return f"worker pid {self.pid} on {self.host.address} {self._how}"


class RemoteHost:
    """The gateway's end of one worker host: start / stop its worker, route its events."""

    def __init__(self, address: str, client: WorkerClient) -> None:
        self.address = address
        self.client = client
        self._generation = 0
        self._waiting: tuple[int, asyncio.Future[int]] | None = None
        self._worker: RemoteWorker | None = None
        self._given_up = 0  # the pid of the last worker this gateway had (to be replaced)

    def command(self, action: HostAction, pid: int = 0) -> int:
        self._generation += 1
        self.client.send_nowait(HostCommand(action, self._generation, pid))
        return self._generation

    def on_event(self, event: HostEvent) -> None:
        if event.event == HostEventKind.STARTED:
            waiting = self._waiting
            if waiting is not None and waiting[0] == event.generation and not waiting[1].done():
                waiting[1].set_result(event.pid)
            else:
                log.info("the worker host at %s started worker pid %d", self.address, event.pid)
        elif event.event == HostEventKind.EXITED:
            worker = self._worker
            if worker is not None and worker.pid == event.pid:
                worker.ended(event.detail)
            log.info("the worker host at %s: worker pid %d %s", self.address, event.pid,
                     event.detail)  # fmt: skip

    async def spawn(self, timeout: float, silence_limit: float) -> RemoteWorker:
        """Ask the host for a worker; its pid once the host answers. LaunchError otherwise.
        The worker counts as gone once the link is silent for `silence_limit` seconds."""
        replace = self._given_up
        self._generation += 1
        generation = self._generation
        reply: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiting = (generation, reply)
        command = HostCommand(HostAction.START, generation, replace)
        deadline = time.monotonic() + timeout
        sent = False
        try:
            while not reply.done():
                refused = self.client.handshake_failure()
                if refused is not None:
                    raise LaunchError(
                        f"the worker host at {self.address} refused the connection: {refused}",
                        retry=False,
                    )
                if not sent:  # IMMEDIATE: accepted only once a connection is up
                    sent = self.client.send_nowait(command)
                if time.monotonic() >= deadline:
                    why = "" if self.client.connected else " (no connection)"
                    raise LaunchError(
                        f"the worker host at {self.address} did not answer within "
                        f"{timeout:g} s{why}"
                    )
                await asyncio.wait({reply}, timeout=POLL_SECONDS)
        finally:
            self._waiting = None
        worker = RemoteWorker(self, reply.result(), silence_limit)
        self._worker = worker
        self._given_up = worker.pid
        log.info("the worker host at %s runs worker pid %d", self.address, worker.pid)
        return worker
