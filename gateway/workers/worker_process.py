"""One worker OS process: its command line and environment; spawn it, forward its output to
the log, watch it exit, kill it.

The worker's stdout and stderr are merged into one pipe that a reader task forwards line by
line to the `worker` logger; the last lines are kept so a crash report in the log quotes them. The
worker runs in its own session so a Ctrl-C meant for the gateway does not kill it mid-request
(the gateway decides when it stops; the worker's parent watchdog covers a dead gateway).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections import deque
from collections.abc import Callable
from typing import Any

from gateway.config import ServerConfig
from gateway.workers.distributed_worker import distributed_worker_command, is_distributed
from gateway.workers.worker_handle import WorkerHandle
from protocol import Endpoints
from protocol.launch.blas import BlasUnavailable, blas_environment
from protocol.launch.python import python_module

log = logging.getLogger("gateway.worker")

# (config, model path, endpoints) -> argv; tests substitute a fake worker.
WorkerCommand = Callable[[ServerConfig, str, Endpoints], list[str]]

TAIL_LINES = 20
# A grandchild may keep the pipe open after the worker exits: do not wait for EOF forever.
PIPE_DRAIN_TIMEOUT = 1.0


# ServerConfig fields passed to the worker as `--field-name value` when they are set.
GENERATION_FLAGS = (
    "prefill_step_size", "prefill_interleave", "draft_model", "adapter_path", "num_draft_tokens",
    "speculative", "prompt_lookup_min", "prompt_lookup_max", "kv_bits", "kv_group_size",
    "quantized_kv_start", "max_kv_size", "dtype", "blas", "prefix_cache_bytes",
    "ssd_cache_dir", "ssd_cache_max_gb", "warm_prompts", "speech_model", "transcription_model",
    "reasoning_parser", "tool_call_parser", "chat_template", "vision_cache_entries",
    "talker_max_frames", "voice_cache_bytes", "embedding_model", "rerank_model", "max_embedding_inputs", "max_embedding_tokens",
    "embedding_batch_tokens", "image_model", "video_model",
)  # fmt: skip


def default_worker_command(
    config: ServerConfig, model_path: str, endpoints: Endpoints
) -> list[str]:
    """`python -m worker ...`; a distributed worker: that on every rank, via mlx.launch."""
    argv = [
        *python_module("worker"),
        "--model", model_path,
        "--to-worker", endpoints.to_worker,
        "--from-worker", endpoints.from_worker,
        "--parent-pid", str(os.getpid()),
        *worker_arguments(config, model_path)[2:],
    ]  # fmt: skip
    if is_distributed(config):
        return distributed_worker_command(config, argv)
    return argv


def worker_arguments(config: ServerConfig, model_path: str) -> list[str]:
    """The worker's flags but its sockets and parent (a worker host adds those: worker/host/)."""
    argv = [
        "--model", model_path,
        "--max-num-seqs", str(config.max_num_seqs),
        "--heartbeat-interval", str(config.heartbeat_interval),
        "--log-level", config.log_level,
        "--log-format", config.log_format,
    ]  # fmt: skip
    for name in GENERATION_FLAGS:
        value = getattr(config, name)
        if value is not None:
            argv += ["--" + name.replace("_", "-"), str(value)]
    for name, path in config.lora_modules:
        argv += ["--lora", f"{name}={path}"]
    argv += ["--max-loras", str(config.max_loras)]
    if config.omni:
        argv.append("--omni")
    if config.backend != "auto":  # the worker's own default: a worker without the flag works
        argv += ["--backend", config.backend]
    return argv


def worker_env(model_path: str, config: ServerConfig | None = None) -> dict[str, str]:
    """The worker's environment; with `config`, LD_PRELOAD carries OpenBLAS per `config.blas`
    (the dynamic loader reads it only when a process starts: see protocol/launch/blas.py)."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")  # its log lines reach ours as they happen
    if os.path.isdir(model_path):
        env["HF_HUB_OFFLINE"] = "1"  # a local checkpoint must never trigger a hub lookup
    if config is not None:
        try:
            env = blas_environment(config.blas, env)
        except BlasUnavailable as exc:  # the worker refuses to start and says why
            log.error("%s", exc)
    return env


class WorkerProcess(WorkerHandle):
    """A worker this gateway started as its child process; its output goes to the log."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.pid: int = proc.pid
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._reader = asyncio.create_task(self._forward_output(), name=f"worker-{self.pid}-log")
        self._exit = asyncio.create_task(self._wait_exit(), name=f"worker-{self.pid}-exit")

    @classmethod
    async def spawn(cls, argv: list[str], env: dict[str, str]) -> WorkerProcess:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        log.info("started worker pid %d: %s", proc.pid, " ".join(argv))
        return cls(proc)

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    @property
    def exited(self) -> asyncio.Task[int]:
        """Done once the process has exited and its output was read (or the read timed out)."""
        return self._exit

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def describe_exit(self) -> str:
        """'worker pid N exited with code 1' / '... was killed by signal 9 (SIGKILL)'.

        Short and safe to show anyone: the worker's output (tracebacks, file paths) is already
        in the log line by line, and `last_output()` quotes its end for a crash report there."""
        code = self._proc.returncode
        if code is None:
            what = "is still running"
        elif code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = "unknown"
            what = f"was killed by signal {-code} ({name})"
        else:
            what = f"exited with code {code}"
        return f"worker pid {self.pid} {what}"

    def _signal(self, sig: int) -> None:
        if self._proc.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    async def _forward_output(self) -> None:
        stream = self._proc.stdout
        assert stream is not None
        while True:
            try:
                raw = await stream.readline()
            except (ValueError, asyncio.LimitOverrunError):  # an over-long line: skip it
                continue
            if not raw:
                return
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                self.tail.append(line)
                # Never stamped with an HTTP request's id: a line's own says which request.
                extra = {"forwarded": _json_line(line), "request_id": ""}
                log.info("[worker %d] %s", self.pid, line, extra=extra)

    async def _wait_exit(self) -> int:
        code = await self._proc.wait()
        try:
            await asyncio.wait_for(asyncio.shield(self._reader), PIPE_DRAIN_TIMEOUT)
        except asyncio.TimeoutError:
            self._reader.cancel()
        log.info("worker pid %d exited (returncode %s)", self.pid, code)
        return code


def _json_line(line: str) -> dict[str, Any] | None:
    """A worker line that is a JSON object (--log-format json), to be written as it came."""
    if not line.startswith("{"):
        return None
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None
