"""The worker's life cycle: spawn, READY handshake, liveness, crash restarts, model swap.

States: starting -> ready <-> restarting, ready -> swapping -> ready, any -> failed | stopped.
One background task (`_supervise`) owns a running worker: it watches the process and the
silence since its last message, and on a crash restarts it, always, with a backoff that doubles
per crash within `restart_window` up to `restart_backoff_max`, so a crash loop never leaves the
server dead for good (only `max_restarts`, when set, gives up). A worker that fails its very
first load, or speaks another protocol version, is not restarted: restarting it cannot help.

A worker on another host (`host`, gateway/workers/remote_worker.py) goes through the same
states: its spawn asks the worker host to start one, its kill asks the host to stop it, and
its exit is what the host reports (or heartbeat silence, as for a local worker).

A swap takes the worker away from `_supervise` first (cancel it), so a worker stopped on
purpose is never mistaken for a crash, and the old process has exited before the new one is
spawned: two models are never resident at once.

Reasons (`reason`, the texts given to `on_lost`) are shown to anyone: /health needs no key,
and open requests end with them. They say what happened in a short sentence; the worker's
Fatal detail (traceback) and its last output lines go to the log, never into a reason.

The supervisor does not know about requests. It reports through two callbacks: `on_state`
after every state change, and `on_lost(reason)` when a worker is gone (its open requests and
control calls must fail); and tells `observer` (gateway/workers/observer.py) how long loads
and swaps took and when a worker crashed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.config import ServerConfig
from gateway.workers.errors import LaunchError, SwapFailed
from gateway.workers.observer import NO_OBSERVER, EngineObserver
from gateway.workers.remote_worker import RemoteHost, RemoteWorker
from gateway.workers.worker_channel import WorkerClient
from gateway.workers.worker_handle import WorkerHandle
from gateway.workers.worker_process import WorkerCommand, WorkerProcess, worker_env
from protocol.messages import PROTOCOL_VERSION, ControlCall, ControlMethod, Fatal, Ready

log = logging.getLogger("gateway.workers.supervisor")

RESTART_BACKOFF = 0.5  # seconds before the first restart; doubles per crash in the window
EXIT_GRACE = 0.2  # after an exit, time for its last messages (Fatal, final Step) to arrive
SHUTDOWN_GRACE = 5.0  # a worker asked to shut down is killed after this
# A worker host that does not answer a start this long: retry. It answers once it has started
# the worker process, which took over 10 s on a loaded 2-core machine (a full test run).
HOST_ANSWER_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class LaunchFailure:
    message: str
    retry: bool = True  # False: the same command would fail the same way


class Supervisor:
    def __init__(
        self,
        config: ServerConfig,
        command: WorkerCommand,
        on_state: Callable[[], None],
        on_lost: Callable[[str], None],
    ) -> None:
        self.config = config
        self._command = command
        self._on_state = on_state
        self._on_lost = on_lost
        self.client: WorkerClient | None = None
        self.state = "starting"
        self.reason: str | None = "the worker is loading the model"
        self.model_path = config.model
        self.model_name = config.served_model_name
        self.loading: tuple[str, str] | None = None  # (path, name) a swap is bringing up
        self.process: WorkerHandle | None = None
        # A worker on another host (gateway/workers/remote_worker.py): spawn and kill go to it.
        self.host: RemoteHost | None = None
        self.ready: Ready | None = None
        self._ready_waiter: asyncio.Future[Ready | Fatal] | None = None
        self._fatal: Fatal | None = None
        self._retired_pids: set[int] = set()
        self._crashes: deque[float] = deque()
        self.restarts = 0  # crashes this model's workers had since it loaded
        self.last_exit: str | None = None  # why the last of them ended
        self._task: asyncio.Task[None] | None = None
        self._swapping = False
        self._swap_started = 0.0
        self.observer: EngineObserver = NO_OBSERVER

    # -- messages the engine routes here -------------------------------------------------

    def on_ready_message(self, ready: Ready) -> None:
        if ready.pid in self._retired_pids:
            return  # a READY that arrived after its worker was given up on
        if self._ready_waiter is not None and not self._ready_waiter.done():
            self._ready_waiter.set_result(ready)
        else:
            log.warning("ignored an unexpected READY from pid %d", ready.pid)

    def on_fatal_message(self, fatal: Fatal) -> None:
        log.error("worker fatal error: %s\n%s", fatal.message, fatal.detail)
        self._fatal = fatal
        if self._ready_waiter is not None and not self._ready_waiter.done():
            self._ready_waiter.set_result(fatal)
        elif self.state == "ready" and not self._swapping:
            # The worker exits next; say so now rather than when its exit is noticed, and end
            # its requests (it will not finish them).
            self._set_state("restarting", f"restarting after a worker failure: {fatal.message}")
            self._on_lost(f"the worker failed: {fatal.message}")

    # -- life cycle ----------------------------------------------------------------------

    def start(self, client: WorkerClient) -> None:
        self.client = client
        self._set_state("starting", "the worker is loading the model")
        self._task = asyncio.create_task(self._supervise(first_load=True), name="supervisor")

    def mark_stopped(self) -> None:
        """Final state: nothing is admitted or restarted any more."""
        self._set_state("stopped", "the server is shutting down")

    async def stop(self) -> None:
        """Stop supervising and shut the worker down (ask, then kill after a grace period)."""
        self.mark_stopped()
        await self._cancel_task()
        if self.process is not None:
            await self._retire(self.process)

    def begin_swap(self, path: str, name: str) -> str:
        """Enter "swapping" (admission closes); returns the state before it."""
        previous = self.state
        self._swapping = True
        self._swap_started = time.monotonic()
        self.loading = (path, name)
        self._set_state("swapping", f"loading {name}")
        if previous != "ready" and self._task is not None:
            self._task.cancel()  # a load or a restart backoff in progress: its model is going
        return previous

    async def finish_swap(self, path: str, name: str, restore: bool) -> None:
        """Replace the worker (after the engine drained it) by one serving `path`.
        On failure restore the previous model if `restore`, then raise SwapFailed."""
        old_path, old_name = self.model_path, self.model_name
        swapped = False
        try:
            await self._cancel_task()
            if self.process is not None:
                await self._retire(self.process)
            failure = await self._launch(path)
            if failure is None:
                self.model_path, self.model_name = path, name
                self._crashes.clear()
                self.restarts, self.last_exit = 0, None
                self._serve()
                swapped = True
                return
            message = f"{name} failed to load: {failure.message}"
            if not restore:
                self._fail(message)
                raise SwapFailed(message + "; no previous model to restore", restored=False)
            log.error("%s; restoring %s", message, old_name)
            self.loading = (old_path, old_name)
            back = await self._launch(old_path)
            if back is None:
                self._serve()
                raise SwapFailed(message + f"; {old_name} serves again", restored=True)
            self._fail(f"{message}; restoring {old_name} failed too: {back.message}")
            raise SwapFailed(self.reason or message, restored=False)
        finally:
            self._swapping = False
            self.loading = None
            self.observer.swap_finished(name, time.monotonic() - self._swap_started, swapped)

    # -- internals -------------------------------------------------------------------------

    def _set_state(self, state: str, reason: str | None) -> None:
        if self.state == "stopped":
            return  # final
        self.state, self.reason = state, reason
        self._on_state()

    def _serve(self) -> None:
        """A worker just became ready: serve and watch it."""
        self._swapping = False
        self.loading = None
        self._set_state("ready", None)
        self._task = asyncio.create_task(self._supervise(first_load=False), name="supervisor")

    def _fail(self, reason: str) -> None:
        log.error("engine failed: %s", reason)
        self._set_state("failed", reason)

    async def _cancel_task(self) -> None:
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _supervise(self, first_load: bool) -> None:
        try:
            while True:
                if self.process is None:
                    failure = await self._launch(self.model_path)
                    if failure is not None:
                        if first_load or not failure.retry:
                            self._fail(failure.message)
                            return
                        if not await self._count_crash_and_back_off(failure.message):
                            return
                        continue
                    first_load = False
                    if self.state != "ready":
                        self._set_state("ready", None)
                process = self.process
                assert process is not None  # _launch succeeded: it set the process
                death = await self._watch(process)
                self._forget(process)
                if self._swapping:
                    self._on_lost(f"the worker died during a model swap: {death}")
                    return
                crashed = await self._count_crash_and_back_off(death, lost=True)
                if not crashed:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a supervisor bug must show in /health, not hang requests
            log.exception("worker supervisor error")
            self._fail(f"worker supervisor error ({type(exc).__name__})")
            self._on_lost(f"worker supervisor error ({type(exc).__name__})")

    async def _count_crash_and_back_off(self, reason: str, lost: bool = False) -> bool:
        """Record a crash; False (state failed) when too many fell within the window, else
        state restarting and sleep the backoff."""
        now = time.monotonic()
        self._crashes.append(now)
        while self._crashes and now - self._crashes[0] > self.config.restart_window:
            self._crashes.popleft()
        n = len(self._crashes)
        self.restarts += 1
        self.observer.worker_crashed(self.model_name)
        self.last_exit = reason
        log.error("worker crash %d within %g s: %s", n, self.config.restart_window, reason)
        limit = self.config.max_restarts
        if limit is not None and n >= limit:
            self._fail(f"gave up after {n} crashes in {self.config.restart_window:g} s: {reason}")
        else:
            self._set_state("restarting", f"restarting after a crash: {reason}")
        if lost:
            self._on_lost(f"the worker died: {reason}")
        if self.state == "failed":
            return False
        await asyncio.sleep(self.backoff(n))
        return True

    def backoff(self, crashes: int) -> float:
        """Seconds before the restart after `crashes` crashes within the window."""
        return float(min(RESTART_BACKOFF * 2 ** (crashes - 1), self.config.restart_backoff_max))

    async def _launch(self, path: str) -> LaunchFailure | None:
        """Spawn a worker for `path` and wait for its READY; on success it is `self.process`."""
        assert self.client is not None
        self._fatal = None
        self.ready = None
        waiter: asyncio.Future[Ready | Fatal] = asyncio.get_running_loop().create_future()
        self._ready_waiter = waiter
        started = time.monotonic()
        try:
            try:
                proc = await self._spawn(path)
            except LaunchError as exc:
                log.error("%s", exc.message)
                return LaunchFailure(exc.message, exc.retry)
            self.process = proc
            try:
                failure = await self._handshake(proc, waiter)
                if failure is None:
                    name = self.loading[1] if self.loading else self.model_name
                    self.observer.worker_loaded(name, time.monotonic() - started)
                return failure
            except BaseException:  # cancelled mid-load: no orphan worker
                await asyncio.shield(proc.kill_and_wait())
                self._forget(proc)
                raise
        finally:
            self._ready_waiter = None

    async def _spawn(self, path: str) -> WorkerHandle:
        """A local worker process, or the worker host's worker (`self.host`)."""
        assert self.client is not None
        if self.host is not None:
            timeout = min(self.config.ready_timeout, HOST_ANSWER_TIMEOUT)
            return await self.host.spawn(timeout, self.config.heartbeat_timeout)
        argv = self._command(self.config, path, self.client.endpoints)
        try:
            return await WorkerProcess.spawn(argv, worker_env(path, self.config))
        except OSError as exc:
            log.error("cannot start the worker %s: %s", argv, exc)
            reason = exc.strerror or type(exc).__name__
            raise LaunchError(f"cannot start the worker ({reason})", retry=False) from None

    async def _handshake(
        self, proc: WorkerHandle, waiter: asyncio.Future[Ready | Fatal]
    ) -> LaunchFailure | None:
        timeout = self.config.ready_timeout
        waited: set[asyncio.Future[Any]] = {waiter, proc.exited}
        await asyncio.wait(waited, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not waiter.done() and proc.exited.done():
            await asyncio.wait({waiter}, timeout=EXIT_GRACE)  # a Fatal sent just before exit
        failure: LaunchFailure | None = None
        fatal = waiter.result() if waiter.done() else None
        if isinstance(fatal, Fatal):
            await proc.wait_or_kill(SHUTDOWN_GRACE)
            failure = LaunchFailure(fatal.message)
        elif waiter.done():
            ready = waiter.result()
            assert isinstance(ready, Ready)
            if ready.protocol_version != PROTOCOL_VERSION:
                await proc.kill_and_wait()
                failure = LaunchFailure(
                    f"refused a worker speaking protocol version {ready.protocol_version}; "
                    f"this gateway speaks version {PROTOCOL_VERSION}",
                    retry=False,
                )
            elif proc.exited.done():
                failure = LaunchFailure(_exit_text(proc))
            else:
                self.ready = ready
                log.info("worker pid %d ready: %s", proc.pid, ready.model)
                return None
        elif proc.exited.done():
            failure = LaunchFailure(_exit_text(proc))
        else:
            await proc.kill_and_wait()
            failure = LaunchFailure(f"no READY within {timeout:g} s; " + _exit_text(proc))
        self._forget(proc)
        return failure

    async def _watch(self, proc: WorkerHandle) -> str:
        """Return why the worker is gone: it exited, or it was silent too long and was killed."""
        assert self.client is not None
        limit = self.config.heartbeat_timeout
        while True:
            silence = time.monotonic() - self.client.last_seen
            if silence >= limit:
                await proc.kill_and_wait()
                if isinstance(proc, RemoteWorker):
                    return (
                        f"nothing from the worker host at {proc.host.address} for "
                        f"{silence:.1f} s (the network or the host is down)"
                    )
                return f"worker pid {proc.pid} sent nothing for {silence:.1f} s; killed it"
            await asyncio.wait({proc.exited}, timeout=limit - silence)
            if proc.exited.done():
                await asyncio.sleep(EXIT_GRACE)  # its last Step or Fatal may still be in flight
                return self._fatal.message if self._fatal else _exit_text(proc)

    async def _retire(self, proc: WorkerHandle) -> None:
        """Ask the worker to shut down; kill it if it has not exited after a grace period."""
        assert self.client is not None
        # Fire and forget (call id 0 is never awaited): only its exit matters.
        self.client.send_nowait(ControlCall(0, ControlMethod.SHUTDOWN))
        await proc.wait_or_kill(SHUTDOWN_GRACE)
        self._forget(proc)
        self._on_lost("the worker was shut down")

    def _forget(self, proc: WorkerHandle) -> None:
        self._retired_pids.add(proc.pid)
        if self.process is proc:
            self.process = None
            self.ready = None


def _exit_text(proc: WorkerHandle) -> str:
    """How the worker ended, for /health and errors; its last output goes to the log only."""
    if proc.tail:
        log.error("worker pid %d ended; its last output:\n%s", proc.pid, proc.last_output())
    return proc.describe_exit()
