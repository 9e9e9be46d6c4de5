"""The engines of one worker process, as the HTTP layer uses them (an `EngineClient`): submit
requests, stream their deltas, swap the model.

    async with engine.request(ChatInputs(messages, sampling), stream=True) as deltas:
        async for batch in deltas:          # list[Delta]; ends after the terminal delta
            ...

Invariants: every admitted request ends with exactly one terminal delta (from the worker, or
made here when the worker dies, the model is swapped or the server stops), so no reader ever
hangs; a request leaves the registry and gives back its admission slot the moment it ends or
its context exits, whichever comes first; leaving the context before the terminal delta
(client gone, exception, cancellation) sends Abort without awaiting anything.

Terminal deltas made here have finish_reason "error", usage None and an ErrorInfo code:
"worker_died" (the worker crashed or hung, or the server is stopping) or "model_swap" (still
running when a swap's drain timeout passed). Swaps are serialized: a second swap waits for
the first to finish, then runs; a swap keeps going if its caller is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec

from gateway.config import ServerConfig
from gateway.request_context import ADAPTER, REQUEST_ID, TIME_LIMIT
from gateway.workers.admission import Admission
from gateway.workers.errors import EngineUnavailable, QueueFull, SwapFailed, WorkerRejected
from gateway.workers.observer import EngineObserver
from gateway.workers.open_requests import OpenRequests
from gateway.workers.remote_worker import RemoteHost
from gateway.workers.request_stream import RequestStream
from gateway.workers.supervisor import Supervisor
from gateway.workers.worker_channel import (
    ControlCallFailed,
    ControlCallRejected,
    CurveClientKeys,
    WorkerClient,
)
from gateway.workers.worker_process import WorkerCommand, default_worker_command
from protocol import Endpoints, Frame
from protocol.host import HostEvent
from protocol.inputs import ChatInputs, CompleteInputs, Inputs
from protocol.messages import (
    Abort,
    AdapterArgs,
    ControlMethod,
    ControlReply,
    DetokenizeArgs,
    ErrorCode,
    Fatal,
    Heartbeat,
    Ready,
    Step,
    Submit,
    TokenizeArgs,
)

__all__ = [
    "WorkerEngineClient",
    "EngineUnavailable",
    "QueueFull",
    "SwapFailed",
    "WorkerRejected",
    "default_worker_command",
]

log = logging.getLogger("gateway.workers.client")

SUBMIT_SEND_TIMEOUT = 5.0  # a ready worker that cannot take a Submit this long is gone
STATS_TIMEOUT = 5.0
COUNT_TOKENS_TIMEOUT = 30.0  # the worker tokenizes between decode steps of a busy batch
ADAPTER_TIMEOUT = 120.0  # the MLX thread reads an adapter's weights between steps
RETRY_AFTER = 1.0
# /health reports a ready worker "unresponsive" after this many heartbeat intervals of silence
# (2 s at the least: a loaded machine can delay a beat).
HEARTBEAT_LATE_INTERVALS = 4


class RequestContext:
    """`async with` a request: admission and Submit on enter, Abort (if unfinished) on exit."""

    def __init__(self, engine: WorkerEngineClient, submit: Submit) -> None:
        self._engine = engine
        self._submit = submit

    @property
    def request_id(self) -> str:
        return self._submit.request_id

    async def __aenter__(self) -> RequestStream:
        return await self._engine._open_request(self._submit)

    async def __aexit__(self, *exc_info: object) -> None:
        self._engine._requests.close(self._submit.request_id)


class WorkerEngineClient:
    """The engines of one supervised worker process: see the module docstring."""

    def __init__(self, config: ServerConfig, worker_command: WorkerCommand | None = None) -> None:
        self.config = config
        self._admission = Admission(config.max_num_seqs, config.max_queue)
        self._sup = Supervisor(
            config, worker_command or default_worker_command, self._on_state, self._on_lost
        )
        self._client: WorkerClient | None = None
        self._dir: str | None = None
        self._requests = OpenRequests(self._admission, self._send_abort)
        self._observer = self._requests.observer  # see observe()
        self._swap_lock = asyncio.Lock()
        self._swaps_begun = 0  # an adapter call that waited through one is refused
        self._swaps: set[asyncio.Task[dict[str, Any]]] = set()
        self._handlers: dict[type, Callable[[Any], None]] = {
            Step: self._requests.on_step,
            Ready: self._sup.on_ready_message,
            Fatal: self._sup.on_fatal_message,
            Heartbeat: lambda _: None,  # its arrival alone is the sign of life
        }

    # -- what the HTTP layer reads -------------------------------------------------------

    @property
    def state(self) -> str:
        return self._sup.state

    @property
    def reason(self) -> str | None:
        return self._sup.reason

    @property
    def model_name(self) -> str:
        return self._sup.model_name

    @property
    def model_path(self) -> str:
        return self._sup.model_path

    @property
    def ready_info(self) -> Ready | None:
        return self._sup.ready

    def health(self) -> tuple[int, dict[str, Any]]:
        ready = self._sup.ready
        body: dict[str, Any]
        if self.state == "ready" and ready is not None:
            body = {"status": "ok", "model": self.model_name, "worker_pid": ready.pid}
            if self._sup.restarts:
                body["restarts"] = self._sup.restarts
            silence = self._silence()
            if silence >= max(HEARTBEAT_LATE_INTERVALS * self.config.heartbeat_interval, 2.0):
                # Frozen (SIGSTOP, a hung kernel) or swamped: say so long before the
                # heartbeat timeout kills it.
                body["status"] = "unresponsive"
                body["reason"] = (
                    f"no heartbeat from worker pid {ready.pid} for {silence:.1f} s (it is "
                    f"restarted after {self.config.heartbeat_timeout:g} s of silence)"
                )
                return 503, body
            return 200, body
        body = {
            "status": self.state,
            "reason": self.reason,
            "model": self.model_name,
        }
        if self._sup.loading is not None:
            body["loading"] = self._sup.loading[1]
        if self._sup.restarts:
            body["restarts"] = self._sup.restarts
            body["last_exit"] = self._sup.last_exit
        return 503, body

    def _silence(self) -> float:
        """Seconds since the worker last sent anything (a heartbeat at the least)."""
        return 0.0 if self._client is None else time.monotonic() - self._client.last_seen

    def queue_stats(self) -> dict[str, int]:
        return {
            "in_flight": self._admission.in_flight,
            "waiting": self._admission.waiting,
            "max_num_seqs": self._admission.capacity,
            "max_queue": self._admission.max_queue,
        }

    def observe(self, observer: EngineObserver) -> None:
        """Report requests and worker events to `observer` (gateway/metrics keeps the counts)."""
        self._observer = self._requests.observer = self._sup.observer = observer

    # -- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Bind the sockets and spawn the worker; READY arrives later (see health()). With
        `config.remote`, connect to that worker host instead and ask it for its worker."""
        remote = self.config.remote
        if remote is not None:
            self._client = WorkerClient(Endpoints.tcp(remote), self._on_message)
            keys = (
                None if self.config.insecure else CurveClientKeys.load(self.config.keys_dir or "")
            )
            self._client.connect(keys)
            host = RemoteHost(remote, self._client)
            self._sup.host = host
            self._handlers[HostEvent] = host.on_event
        else:
            self._dir = tempfile.mkdtemp(prefix="vomlx-", dir=_short_tmp())
            self._client = WorkerClient(Endpoints.ipc_in(self._dir), self._on_message)
            self._client.bind()
        self._sup.start(self._client)

    async def stop(self) -> None:
        """End open requests, shut the worker down (killing it after a grace period), unbind."""
        self._sup.mark_stopped()
        for task in list(self._swaps):
            task.cancel()
        await asyncio.gather(*self._swaps, return_exceptions=True)
        self._requests.end_all(ErrorCode.WORKER_DIED, "the server is shutting down", abort=True)
        await self._sup.stop()
        if self._client is not None:
            await self._client.close()
            self._client = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    # -- requests ------------------------------------------------------------------------

    def request(
        self, inputs: Inputs, stream: bool, request_id: str | None = None
    ) -> RequestContext:
        """A worker request (`request_id`: unique among open ones, default a new uuid). It
        carries the HTTP request's id (x-request-id), which the worker's log lines name."""
        submit = Submit(request_id or uuid.uuid4().hex, inputs, stream)
        submit.http_request_id = REQUEST_ID.get()
        submit.time_limit = TIME_LIMIT.get()
        if isinstance(inputs, (ChatInputs, CompleteInputs)):
            submit.adapter = ADAPTER.get()
        return RequestContext(self, submit)

    async def _open_request(self, submit: Submit) -> RequestStream:
        rid = submit.request_id
        if rid in self._requests:
            raise ValueError(f"request id {rid!r} is already open")
        arrived = time.monotonic()
        deadline = arrived + self.config.queue_timeout
        front = False
        while True:
            self._raise_if_down()
            try:
                await self._admission.acquire(max(0.0, deadline - time.monotonic()), front)
            except QueueFull:
                self._observer.rejected("queue_full")
                raise
            except EngineUnavailable as exc:
                self._observer.rejected("unavailable")
                raise EngineUnavailable(
                    f"{exc.reason} (engine {self.state}: {self.reason})", RETRY_AFTER
                ) from None
            if self.state == "ready":
                break
            # The worker went away between the grant and now: wait for the next one, first in line.
            self._admission.release()
            front = True
        stream = self._requests.add(rid)
        self._observer.admitted(rid, str(submit.op), arrived)
        try:
            await self._deliver(submit, stream)
        except BaseException:
            self._requests.close(rid)
            raise
        return stream

    async def _deliver(self, submit: Submit, stream: RequestStream) -> None:
        assert self._client is not None
        deadline = time.monotonic() + SUBMIT_SEND_TIMEOUT
        # Retry: the pipe to a worker that just sent READY may still be attaching.
        while not self._client.send_nowait(submit):
            if stream.finished:
                return  # the worker died meanwhile; the stream already has its terminal delta
            if time.monotonic() >= deadline:
                message = "the worker did not take the request"
                self._requests.fail(submit.request_id, ErrorCode.WORKER_DIED, message)
                return
            await asyncio.sleep(0.01)

    def _send_abort(self, request_ids: list[str]) -> None:
        if self._client is not None:
            self._client.send_nowait(Abort(request_ids))

    def _raise_if_down(self) -> None:
        if self.state in ("failed", "stopped"):
            self._observer.rejected("unavailable")
            raise EngineUnavailable(f"the engine is {self.state}: {self.reason}", None)

    # -- worker messages and supervisor callbacks ----------------------------------------

    def _on_message(self, message: Frame) -> None:
        handler = self._handlers.get(type(message))
        if handler is None:
            log.warning("unexpected %s from the worker", type(message).__name__)
        else:
            handler(message)

    def _on_state(self) -> None:
        state = self._sup.state
        if state == "ready":
            self._admission.open()
            self._check_adapters()
            return
        self._admission.close()
        if state in ("failed", "stopped"):
            self._admission.fail_waiters(
                EngineUnavailable(f"the engine is {state}: {self._sup.reason}", None)
            )

    def _on_lost(self, reason: str) -> None:
        self._requests.end_all(ErrorCode.WORKER_DIED, reason, abort=False)
        if self._client is not None:
            self._client.fail_calls(reason)

    # -- control -------------------------------------------------------------------------

    async def worker_stats(self) -> dict[str, Any]:
        """The worker's counters (protocol WorkerCounters), as the JSON of `/stats`."""
        if self.state != "ready" or self._client is None:
            raise EngineUnavailable(f"no ready worker (engine {self.state}: {self.reason})", 1.0)
        try:
            reply = await self._client.call(ControlMethod.STATS, None, STATS_TIMEOUT)
        except ControlCallFailed as exc:
            raise EngineUnavailable(f"worker stats: {exc}", RETRY_AFTER) from None
        if reply.stats is None:
            raise EngineUnavailable("worker stats: the reply has no counters", RETRY_AFTER)
        counters: dict[str, Any] = msgspec.structs.asdict(reply.stats)
        return counters

    async def count_tokens(self, inputs: ChatInputs) -> int:
        """Prompt tokens of chat `inputs` (messages, tools, ...) as the worker would build them."""
        if self.state != "ready" or self._client is None:
            raise EngineUnavailable(f"no ready worker (engine {self.state}: {self.reason})", 1.0)
        try:
            reply = await self._client.call(
                ControlMethod.COUNT_TOKENS, inputs, COUNT_TOKENS_TIMEOUT
            )
        except ControlCallRejected as exc:
            raise WorkerRejected(str(exc)) from None
        except ControlCallFailed as exc:
            raise EngineUnavailable(f"count_tokens: {exc}", RETRY_AFTER) from None
        if reply.input_tokens is None:
            raise EngineUnavailable("count_tokens: the reply has no count", RETRY_AFTER)
        return reply.input_tokens

    async def tokenize(self, args: TokenizeArgs) -> tuple[list[int], list[str] | None]:
        """(token ids, their strings if asked) of a prompt or a chat, as the worker builds it."""
        reply = await self._worker_call(ControlMethod.TOKENIZE, tokenize=args)
        if reply.tokenized is None:
            raise EngineUnavailable("tokenize: the reply has no tokens", RETRY_AFTER)
        return reply.tokenized.tokens, reply.tokenized.token_strs

    async def detokenize(self, tokens: list[int]) -> str:
        """The text of token ids of the served text model."""
        reply = await self._worker_call(ControlMethod.DETOKENIZE, detokenize=DetokenizeArgs(tokens))
        if reply.text is None:
            raise EngineUnavailable("detokenize: the reply has no text", RETRY_AFTER)
        return reply.text

    async def change_adapter(self, name: str, path: str | None, replace: bool = False) -> None:
        """Loads the LoRA adapter at `path` as `name` (None: unloads `name`; `replace`: in place
        of a loaded one) on the worker, and remembers the adapters it serves after, for a
        restarted worker to load them again; WorkerRejected naming why it could not. Never
        during a swap (the adapters belong to the model being replaced)."""
        method = ControlMethod.LOAD_ADAPTER if path else ControlMethod.UNLOAD_ADAPTER
        args = AdapterArgs(name, path, replace)
        swaps = self._swaps_begun
        if self.state == "swapping":
            raise EngineUnavailable("the served model is being swapped", RETRY_AFTER)
        async with self._swap_lock:
            if self._swaps_begun != swaps:  # the model it was meant for is gone
                raise EngineUnavailable("the served model was swapped meanwhile", RETRY_AFTER)
            reply = await self._worker_call(method, ADAPTER_TIMEOUT, adapter=args)
        adapters = reply.adapters or []
        ready = self.ready_info
        if ready is not None and ready.text is not None:
            ready.text.adapters = adapters  # what /v1/models lists until the next Ready
        self._set_lora_modules(tuple((a.name, a.path) for a in adapters))

    def _check_adapters(self) -> None:
        """A ready worker serves the adapters it could load: the others are said once, in the
        log, and left out of what the next worker loads."""
        ready = self.ready_info
        if ready is None or ready.text is None or not self.config.lora_modules:
            return
        loaded = {a.name: a.path for a in ready.text.adapters or []}
        for name, path in self.config.lora_modules:
            if name not in loaded:
                log.error("the LoRA adapter %s (%s) is not served: the worker could not "
                          "load it (its log says why)", name, path)  # fmt: skip
        self._set_lora_modules(tuple(loaded.items()))

    def _set_lora_modules(self, modules: tuple[tuple[str, str], ...]) -> None:
        """The adapters a worker started from now on loads (its --lora flags)."""
        self.config = replace(self.config, lora_modules=modules)
        self._sup.config = self.config

    async def _worker_call(
        self, method: ControlMethod, timeout: float = COUNT_TOKENS_TIMEOUT, **args: Any
    ) -> ControlReply:
        if self.state != "ready" or self._client is None:
            raise EngineUnavailable(f"no ready worker (engine {self.state}: {self.reason})", 1.0)
        try:
            return await self._client.call(method, None, timeout, **args)
        except ControlCallRejected as exc:
            raise WorkerRejected(str(exc)) from None
        except ControlCallFailed as exc:
            raise EngineUnavailable(f"{method}: {exc}", RETRY_AFTER) from None

    async def swap(self, model_path: str, served_model_name: str | None = None) -> dict[str, Any]:
        """Serve `model_path` instead (as `served_model_name`, default: the directory name).
        Runs to completion even if the caller goes away; SwapFailed if the new model does not
        come up (`.restored` says whether the previous one serves again)."""
        self._raise_if_stopped()
        if self._client is None:
            raise EngineUnavailable("the engine has not been started", None)
        name = served_model_name or Path(model_path.rstrip("/")).name or model_path
        task = asyncio.create_task(self._swap(model_path, name), name=f"swap-{name}")
        self._swaps.add(task)
        task.add_done_callback(self._swaps.discard)
        task.add_done_callback(_log_swap_outcome)
        return await asyncio.shield(task)

    async def _swap(self, path: str, name: str) -> dict[str, Any]:
        async with self._swap_lock:
            self._raise_if_stopped()
            started = time.monotonic()
            previous = self.model_name
            before = self._sup.begin_swap(path, name)
            aborted = 0
            if not await self._requests.drain(self.config.drain_timeout):
                aborted = self._requests.end_all(
                    ErrorCode.SWAP,
                    f"the server is switching from model {previous} to {name}; retry the request",
                    abort=True,
                )
                log.warning("model swap: aborted %d requests after the drain timeout", aborted)
            self._swaps_begun += 1
            # The adapters were trained on the model being replaced: a swap drops them (also
            # one that fails and brings the previous model back).
            self._set_lora_modules(())
            await self._sup.finish_swap(path, name, restore=before != "failed")
            ready = self._sup.ready
            return {
                "model": name,
                "model_path": path,
                "previous_model": previous,
                "worker_pid": ready.pid if ready else None,
                "aborted_requests": aborted,
                "seconds": round(time.monotonic() - started, 3),
            }

    def _raise_if_stopped(self) -> None:
        if self.state == "stopped":
            raise EngineUnavailable("the engine is stopped", None)


def _short_tmp() -> str | None:
    """ipc:// paths must fit in sun_path (104 bytes on macOS, whose $TMPDIR is long)."""
    default = tempfile.gettempdir()
    return "/tmp" if len(default) > 40 and os.path.isdir("/tmp") else None


def _log_swap_outcome(task: asyncio.Task[dict[str, Any]]) -> None:
    # Retrieves the outcome even when the caller went away, so nothing is logged as unretrieved.
    if not task.cancelled() and task.exception() is not None:
        log.error("model swap failed: %s", task.exception())
