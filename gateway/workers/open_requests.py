"""The requests a worker holds: admitted and not yet ended, each with its stream and slot.

A request leaves this table exactly once: when its terminal delta arrives (from the worker, or
made here because the worker died, the model is swapped or the server stops) or when its
reader leaves early, whichever comes first. Leaving gives back the admission slot; leaving
early also sends Abort. Deltas for request ids not in the table are stale and dropped.
`observer` (gateway/workers/observer.py) sees each delta of an open request and its end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from gateway.workers.admission import Admission
from gateway.workers.observer import NO_OBSERVER, EngineObserver
from gateway.workers.request_stream import RequestStream
from protocol.messages import Delta, ErrorCode, ErrorInfo, FinishReason, Step


class OpenRequests:
    def __init__(self, admission: Admission, send_abort: Callable[[list[str]], None]) -> None:
        self._admission = admission
        self._send_abort = send_abort
        self._streams: dict[str, RequestStream] = {}
        self._idle = asyncio.Event()
        self.observer: EngineObserver = NO_OBSERVER

    def __len__(self) -> int:
        return len(self._streams)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._streams

    def add(self, request_id: str) -> RequestStream:
        """Register a request that holds an admission slot."""
        stream = self._streams[request_id] = RequestStream(request_id)
        self._idle.clear()
        return stream

    def close(self, request_id: str) -> None:
        """The reader is done with it: if it is still running at the worker, abort it there."""
        stream = self._remove(request_id)
        if stream is not None:
            self._send_abort([request_id])
            # A stream that cut its reader off has its own terminal delta (slow_reader).
            self.observer.ended(request_id, stream.terminal, time.monotonic())

    def finish(self, delta: Delta) -> None:
        """Deliver a terminal delta and let the request go."""
        stream = self._remove(delta.request_id)
        if stream is not None:
            self.observer.ended(delta.request_id, delta, time.monotonic())
            stream.push(delta)

    def fail(self, request_id: str, code: ErrorCode, message: str) -> None:
        self.finish(error_delta(request_id, code, message))

    def end_all(self, code: ErrorCode, message: str, abort: bool) -> int:
        """End every open request with an error; `abort` also tells the worker to stop them."""
        request_ids = list(self._streams)
        if abort and request_ids:
            self._send_abort(request_ids)
        for request_id in request_ids:
            self.fail(request_id, code, message)
        return len(request_ids)

    def on_step(self, step: Step) -> None:
        now = time.monotonic()  # one arrival time for the worker iteration's deltas
        for delta in step.deltas:
            stream = self._streams.get(delta.request_id)
            if stream is None:
                continue  # stale: aborted, failed over, or from a previous worker
            if delta.finish_reason is None:
                self.observer.delta(delta, now)
                stream.push(delta)
                if stream.finished:  # it cut off a reader that fell too far behind
                    self.close(delta.request_id)
            else:
                self.finish(delta)

    async def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` for every open request to end; True if they all did."""
        if self._streams:
            try:
                await asyncio.wait_for(self._idle.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        return not self._streams

    def _remove(self, request_id: str) -> RequestStream | None:
        stream = self._streams.pop(request_id, None)
        if stream is not None:
            self._admission.release()
            if not self._streams:
                self._idle.set()
        return stream


def error_delta(request_id: str, code: ErrorCode, message: str) -> Delta:
    return Delta(request_id, finish_reason=FinishReason.ERROR, error=ErrorInfo(code, message))
