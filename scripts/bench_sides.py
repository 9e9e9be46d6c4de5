"""The contenders of `scripts/bench_compare.py`: servers started as child processes, and the
direct mlx-lm process (`scripts/bench_direct.py`), each under the same BLAS.

Every side is a process of its own started with the same environment (LD_PRELOAD of OpenBLAS
or not), and `blas_of` reads back from /proc which BLAS its MLX process really mapped.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

_CONSOLE_SCRIPT = Path(sys.executable).with_name("vllm-omni-mlx")
# The installed CLI, or (the source tree on PYTHONPATH, as scripts/gpu_bench.sh runs) its main.
OUR_CLI = (
    [str(_CONSOLE_SCRIPT)]
    if _CONSOLE_SCRIPT.exists()
    else [sys.executable, "-c", "from gateway.cli.main import main; main()"]
)
OPENBLAS = "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def side_env(blas: str, openblas_threads: int | None = None) -> dict[str, str]:
    """The environment of every side: OpenBLAS preloaded ("openblas") or the wheel's BLAS,
    and OPENBLAS_NUM_THREADS when given (unset: OpenBLAS starts a thread per core)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("LD_PRELOAD", None)
    env.pop("OPENBLAS_NUM_THREADS", None)
    if openblas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = str(openblas_threads)
    if blas == "openblas":
        if not os.path.exists(OPENBLAS):
            raise SystemExit(f"{OPENBLAS} is missing: apt-get install -y libopenblas0-pthread")
        env["LD_PRELOAD"] = OPENBLAS
    return env


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (Linux /proc), so a server's worker processes count too."""
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo += [int(child) for child in task.read_text().split()]
            except OSError:
                pass
    return pids


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time used so far by the processes `pids` (all their threads)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def blas_of(pid: int | None) -> str:
    """Which BLAS library process `pid` has mapped (Linux), as a short name."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except (OSError, TypeError):
        return "unknown"
    if "libopenblas" in maps:
        return "openblas"
    return "bundled reference BLAS" if "libblas" in maps else "unknown"


@dataclass
class ServerSide:
    """A server child process, its URL, the model id to send and the pid that runs MLX."""

    name: str
    command: list[str]
    log_path: Path
    model: str = "auto"
    health_path: str = "/v1/models"
    url: str = ""
    proc: subprocess.Popen | None = None
    mlx_pid: int | None = None
    preload_self: bool = True  # False: the server preloads BLAS into its worker itself

    def start(self, env: dict[str, str], port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        if not self.preload_self:
            env = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            self.command, stdout=self._log, stderr=subprocess.STDOUT, env=env
        )

    def wait_ready(self, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{tail}")
            try:
                response = httpx.get(self.url + self.health_path, timeout=5)
                if response.status_code == 200:
                    body = response.json() if self.health_path == "/health" else {}
                    self.mlx_pid = body.get("worker_pid", self.proc.pid)
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"{self.name} not ready after {timeout} s (log: {self.log_path})")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            self._log.close()


def ours(path: str, port: int, blas: str, log_dir: Path, max_num_seqs: int) -> ServerSide:
    command = [*OUR_CLI, "serve", path, "--port", str(port), "--log-level", "warning"]
    command += ["--max-num-seqs", str(max_num_seqs)]
    help_text = subprocess.run([*OUR_CLI, "serve", "--help"], capture_output=True, text=True).stdout
    has_blas_flag = "--blas" in help_text
    if has_blas_flag:  # then the gateway preloads OpenBLAS into the worker only, as users run it
        command += ["--blas", "openblas" if blas == "openblas" else "bundled"]
    side = ServerSide("ours", command, log_dir / "ours.log", health_path="/health")
    side.preload_self = not has_blas_flag
    return side


def mlx_lm_server(path: str, port: int, log_dir: Path) -> ServerSide:
    command = [sys.executable, "-m", "mlx_lm.server", "--model", path, "--port", str(port)]
    # "default_model" is mlx_lm.server's name for the --model it was started with.
    return ServerSide(
        "mlx_lm.server", command, log_dir / "mlx_lm_server.log", model="default_model"
    )


def vllm_mlx(binary: str, path: str, port: int, log_dir: Path) -> ServerSide:
    command = [binary, "serve", path, "--port", str(port), "--continuous-batching", "--offline"]
    return ServerSide("vllm-mlx", command, log_dir / "vllm_mlx.log")


class DirectSide:
    """The direct mlx-lm child process; `call` sends one command and returns its answer."""

    name = "direct"

    def __init__(self, path: str, env: dict[str, str], log_dir: Path) -> None:
        self._log = open(log_dir / "direct.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scripts.bench_direct", path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            text=True,
        )
        if json.loads(self.proc.stdout.readline() or "{}").get("ready") is not True:
            raise RuntimeError(f"direct mlx-lm did not start (log: {log_dir / 'direct.log'})")
        self.mlx_pid = self.proc.pid

    def call(self, op: str, **args: object) -> dict:
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("direct mlx-lm exited")
        return json.loads(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()
