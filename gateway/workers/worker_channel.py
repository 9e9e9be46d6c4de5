"""The gateway's end of the ZeroMQ socket pair: bind, send without blocking, receive, call.

For a local worker the gateway binds both endpoints once; successive workers connect to the
same addresses. For a worker on another host (`connect`) the gateway connects to the worker
host's two TCP endpoints instead, as a CURVE client (or plain, with --insecure); a monitor on
the sockets tells a refused handshake (a wrong key) from a host that is not there yet. The
PUSH socket has LINGER 0 and IMMEDIATE so nothing queues for a peer that is gone (a Submit
meant for a dead worker must not reach its successor) and every send is non-blocking: a send
to a dead worker fails at once instead of stalling the event loop. ControlCalls are matched
to their replies by call id; every other message goes to the `on_message` callback. Any
message at all refreshes `last_seen`, the supervisor's sign of life.

Receiving is a reader callback on the PULL socket's file descriptor that drains every frame
ready, not a `zmq.asyncio` recv future per frame: one loop wake-up per burst instead of a
future, a poller registration and a task switch per message (a streamed token is one
message, so this is the gateway's hottest path). ZeroMQ's descriptor is edge-triggered: it
signals that the socket's state changed, so each callback reads until a non-blocking receive
finds nothing, and a callback that stops early (a long burst) schedules the next one itself.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgpack
import zmq
import zmq.auth
from zmq.utils.monitor import recv_monitor_message

from protocol import Endpoints, Frame, ProtocolError, decode, encode
from protocol.inputs import ChatInputs
from protocol.launch.curve_keys import KeysError, gateway_keys
from protocol.messages import (
    PROTOCOL_VERSION,
    AdapterArgs,
    ControlCall,
    ControlMethod,
    ControlReply,
    DetokenizeArgs,
    Ready,
    Tag,
    TokenizeArgs,
)

log = logging.getLogger("gateway.workers.worker_channel")

SEND_RETRY_INTERVAL = 0.01
# Frames one reader callback handles before it lets other callbacks run (it then continues in
# a callback of its own): a long burst of worker messages must not starve the HTTP side.
DRAIN_BURST = 256


# ZeroMQ's heartbeats on a worker host's TCP connections (ms): a connection that answers none
# for HEARTBEAT_TIMEOUT_MS is closed and reconnected (a network drop).
HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS = 1000, 5000
_REFUSALS: dict[int, str] = {
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "this gateway's key is not one it accepts (CURVE)",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: (
        "the security handshake failed (a wrong server key, or only one side --insecure)"
    ),
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: (
        "the security handshake failed (a wrong server key, or only one side --insecure)"
    ),
}
_MONITORED = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
for _event in _REFUSALS:
    _MONITORED |= _event


@dataclass(frozen=True)
class CurveClientKeys:
    """The gateway's CURVE key pair and the worker host's public key (z85 bytes)."""

    public: bytes
    secret: bytes
    server_public: bytes

    @classmethod
    def load(cls, directory: str) -> CurveClientKeys:
        """From a keys directory (protocol/launch/curve_keys.py); KeysError if files are missing."""

        keys = gateway_keys(directory)
        public, secret = zmq.auth.load_certificate(str(keys.client_secret))
        server_public, _ = zmq.auth.load_certificate(str(keys.server_public))
        if secret is None:
            raise KeysError(f"{keys.client_secret} holds no secret key")
        return cls(public, secret, server_public)


class ControlCallFailed(Exception):
    """A ControlCall got no reply in time, an error reply, or its worker went away."""


class ControlCallRejected(ControlCallFailed):
    """The worker answered the ControlCall with an error (its message says why)."""


class WorkerClient:
    def __init__(self, endpoints: Endpoints, on_message: Callable[[Frame], None]) -> None:
        self.endpoints = endpoints
        self._on_message = on_message
        # The process's one context, never terminated: a per-client context would be
        # terminated by its finalizer when an unclosed client is collected, and in a garbage
        # cycle that finalizer can run before its sockets' own (the context's weak references
        # to them already cleared), so term() waits for sockets no one will close.
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        # Plain (synchronous) sockets. Every send is DONTWAIT, so it never blocks, and there is
        # no queue of pending send futures that could reorder or outlive a worker; frames are
        # read without blocking by `_drain` (see the module docstring).
        self._push: zmq.Socket[bytes] = self._ctx.socket(zmq.PUSH)
        self._pull: zmq.Socket[bytes] = self._ctx.socket(zmq.PULL)
        for sock in (self._push, self._pull):
            sock.setsockopt(zmq.LINGER, 0)
        self._push.setsockopt(zmq.IMMEDIATE, 1)
        self._calls: dict[int, asyncio.Future[ControlReply]] = {}
        self._call_ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None  # set while the reader is on
        self.last_seen = time.monotonic()
        self._monitors: list[zmq.Socket[bytes]] = []
        self._refused: str | None = None
        self.connected = False  # connect(): a handshake with the host succeeded

    def bind(self) -> None:
        self._push.bind(self.endpoints.to_worker)
        self._pull.bind(self.endpoints.from_worker)
        self._start_reader()

    def connect(self, curve: CurveClientKeys | None) -> None:
        """Connect to a worker host (CURVE client with `curve`, else plain TCP)."""
        for sock in (self._push, self._pull):
            sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
            sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
            sock.setsockopt(zmq.RECONNECT_IVL, 100)
            sock.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
            if "[" in self.endpoints.to_worker:  # tcp://[IPv6]:PORT
                sock.setsockopt(zmq.IPV6, 1)
            if curve is not None:
                sock.curve_publickey = curve.public
                sock.curve_secretkey = curve.secret
                sock.curve_serverkey = curve.server_public
            self._monitors.append(sock.get_monitor_socket(_MONITORED))
        self._push.connect(self.endpoints.to_worker)
        self._pull.connect(self.endpoints.from_worker)
        self._start_reader()

    def handshake_failure(self) -> str | None:
        """Why the host refused our handshake (connect() only), or None; reads the monitors."""
        for monitor in self._monitors:
            while True:
                try:
                    event = recv_monitor_message(monitor, zmq.NOBLOCK)
                except (zmq.Again, zmq.ZMQError):
                    break
                kind = int(event["event"])
                if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    self.connected, self._refused = True, None
                elif kind == zmq.EVENT_DISCONNECTED:
                    self.connected = False
                elif kind in _REFUSALS:
                    self._refused = _REFUSALS[kind]
        return self._refused

    def _start_reader(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._fd(), self._drain)
        # Frames that arrived before the reader was registered raised no edge: look now.
        self._loop.call_soon(self._drain)

    def _fd(self) -> int:
        """The pull socket's file descriptor, readable when frames may be waiting."""
        return int(self._pull.getsockopt(zmq.FD))

    def send_nowait(self, message: Frame) -> bool:
        """Send if a connected worker can take it now; False otherwise (the message is dropped)."""
        try:
            self._push.send(encode(message), zmq.DONTWAIT)
        except zmq.Again:
            return False
        except zmq.ZMQError as exc:  # closed socket during shutdown
            log.debug("send failed: %s", exc)
            return False
        return True

    async def send(self, message: Frame, timeout: float) -> bool:
        """Send, retrying while no worker is connected (e.g. the pipe of a worker that just sent
        READY is still being attached), for at most `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not self.send_nowait(message):
            if time.monotonic() >= deadline or self._push.closed:
                return False
            await asyncio.sleep(SEND_RETRY_INTERVAL)
        return True

    async def call(
        self,
        method: ControlMethod,
        chat: ChatInputs | None = None,
        timeout: float = 5.0,
        *,
        tokenize: TokenizeArgs | None = None,
        detokenize: DetokenizeArgs | None = None,
        adapter: AdapterArgs | None = None,
    ) -> ControlReply:
        """One ControlCall and its (ok) reply; ControlCallFailed on timeout,
        ControlCallRejected when the worker refused it."""
        call_id = next(self._call_ids)
        reply: asyncio.Future[ControlReply] = asyncio.get_running_loop().create_future()
        self._calls[call_id] = reply
        deadline = time.monotonic() + timeout
        message = ControlCall(call_id, method, chat, tokenize, detokenize, adapter)
        try:
            if not await self.send(message, timeout):
                raise ControlCallFailed(f"{method}: no worker to send it to")
            return await asyncio.wait_for(reply, max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise ControlCallFailed(f"{method}: no reply within {timeout:g} s") from None
        finally:
            self._calls.pop(call_id, None)

    def fail_calls(self, reason: str) -> None:
        """The worker is gone: no pending call will be answered."""
        for reply in self._calls.values():
            if not reply.done():
                reply.set_exception(ControlCallFailed(reason))
        self._calls.clear()

    async def close(self) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self._fd())
            self._loop = None
        self.fail_calls("the gateway is shutting down")
        for sock, monitor in zip((self._push, self._pull), self._monitors, strict=False):
            sock.disable_monitor()
            monitor.close(linger=0)
        self._push.close(linger=0)
        self._pull.close(linger=0)

    def _drain(self) -> None:
        """Handle every frame that is ready, up to DRAIN_BURST (then continue soon)."""
        loop = self._loop
        if loop is None:
            return
        for _ in range(DRAIN_BURST):
            try:
                frame = self._pull.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            except zmq.ZMQError as exc:  # closed socket during shutdown
                log.debug("receive failed: %s", exc)
                return
            self._handle(frame)
            if self._loop is None:  # a handler closed the client
                return
        loop.call_soon(self._drain)

    def _handle(self, frame: bytes) -> None:
        self.last_seen = time.monotonic()
        message: Frame | None
        try:
            message = decode(frame)
        except ProtocolError as exc:
            message = _foreign_ready(frame)
            if message is None:
                log.error("dropped an undecodable message from the worker: %s", exc)
                return
        try:
            if isinstance(message, ControlReply):
                self._resolve(message)
            else:
                self._on_message(message)
        except Exception:  # a handler bug must not stop the receiver: that would hang all
            log.exception("error while handling %s", type(message).__name__)

    def _resolve(self, reply: ControlReply) -> None:
        future = self._calls.get(reply.call_id)
        if future is None or future.done():
            return  # stale: its caller timed out, or a previous worker's reply
        if reply.ok:
            future.set_result(reply)
        else:
            future.set_exception(ControlCallRejected(reply.error or "the worker reported an error"))


def _foreign_ready(frame: bytes) -> Ready | None:
    """A READY of another protocol version may have another layout, yet its first field is
    still the version: read that much so the supervisor can refuse it by name."""
    try:
        raw = msgpack.unpackb(frame, raw=False, strict_map_key=False)
    except Exception:
        return None
    if not (isinstance(raw, list) and len(raw) >= 2 and raw[0] == Tag.READY):
        return None
    version, pid = raw[1], raw[2] if len(raw) > 2 else 0
    if not isinstance(version, int) or version == PROTOCOL_VERSION:
        return None
    # Since version 6 the pid is Ready's second field; an older worker's may be elsewhere.
    pid = pid if isinstance(pid, int) and not isinstance(pid, bool) else 0
    return Ready(protocol_version=version, pid=pid, model="", capabilities=[], max_num_seqs=0)
