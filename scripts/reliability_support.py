"""Shared pieces of the reliability scripts (scripts/reliability_*.py, docs/reliability.md).

`Server` runs the real `vllm-omni-mlx serve` on a free loopback port and always stops it
(SIGTERM, then SIGKILL); `rss_bytes` and `cpu_seconds` read a process's resident memory and
CPU time from /proc (Linux), or from psutil where /proc is missing and psutil is installed
(macOS); `MEASURE` says which, or why neither. `summary` gives min/median/max of timings.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

CLI = str(Path(sys.executable).with_name("vllm-omni-mlx"))
HOST = "127.0.0.1"

try:  # not a dependency: used only where /proc is missing
    import psutil
except ImportError:
    psutil = None

if Path("/proc/self/stat").exists():
    MEASURE = "/proc"
    TICKS = os.sysconf("SC_CLK_TCK")
    PAGE = os.sysconf("SC_PAGE_SIZE")
elif psutil is not None:
    MEASURE = "psutil"
else:
    MEASURE = None
NO_MEASURE = (
    "no /proc here (macOS?) and psutil is not installed (pip install psutil): "
    "process RSS and CPU are not measured, and their checks are skipped"
)


def default_model() -> str:
    """The tiny random-weight qwen3 the end-to-end tests serve (built once, cached)."""
    from worker.tiny_models import ensure_checkpoint

    return str(ensure_checkpoint("qwen3"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def rss_bytes(pid: int) -> int | None:
    """Resident memory of `pid`, or None (gone, or nothing to measure with)."""
    try:
        if MEASURE == "/proc":
            return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        if MEASURE == "psutil":
            return psutil.Process(pid).memory_info().rss
    except (OSError, ValueError):
        return None
    except Exception:  # psutil.NoSuchProcess and friends
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds `pid` used so far (all its threads), or None."""
    try:
        if MEASURE == "/proc":
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / TICKS
        if MEASURE == "psutil":
            times = psutil.Process(pid).cpu_times()
            return times.user + times.system
    except (OSError, ValueError):
        return None
    except Exception:
        return None
    return None


def cpu_fraction(pids: list[int], seconds: float) -> list[float | None]:
    """The share of one core each of `pids` used over the next `seconds` (0.0 = idle)."""
    before = [cpu_seconds(p) for p in pids]
    start = time.monotonic()
    time.sleep(seconds)
    after = [cpu_seconds(p) for p in pids]
    elapsed = time.monotonic() - start
    return [
        None if a is None or b is None else (a - b) / elapsed
        for b, a in zip(before, after, strict=True)
    ]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def summary(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"min": None, "median": None, "max": None}
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / 2**20:.1f} MiB"


class Server:
    """`vllm-omni-mlx serve MODEL` on a free 127.0.0.1 port; use it as a context manager."""

    def __init__(self, model: str, extra: list[str] = (), log_path: str | None = None):
        self.model = model
        self.name = Path(model).name if Path(model).exists() else model
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix="vomlx-reliability-", suffix=".log")
            os.close(fd)
        self.log_path = log_path
        self.cmd = [CLI, "serve", model, "--host", HOST, "--port", str(self.port), *extra]
        self.proc: subprocess.Popen | None = None
        self.worker_pids: set[int] = set()  # every worker seen: none may outlive stop()

    def __enter__(self) -> Server:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.cmd, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def health(self) -> tuple[int, dict]:
        r = httpx.get(f"{self.url}/health", timeout=5)
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, {}

    def wait_healthy(self, timeout: float = 180.0, not_pid: int | None = None) -> dict:
        """/health's body once it is 200 (with a worker other than `not_pid`, when given)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"server exited with {self.proc.returncode}; log: {self.log_path}"
                )
            try:
                code, body = self.health()
                if body.get("worker_pid"):
                    self.worker_pids.add(int(body["worker_pid"]))
                if code == 200 and body.get("worker_pid") not in (None, not_pid):
                    return body
                if body.get("status") == "failed":  # the supervisor gave up: waiting cannot help
                    raise RuntimeError(f"server failed: {body}; log: {self.log_path}")
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"server not healthy after {timeout:g} s; log: {self.log_path}")

    def stats(self) -> dict:
        r = httpx.get(f"{self.url}/v1/admin/stats", timeout=10)
        r.raise_for_status()
        return r.json()

    def wait_idle(self, timeout: float = 30.0) -> float | None:
        """Seconds until the worker reports nothing active or waiting; None past `timeout`."""
        start = time.monotonic()
        while time.monotonic() - start < timeout:
            try:
                s = self.stats()
                if s["active"] == 0 and s["waiting"] == 0:
                    return time.monotonic() - start
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        return None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        deadline = time.monotonic() + 5  # the worker exits with its parent; make sure of it
        for pid in self.worker_pids:
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if pid_alive(pid) and _is_worker(pid):
                os.kill(pid, signal.SIGKILL)


def _is_worker(pid: int) -> bool:
    """Whether `pid` is still one of our workers (not a reused pid), as far as we can tell."""
    try:
        return b"worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return MEASURE != "/proc"  # no /proc to ask: trust the pid we saw moments ago


def exit_on_sigterm() -> None:
    """SIGTERM to a script raises SystemExit, so its `with Server(...)` still stops the server."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
