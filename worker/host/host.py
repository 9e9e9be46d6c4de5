"""A worker host: one supervised worker on this machine, served to a gateway on another.

    gateway (connects, CURVE client)          worker host (binds, CURVE server)        worker
      PUSH --tcp://HOST:PORT----------------->  PULL  --relay-->  PUSH ipc://to-worker  --> PULL
      PULL <-tcp://HOST:PORT+1----------------  PUSH  <--relay--  PULL ipc://from-worker <-- PUSH

The host binds both TCP endpoints (so gateway and host each survive the other's restarts:
ZeroMQ reconnects) and both ipc endpoints of its worker, `python -m worker` with the flags it
was given. One thread polls the four sockets and relays frames unchanged; it decodes only the
frames tagged as host messages (and says `loading` every 0.5 s while its worker loads) (protocol/host.py): `start` (make sure a worker runs; say which
pid, and resend its READY if it has loaded), `stop` (SIGTERM, then SIGKILL). It reports each
exit of its worker (`exited`), and restarts a worker that crashed after it had loaded by
itself, with a backoff doubling per crash within `restart_window` up to
`restart_backoff_max`, telling the gateway (`started`, generation 0). A worker that exits 0
was shut down on purpose (the gateway's shutdown call, e.g. `models unload`), and one that
failed before its READY (the model does not load) would fail again: neither is restarted
until the next `start`.

A `start` names the pid of the worker the gateway gave up on (its heartbeats stopped: a
network drop, a hang); if that worker still runs it is replaced by a fresh one, so requests
the gateway has already failed do not go on running. Any other running worker is adopted.

Frames for a peer that is not there are dropped (non-blocking sends): a gateway that is gone
gets nothing queued for it, and the gateway's supervisor fails and retries what it needs.
ZeroMQ heartbeats on the TCP connections close a dead connection within seconds.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from protocol.codec import ProtocolError, decode, encode
from protocol.endpoints import BadAddress, Endpoints
from protocol.host import (
    LOADING_INTERVAL,
    HostAction,
    HostCommand,
    HostEvent,
    HostEventKind,
    HostTag,
    frame_tag,
)
from protocol.launch.curve_keys import HostKeys, KeysError, host_keys
from protocol.launch.python import python_module
from protocol.log_format import LOG_FORMATS, configure_logging
from protocol.messages import Tag

log = logging.getLogger("worker.host")

POLL_MS = 100
STOP_GRACE = 5.0  # a worker asked to stop is SIGKILLed after this
RESTART_BACKOFF = 0.5  # the first restart's delay; doubles per crash within the window
DRAIN_BURST = 256
# ZeroMQ's own heartbeats on the TCP connections (ms): a dead connection is closed after
# HEARTBEAT_TIMEOUT_MS without an answer, and the gateway reconnects.
HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS = 1000, 5000


def _short_tmp() -> str | None:
    default = tempfile.gettempdir()
    return "/tmp" if len(default) > 40 and os.path.isdir("/tmp") else None


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown"
        return f"was killed by signal {-code} ({name})"
    return f"exited with code {code}"


class WorkerHost:
    def __init__(
        self,
        listen: str,
        worker_args: list[str],
        keys: HostKeys | None,
        restart_backoff_max: float = 30.0,
        restart_window: float = 120.0,
    ) -> None:
        self.endpoints = Endpoints.tcp(listen)
        self.worker_args = worker_args
        self.keys = keys
        self.restart_backoff_max = restart_backoff_max
        self.restart_window = restart_window
        self.proc: subprocess.Popen | None = None
        self.ready_frame: bytes | None = None  # the running worker's READY, once it sent it
        self.adopted = False  # the gateway was told about the running worker (a `started`)
        self.stopping: tuple[int, float] | None = None  # (generation, SIGKILL time)
        self.pending_start: HostCommand | None = None  # after the stopping worker has gone
        self.idle = False  # stopped on purpose: no restart until a start
        self.restart_at: float | None = None
        self.crashes: deque[float] = deque()
        self._loading_sent = 0.0
        self._quit = False

    # -- sockets -------------------------------------------------------------------------

    def _open(self) -> None:
        self.ctx = zmq.Context()
        self.auth = None
        if self.keys is not None:
            self.auth = ThreadAuthenticator(self.ctx)
            self.auth.start()
            # Only gateways whose public key is in clients/ get in (ZAP, every connection).
            self.auth.configure_curve(domain="*", location=str(self.keys.clients))
            public, secret = zmq.auth.load_certificate(str(self.keys.server_secret))
        self.gw_in = self.ctx.socket(zmq.PULL)
        self.gw_out = self.ctx.socket(zmq.PUSH)
        for sock in (self.gw_in, self.gw_out):
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
            sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
            if "[" in self.endpoints.to_worker:
                sock.setsockopt(zmq.IPV6, 1)
            if self.keys is not None:
                sock.curve_server = True
                sock.curve_publickey = public
                sock.curve_secretkey = secret
        self.gw_in.bind(self.endpoints.to_worker)
        self.gw_out.bind(self.endpoints.from_worker)
        self.dir = tempfile.mkdtemp(prefix="vomlx-host-", dir=_short_tmp())
        self.local = Endpoints.ipc_in(self.dir)
        self.wk_out = self.ctx.socket(zmq.PUSH)
        self.wk_in = self.ctx.socket(zmq.PULL)
        for sock in (self.wk_out, self.wk_in):
            sock.setsockopt(zmq.LINGER, 0)
        self.wk_out.bind(self.local.to_worker)
        self.wk_in.bind(self.local.from_worker)
        self.poller = zmq.Poller()
        self.poller.register(self.gw_in, zmq.POLLIN)
        self.poller.register(self.wk_in, zmq.POLLIN)

    def _close(self) -> None:
        for sock in (self.gw_in, self.gw_out, self.wk_out, self.wk_in):
            sock.close(linger=0)
        if self.auth is not None:
            self.auth.stop()
        self.ctx.term()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _to_gateway(self, frame: bytes) -> None:
        try:
            self.gw_out.send(frame, zmq.DONTWAIT)
        except zmq.Again:
            pass  # no gateway connected (or it reads nothing): dropped

    def _event(self, kind: HostEventKind, generation: int, pid: int, detail: str = "") -> None:
        self._to_gateway(encode(HostEvent(kind, generation, pid, detail)))

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> int:
        self._open()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        log.info(
            "worker host listening on %s (and port + 1), %s",
            self.endpoints.to_worker,
            "CURVE" if self.keys else "plain TCP (--insecure)",
        )
        self._spawn()  # load the model now: the first request need not wait for it
        try:
            while not self._quit:
                ready = dict(self.poller.poll(POLL_MS))
                if self.gw_in in ready:
                    self._from_gateway()
                if self.wk_in in ready:
                    self._from_worker()
                self._check_worker()
        finally:
            self._shutdown()
            self._close()
        return 0

    def _on_signal(self, signum: int, _frame: object) -> None:
        self._quit = True

    def _from_gateway(self) -> None:
        for _ in range(DRAIN_BURST):
            try:
                frame = self.gw_in.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            if frame_tag(frame) == HostTag.HOST_COMMAND:
                try:
                    message = decode(frame)
                except ProtocolError as exc:
                    log.error("dropped a bad host command: %s", exc)
                    continue
                assert isinstance(message, HostCommand)
                self._command(message)
                continue
            try:
                self.wk_out.send(frame, zmq.DONTWAIT)
            except zmq.Again:
                pass  # no worker connected: the gateway fails what it sent

    def _from_worker(self) -> None:
        for _ in range(DRAIN_BURST):
            try:
                frame = self.wk_in.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            if frame_tag(frame) == Tag.READY:
                self.ready_frame = frame
            self._to_gateway(frame)

    def _command(self, command: HostCommand) -> None:
        log.info("gateway: %s (generation %d)", command.action, command.generation)
        if command.action == HostAction.STOP:
            self.idle, self.restart_at, self.pending_start = True, None, None
            if self.proc is None:
                self._event(HostEventKind.EXITED, command.generation, 0, "no worker was running")
            else:
                self._stop(command.generation)
            return
        # start
        self.idle, self.restart_at = False, None
        if self.stopping is not None:
            self.pending_start = command  # spawned once the stopping worker has gone
            return
        if self.proc is not None and command.replace_pid and self.proc.pid == command.replace_pid:
            log.info("replacing worker pid %d, which the gateway gave up on", self.proc.pid)
            self.pending_start = command
            self._stop(command.generation, report=False)
            return
        self._start(command)

    def _start(self, command: HostCommand) -> None:
        if self.proc is None and not self._spawn():
            self._event(HostEventKind.EXITED, command.generation, 0, "the host cannot start it")
            return
        assert self.proc is not None
        self.adopted = True
        self._event(HostEventKind.STARTED, command.generation, self.proc.pid)
        if self.ready_frame is not None:
            self._to_gateway(self.ready_frame)

    def _spawn(self) -> bool:
        argv = [
            *python_module("worker"),
            "--to-worker", self.local.to_worker,
            "--from-worker", self.local.from_worker,
            "--parent-pid", str(os.getpid()),
            *self.worker_args,
        ]  # fmt: skip
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            log.error("cannot start the worker: %s", exc)
            self.proc = None
            return False
        self.ready_frame, self.adopted = None, False
        log.info("started worker pid %d: %s", self.proc.pid, " ".join(argv))
        return True

    def _stop(self, generation: int, report: bool = True) -> None:
        assert self.proc is not None
        self.stopping = (generation if report else -1, time.monotonic() + STOP_GRACE)
        self.proc.terminate()

    def _check_worker(self) -> None:
        now = time.monotonic()
        proc = self.proc
        if proc is not None:
            code = proc.poll()
            if code is None:
                if self.stopping is not None and now >= self.stopping[1]:
                    log.warning("worker pid %d did not stop; killing it", proc.pid)
                    proc.kill()
                elif self.ready_frame is None and now - self._loading_sent >= LOADING_INTERVAL:
                    # The worker says nothing while it loads: keep the link from looking dead.
                    self._loading_sent = now
                    self._event(HostEventKind.LOADING, 0, proc.pid)
                return
            had_loaded = self.ready_frame is not None
            self.proc, self.ready_frame = None, None
            detail = describe_exit(code)
            stopping, self.stopping = self.stopping, None
            log.info("worker pid %d %s", proc.pid, detail)
            if stopping is None or stopping[0] >= 0:
                self._event(HostEventKind.EXITED, stopping[0] if stopping else 0, proc.pid, detail)
            if self.pending_start is not None:
                command, self.pending_start = self.pending_start, None
                self._start(command)
            elif stopping is None and code != 0 and had_loaded and not self.idle:
                self.restart_at = now + self._backoff(now)
                log.error("worker crashed (%s); restarting it", detail)
            elif stopping is None and code != 0:
                # It never loaded: restarting cannot help by itself; the gateway decides.
                log.error("worker %s before it loaded; waiting for a gateway's start", detail)
                self.idle = True
            elif stopping is None:
                self.idle = True  # shut down on purpose: wait for a start
        elif self.restart_at is not None and now >= self.restart_at:
            self.restart_at = None
            if self._spawn():
                assert self.proc is not None
                self._event(HostEventKind.STARTED, 0, self.proc.pid)
            else:
                self.restart_at = now + self._backoff(now)

    def _backoff(self, now: float) -> float:
        self.crashes.append(now)
        while self.crashes and now - self.crashes[0] > self.restart_window:
            self.crashes.popleft()
        return min(RESTART_BACKOFF * 2 ** (len(self.crashes) - 1), self.restart_backoff_max)

    def _shutdown(self) -> None:
        proc = self.proc
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._event(HostEventKind.EXITED, 0, proc.pid, "the worker host is shutting down")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m worker.host", description=__doc__)
    parser.add_argument("--listen", required=True, help="tcp://HOST:PORT (PORT + 1 too)")
    parser.add_argument("--keys", help="the host's CURVE keys (protocol/launch/curve_keys.py)")
    parser.add_argument("--insecure", action="store_true", help="plain TCP, no CURVE")
    parser.add_argument("--restart-backoff-max", type=float, default=30.0)
    parser.add_argument("--restart-window", type=float, default=120.0)
    parser.add_argument("--log-level", type=str.lower, default="info")
    parser.add_argument("--log-format", default="text", choices=LOG_FORMATS)
    parser.add_argument("worker_args", nargs=argparse.REMAINDER, help="-- then the worker's flags")
    args = parser.parse_args(argv)
    if args.worker_args[:1] == ["--"]:
        args.worker_args = args.worker_args[1:]
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    configure_logging(args.log_level, args.log_format, "host")
    if args.keys and args.insecure:
        sys.exit("error: --keys and --insecure do not go together")
    if not args.keys and not args.insecure:
        sys.exit("error: give --keys DIR (CURVE) or --insecure (plain TCP, no authentication)")
    try:
        keys = host_keys(args.keys) if args.keys else None
        host = WorkerHost(
            args.listen, args.worker_args, keys, args.restart_backoff_max, args.restart_window
        )
    except (KeysError, BadAddress) as exc:
        sys.exit(f"error: {exc}")
    try:
        code = host.run()
    except zmq.ZMQError as exc:
        sys.exit(f"error: cannot listen on {args.listen}: {exc}")
    sys.exit(code)
