"""The client tier's clients: installing them (pinned) and running them against a server.

The Node clients (Claude Code, Codex CLI, the openai and @anthropic-ai/sdk SDKs) are pinned
by tests/clients/package.json + package-lock.json and installed with `npm ci` into
tests/clients/node_modules; the Python clients (openai-agents, LiteLLM, LangChain, the `llm`
CLI) are pinned by tests/clients/requirements.txt and installed into a virtual environment of
their own (.cache/clients-venv), so their dependency pins never touch the server's venv. Both
installs are stamped with a hash of their pins and redone only when the pins change; a failed
one is not retried for half an hour (the tests skip with its reason); a lock file serializes
concurrent installers.

`python -m tests.support.clients` installs both (what `make clients` runs; it always exits 0,
since a client that cannot be installed makes its tests skip, saying why). The session
fixtures of tests/clients/conftest.py call the same functions, so running pytest directly
installs too.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.server import API_KEY, ServerProcess

ROOT = Path(__file__).resolve().parents[2]
CLIENTS_DIR = ROOT / "tests" / "clients"
DRIVERS_DIR = CLIENTS_DIR / "drivers"
NODE_DIR = CLIENTS_DIR  # package.json, package-lock.json, node_modules/
REQUIREMENTS = CLIENTS_DIR / "requirements.txt"
PYTHON_VENV = ROOT / ".cache" / "clients-venv"
STAMP = ".vomlx-installed"
# `make clients` may take its time; the test session's fixtures must leave room in the first
# test's timeout (300 s), and past it the tests skip rather than fail.
INSTALL_TIMEOUT = 900.0
FIXTURE_INSTALL_TIMEOUT = 200.0
RETRY_FAILED_AFTER = 1800.0  # seconds a failed install is not retried (same pins)


class NotInstalled(Exception):
    """A client package could not be installed; the message says why (the test skips)."""


@dataclass(frozen=True)
class NodeClients:
    node_modules: Path

    def bin(self, name: str) -> Path:
        return self.node_modules / ".bin" / name

    @property
    def node(self) -> str:
        node = shutil.which("node")
        if node is None:
            raise NotInstalled("node is not on PATH")
        return node


@dataclass(frozen=True)
class PythonClients:
    venv: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def bin(self, name: str) -> Path:
        return self.venv / "bin" / name


@dataclass(frozen=True)
class ClientServer:
    """The server the clients talk to: its process, checkpoint and served model id, and the
    embedding model served next to it (its id and checkpoint)."""

    process: ServerProcess
    checkpoint: Path
    model: str
    embedding_model: str = ""
    embedding_checkpoint: Path | None = None

    @property
    def url(self) -> str:
        return self.process.url

    @property
    def api_key(self) -> str:
        return self.process.api_key or API_KEY

    def driver_env(self) -> dict[str, str]:
        """What the drivers (tests/clients/drivers/) read the server from."""
        return {
            "VOMLX_URL": self.url, "VOMLX_API_KEY": self.api_key, "VOMLX_MODEL": self.model,
            "VOMLX_EMBEDDING_MODEL": self.embedding_model,
        }  # fmt: skip

    def log_tail(self, chars: int = 4000) -> str:
        return self.process.log()[-chars:]


def _digest(*paths: Path) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes())
    return h.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class _Installer:
    """One install (node or python): stamped by the digest of its pins when it succeeded,
    remembered with its reason for a while when it failed (so `make clients` failing does not
    make the test session wait for the same failure again), serialized by a lock file."""

    def __init__(self, name: str, stamp: Path, pins: Sequence[Path], timeout: float) -> None:
        self.name = name
        self.stamp = stamp
        self.digest = _digest(*pins)
        self.deadline = time.monotonic() + timeout
        self.memo = ROOT / ".cache" / f"clients-{name}.failed"

    def done(self) -> bool:
        return self.stamp.is_file() and self.stamp.read_text() == self.digest

    def check_memo(self) -> None:
        try:
            memo = json.loads(self.memo.read_text())
        except (OSError, ValueError):
            return
        age = time.time() - memo["time"]
        if memo["digest"] == self.digest and age < RETRY_FAILED_AFTER:
            raise NotInstalled(
                f"{memo['reason']}\n(that attempt was {age / 60:.0f} min ago; delete "
                f"{self.memo.relative_to(ROOT)} to retry now)"
            )

    @contextlib.contextmanager
    def attempt(self) -> Iterator[None]:
        with _locked(ROOT / ".cache" / f"clients-{self.name}.lock"):
            try:
                yield
            except NotInstalled as exc:
                record = {"digest": self.digest, "time": time.time(), "reason": str(exc)}
                self.memo.write_text(json.dumps(record))
                raise
            self.stamp.write_text(self.digest)
            self.memo.unlink(missing_ok=True)

    def run(self, cmd: Sequence[str | Path], cwd: Path, what: str) -> None:
        started = time.monotonic()
        shown = " ".join(map(str, cmd))
        try:
            done = subprocess.run(
                [str(c) for c in cmd],
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=max(1.0, self.deadline - started),
            )
        except subprocess.TimeoutExpired as exc:
            raise NotInstalled(f"{what}: `{shown}` ran past {exc.timeout:.0f}s") from None
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip()[-2000:]
            raise NotInstalled(f"{what}: `{shown}` failed:\n{tail}")
        print(f"{what}: installed in {time.monotonic() - started:.1f}s", file=sys.stderr)


def ensure_node_clients(timeout: float = INSTALL_TIMEOUT) -> NodeClients:
    """`npm ci` in tests/clients unless package.json + package-lock.json are installed."""
    clients = NodeClients(NODE_DIR / "node_modules")
    pins = [NODE_DIR / "package.json", NODE_DIR / "package-lock.json"]
    installer = _Installer("node", clients.node_modules / STAMP, pins, timeout)
    if installer.done():
        return clients
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise NotInstalled("the Node clients need node and npm on PATH")
    installer.check_memo()
    with installer.attempt():
        if installer.done():
            return clients
        installer.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], NODE_DIR, "npm")
        if not _answers_version(clients.bin("claude")):
            # npm left Claude Code's placeholder (its postinstall did not run: ignore-scripts,
            # an npm that asks before running scripts): the fallback it prints itself.
            setup = clients.node_modules / "@anthropic-ai" / "claude-code" / "install.cjs"
            installer.run([clients.node, setup], NODE_DIR, "claude code's native binary")
        if not _answers_version(clients.bin("opencode")):  # the same for OpenCode's binary
            setup = clients.node_modules / "opencode-ai" / "postinstall.mjs"
            installer.run([clients.node, setup], NODE_DIR / "node_modules" / "opencode-ai",
                          "opencode's native binary")  # fmt: skip
        for name in ("claude", "codex", "opencode"):
            if not _answers_version(clients.bin(name)):
                raise NotInstalled(f"{name} was installed but `{name} --version` fails")
    return clients


def _answers_version(program: Path) -> bool:
    try:
        done = subprocess.run([program, "--version"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def ensure_python_clients(timeout: float = INSTALL_TIMEOUT) -> PythonClients:
    """A venv with tests/clients/requirements.txt, rebuilt when the requirements change."""
    clients = PythonClients(PYTHON_VENV)
    installer = _Installer("python", PYTHON_VENV / STAMP, [REQUIREMENTS], timeout)
    if installer.done():
        return clients
    installer.check_memo()
    with installer.attempt():
        if installer.done():
            return clients
        shutil.rmtree(PYTHON_VENV, ignore_errors=True)
        installer.run([sys.executable, "-m", "venv", PYTHON_VENV], ROOT, "python venv")
        pip = [clients.python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        installer.run([*pip, "-r", REQUIREMENTS], ROOT, "python clients")
    return clients


def client_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a client process: PATH, locale, HOME in a temporary directory
    (so no user configuration is read or written) and `extra`; nothing else is inherited."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "NO_COLOR": "1",
    }
    # Proxies and certificates of this machine still apply (the clients only talk to
    # 127.0.0.1, but an installer or a telemetry ping would not otherwise fail fast).
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "SSL_CERT_FILE"):
        if name in os.environ:
            env[name] = os.environ[name]
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env.update(extra)
    return env


@dataclass(frozen=True)
class Finished:
    """A client process that ran to its end: its exit status and output."""

    cmd: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def describe(self) -> str:
        return (
            f"$ {' '.join(self.cmd)}\nexit {self.returncode} after {self.seconds:.1f}s\n"
            f"--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        )


def run_client(
    cmd: Sequence[str | Path],
    env: Mapping[str, str],
    cwd: Path,
    timeout: float = 180.0,
    stdin: str = "",
) -> Finished:
    """Runs a client to its end (killing it past `timeout`, reported as exit -9)."""
    argv = [str(c) for c in cmd]
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv,
            env=dict(env),
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        return Finished(argv, -9, out, err + f"\n(killed after {timeout}s)", timeout)
    return Finished(argv, done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def run_driver(
    cmd: Sequence[str | Path], server: ClientServer, home: Path, **env: str
) -> dict[str, dict]:
    """Runs a driver (tests/clients/drivers/: `cmd` is its interpreter and script) and returns
    the per-case results it prints as its last JSON line."""
    finished = run_client(cmd, client_env(home, **server.driver_env(), **env), DRIVERS_DIR)
    lines = [line for line in finished.stdout.splitlines() if line.startswith("{")]
    if finished.returncode != 0 or not lines:
        raise AssertionError(f"the driver did not report its cases:\n{finished.describe()}")
    return json.loads(lines[-1])


def case_result(results: Mapping[str, dict], case: str, server: ClientServer) -> dict:
    """One case of a driver's results; fails the test (with the server's log) if it raised."""
    result = results[case]
    if not result["ok"]:
        raise AssertionError(
            f"{case} raised:\n{result['error']}\n--- server log ---\n{server.log_tail()}"
        )
    return result


def main() -> int:
    for name, ensure in (("node", ensure_node_clients), ("python", ensure_python_clients)):
        try:
            where = ensure()
        except NotInstalled as exc:
            print(f"{name} clients not installed (their tests will skip): {exc}", file=sys.stderr)
        else:
            print(f"{name} clients: {where}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
