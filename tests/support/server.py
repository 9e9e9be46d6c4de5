"""Starts the real `vllm-omni-mlx serve` (gateway + worker processes) for end-to-end tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai

CLI = str(Path(sys.executable).with_name("vllm-omni-mlx"))
API_KEY = "test-key-0123456789"  # what the e2e servers require
ADMIN_KEY = "test-admin-key-9876543210"  # and what their admin routes require


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """One gateway process (which spawns its worker), its log file and its base URL."""

    def __init__(
        self,
        args: list[str],
        log_path: Path,
        api_key: str | None = None,
        admin_key: str | None = None,
        cwd: Path | None = None,
        client: httpx.Client | None = None,
        tls: bool = False,
    ):
        """`client` reaches the server where plain httpx cannot (a UNIX socket, a certificate
        of its own); `tls`: the server speaks HTTPS."""
        self.port = free_port()
        self.api_key = api_key
        self.admin_key = admin_key
        self.client = client
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.log_path = log_path
        cmd = [CLI, "serve", *args, "--port", str(self.port), "--log-level", "info"]
        if api_key:
            cmd += ["--api-key", api_key]
        if admin_key:
            cmd += ["--admin-key", admin_key]
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, cwd=cwd)

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    @property
    def admin_headers(self) -> dict[str, str]:
        """For /v1/admin/models/* (the admin key; the API key does not open them)."""
        return {"Authorization": f"Bearer {self.admin_key}"} if self.admin_key else {}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def health(self) -> httpx.Response:
        return (self.client or httpx).get(f"{self.url}/health", headers=self.headers, timeout=5)

    def wait_healthy(self, timeout: float = 180.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                r = self.health()
                if r.status_code == 200:
                    return r.json()
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"server not healthy after {timeout}s:\n{self.log()[-4000:]}")

    def worker_pid(self) -> int:
        return int(self.wait_healthy()["worker_pid"])

    def stats(self) -> dict:
        r = httpx.get(f"{self.url}/v1/admin/stats", headers=self.headers, timeout=10)
        r.raise_for_status()
        return r.json()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if self.client is not None:
            self.client.close()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# Sample-for-sample equality needs the same float arithmetic on both sides: the worker keeps
# the BLAS this test process has (--blas bundled) instead of preloading OpenBLAS.
SAME_BLAS = ("--blas", "bundled")


def openai_client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{server.url}/v1", api_key=server.api_key or "none", max_retries=0, timeout=120
    )


def model_name(path: str) -> str:
    """The served name of a checkpoint directory."""
    return Path(path).name
