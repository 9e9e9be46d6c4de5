"""The worker's two IO threads: the receiver (PULL socket) and the sender (PUSH socket).

They touch only bytes and Python objects, never MLX, so they keep working (stats replies,
heartbeats, aborts) while the MLX thread is busy in a long prefill or decode step. Each owns
one socket outright and closes it itself.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import zmq

from protocol import ProtocolError, decode, encode
from protocol.messages import (
    Abort,
    ControlCall,
    ControlMethod,
    ControlReply,
    Heartbeat,
    Message,
    Submit,
)
from worker.runtime.errors import RequestError, bad_request, internal
from worker.runtime.handoff import AdapterChange, Handoff, ShutdownRequest
from worker.runtime.stats import WorkerStats

if TYPE_CHECKING:
    from worker.text.token_counting import TokenizerCalls

log = logging.getLogger(__name__)

_POLL_MS = 100  # how often the receiver looks at its stop flag
_VERBS = {
    ControlMethod.COUNT_TOKENS: "count tokens",
    ControlMethod.TOKENIZE: "tokenize",
    ControlMethod.DETOKENIZE: "detokenize",
}


class Receiver(threading.Thread):
    """Reads gateway messages: Submits to the inbox, Aborts to the abort set, control calls."""

    def __init__(
        self,
        socket: zmq.Socket,
        handoff: Handoff,
        outbox: queue.SimpleQueue,
        stats: WorkerStats,
    ) -> None:
        super().__init__(name="worker-receiver", daemon=True)
        self._socket = socket
        self._handoff = handoff
        self._outbox = outbox
        self._stats = stats
        self._stopping = threading.Event()
        self._handlers: dict[type, Callable[[Any], None]] = {
            Submit: self._on_submit,
            Abort: self._on_abort,
            ControlCall: self._on_control,
        }
        self._controls: dict[ControlMethod, Callable[[ControlCall], None]] = {
            ControlMethod.STATS: self._control_stats,
            ControlMethod.SHUTDOWN: self._control_shutdown,
            ControlMethod.COUNT_TOKENS: self._control_tokenizer,
            ControlMethod.TOKENIZE: self._control_tokenizer,
            ControlMethod.DETOKENIZE: self._control_tokenizer,
            ControlMethod.LOAD_ADAPTER: self._control_adapter,
            ControlMethod.UNLOAD_ADAPTER: self._control_adapter,
        }
        # The text model's tokenizer calls; set once the model is loaded (token_counting.py).
        self._tokenizer: TokenizerCalls | None = None

    def set_tokenizer(self, calls: TokenizerCalls) -> None:
        self._tokenizer = calls

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                if self._socket.poll(_POLL_MS):
                    self._handle(self._socket.recv())
        except Exception:
            log.exception("receiver thread failed")
        finally:
            self._socket.close()

    def _handle(self, frame: bytes) -> None:
        try:
            message = decode(frame)
        except ProtocolError as exc:
            log.error("dropping a frame that is not a message: %s", exc)
            return
        handler = self._handlers.get(type(message))
        if handler is None:
            log.error("dropping a %s: not a gateway -> worker message", type(message).__name__)
            return
        try:
            handler(message)
        except Exception:  # a malformed message (e.g. wrong field types) must not stop reading
            log.exception("dropping a %s that could not be handled", type(message).__name__)

    def _on_submit(self, submit: Submit) -> None:
        self._handoff.inbox.put(submit)

    def _on_abort(self, abort: Abort) -> None:
        self._handoff.aborts.add(abort.request_ids)

    def _on_control(self, call: ControlCall) -> None:
        self._controls[call.method](call)  # every ControlMethod has one (decoding checked it)

    def _control_stats(self, call: ControlCall) -> None:
        self._outbox.put(ControlReply(call_id=call.call_id, ok=True, stats=self._stats.snapshot()))

    def _control_tokenizer(self, call: ControlCall) -> None:
        """count_tokens, tokenize, detokenize: answered here, with the tokenizer only."""
        try:
            reply = self._tokenizer_reply(call)
        except RequestError as exc:
            reply = ControlReply(call.call_id, ok=False, error=exc.message)
        except Exception as exc:  # every call gets a reply, or the gateway waits for it
            log.exception("%s failed", call.method)
            reply = ControlReply(call.call_id, ok=False, error=internal(exc).message)
        self._outbox.put(reply)

    def _tokenizer_reply(self, call: ControlCall) -> ControlReply:
        calls = self._tokenizer
        if calls is None:
            raise bad_request(f"this model does not {_VERBS[call.method]}")
        if call.method == ControlMethod.COUNT_TOKENS:
            if call.chat is None:
                raise bad_request("count_tokens needs the chat")
            return ControlReply(call.call_id, True, input_tokens=calls.count_tokens(call.chat))
        if call.method == ControlMethod.TOKENIZE:
            if call.tokenize is None:
                raise bad_request("tokenize needs its arguments")
            return ControlReply(call.call_id, True, tokenized=calls.tokenize(call.tokenize))
        if call.detokenize is None:
            raise bad_request("detokenize needs the token ids")
        return ControlReply(call.call_id, True, text=calls.detokenize(call.detokenize))

    def _control_adapter(self, call: ControlCall) -> None:
        """Adapters change the model's layers: the MLX thread applies it between steps."""
        args = call.adapter
        if args is None or (call.method == ControlMethod.LOAD_ADAPTER and not args.path):
            self._outbox.put(ControlReply(call.call_id, ok=False, error="no adapter named"))
            return
        path = args.path if call.method == ControlMethod.LOAD_ADAPTER else None
        self._handoff.inbox.put(AdapterChange(call.call_id, args.name, path, args.replace))

    def _control_shutdown(self, call: ControlCall) -> None:
        # The MLX thread aborts every request, replies and ends its loop; the flag also stops
        # a prefill in progress.
        self._handoff.shutdown.set()
        self._handoff.inbox.put(ShutdownRequest(call_id=call.call_id))


class _Close:
    """The sentinel that ends the sender after everything queued before it was sent."""


class Sender(threading.Thread):
    """Encodes and sends queued messages; sends a Heartbeat after `interval` s of silence."""

    def __init__(
        self,
        socket: zmq.Socket,
        outbox: queue.SimpleQueue,
        stats: WorkerStats,
        interval: float,
    ) -> None:
        super().__init__(name="worker-sender", daemon=True)
        self._socket = socket
        self._outbox = outbox
        self._stats = stats
        self._interval = interval
        # Off until READY went out: the gateway's first message from a worker is Ready or Fatal.
        self._heartbeats = threading.Event()

    def enable_heartbeats(self) -> None:
        self._heartbeats.set()

    def close(self, timeout: float) -> bool:
        """Sends what is queued, closes the socket (with linger); False if it did not finish."""
        self._outbox.put(_Close())
        self.join(timeout)
        return not self.is_alive()

    def run(self) -> None:
        last_sent = time.monotonic()
        try:
            while True:
                wait = max(0.0, last_sent + self._interval - time.monotonic())
                try:
                    message = self._outbox.get(timeout=wait)
                except queue.Empty:
                    if self._heartbeats.is_set():
                        active, waiting = self._stats.load()
                        self._send(Heartbeat(time=time.time(), active=active, waiting=waiting))
                    last_sent = time.monotonic()
                    continue
                if isinstance(message, _Close):
                    return
                self._send(message)
                last_sent = time.monotonic()
        except Exception:
            log.exception("sender thread failed")
        finally:
            self._socket.close()

    def _send(self, message: Message) -> None:
        try:
            frame = encode(message)
        except Exception:
            log.exception("cannot encode a %s; dropped", type(message).__name__)
            return
        self._socket.send(frame)
