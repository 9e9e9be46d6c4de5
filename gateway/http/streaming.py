"""The life of a streamed HTTP response over open engine requests, shared by every streaming
endpoint (chat, completions, messages, responses, speech, transcriptions).

Why streaming errors need special care: once `http.response.start` went out, the status can no
longer change. So the headers wait until every engine request's first batch arrived (the
worker's "accepted" delta, or its error): whatever can fail early (a full queue, an engine that
is down, a prompt, voice or file the worker rejects) is still an HTTP status with the API's
error JSON. After that, a failure (a terminal error delta, deltas that stop without a terminal
one, an exception) can only travel in-band: as the API's own error event, after which the
stream ends; or, for a format without error events (raw audio), by dropping the connection
before its last chunk, so the client sees a truncated transfer, never a file that looks whole.

A stream never goes silent for long: with a `Keepalive`, every `interval` seconds without a
batch (a request waiting in the admission queue, a long prompt prefilling) writes the API's
keepalive (an SSE comment; Anthropic's `ping` event), so clients' idle timers and proxies keep
the connection. When even the first batch takes longer than one interval, the headers go out
then, with the first keepalive: an error after that point is an in-band event like any other.

Throughout, a `DisconnectWatcher` runs the work: the client leaving cancels it at once, which
leaves the engine request contexts and sends the worker its Abort, not when the next write
fails. With a `stall_timeout`, a write that stays blocked that long (a client that stopped
reading) cuts the client off and aborts the work the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Generic, TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from gateway.http import errors
from gateway.http.disconnect import ClientDisconnected, DisconnectWatcher
from gateway.http.errors import APIError
from gateway.http.sse import SSE_HEADERS
from gateway.workers.protocol import EngineClient
from protocol.inputs import Inputs
from protocol.messages import Delta

log = logging.getLogger(__name__)

# Seconds one write to a client may stay blocked, for the streams that pass it (the ones whose
# batches cannot be merged into less while a reader lags: audio, pictures).
STALL_TIMEOUT = 30.0

T = TypeVar("T")
B = TypeVar("B")  # one engine batch: list[Delta], or (choice index, Delta) pairs for n > 1

# How an encoded batch leaves the stream: False, still open; True, ended normally (its closing
# events are in the writes); an APIError, failed (the error event is the response's to add).
Ending = bool | APIError
# One batch -> the writes it makes (one each; empty ones are skipped) and how it ends.
EncodeBatch = Callable[[B], tuple[list[bytes], Ending]]
# A failure after the stream started -> the API's error event; None where the format has none.
EncodeError = Callable[[APIError], bytes] | None

_SSE_HEADERS = [(k.encode(), v.encode()) for k, v in SSE_HEADERS.items()]


@dataclass(frozen=True, slots=True)
class Keepalive:
    """What a stream writes after `interval` seconds without a batch, and again every
    `interval` seconds of silence: an SSE comment, or an API's own ping event."""

    interval: float
    data: bytes


Enter = Callable[[AsyncExitStack], Awaitable[tuple[AsyncIterator[B], B]]]


@dataclass(slots=True)
class Opened(Generic[B]):
    """Engine requests whose first batches arrived (or are still on their way, when they took
    longer than a keepalive interval: `starting`); the response closes all of it."""

    stack: AsyncExitStack  # the request contexts: leaving one before its terminal delta aborts it
    watcher: DisconnectWatcher
    batches: AsyncIterator[B] | None  # what comes after `first`
    first: B | None
    keepalive: Keepalive | None = None
    starting: asyncio.Future[tuple[AsyncIterator[B], B]] | None = None  # `enter`, still running


async def open_stream(
    request: Request, enter: Enter[B], keepalive: Keepalive | None = None
) -> Opened[B]:
    """Run `enter` (submit, then read the first batch, raising its error) while watching for a
    disconnect; on any failure close what it opened, so that the error is an HTTP status.
    With a keepalive, wait at most one interval: a later first batch is the response's to read
    (`Opened.starting`), after its headers and keepalives."""
    watcher = DisconnectWatcher(request.receive)
    stack = AsyncExitStack()
    work = asyncio.ensure_future(watcher.run(enter(stack)))
    try:
        if keepalive is not None:
            await asyncio.wait({work}, timeout=keepalive.interval)
            if not work.done():
                return Opened(stack, watcher, None, None, keepalive, starting=work)
        batches, first = await work
    except BaseException:
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        await stack.aclose()
        watcher.close()
        raise
    return Opened(stack, watcher, batches, first, keepalive)


def keepalive_for(request: Request, data: bytes) -> Keepalive | None:
    """The server's keepalive interval (`--sse-keepalive`; 0: none) with the API's bytes."""
    interval = request.app.state.config.sse_keepalive
    return Keepalive(interval, data) if interval > 0 else None


async def enter_one(
    engine: EngineClient, inputs: Inputs, stack: AsyncExitStack, what: str
) -> tuple[AsyncIterator[list[Delta]], list[Delta]]:
    """Submit one streamed request into `stack` and read its first batch (see `open_stream`)."""
    batches = await stack.enter_async_context(engine.request(inputs, True))
    iterator = batches.__aiter__()
    try:
        first = await iterator.__anext__()
    except StopAsyncIteration:
        raise errors.no_terminal(what) from None
    raise_early_error(first)
    return iterator, first


def raise_early_error(deltas: Iterable[Delta]) -> None:
    """Raise the error of a terminal delta that arrived before the response started."""
    for delta in deltas:
        if delta.finish_reason is not None:
            error = errors.terminal_error(delta)
            if error is not None:
                raise error


class _CutOff(Exception):
    """The response cannot be completed: the connection is dropped before its end."""


class StreamedResponse(Response, Generic[B]):
    """Writes an opened stream batch by batch, owning its engine requests until the terminal
    deltas, a failure or a disconnect.

    `what` names the stream in errors ("The {what} ended without a result") and logs.
    """

    def __init__(
        self,
        opened: Opened[B],
        encode: EncodeBatch[B],
        error: EncodeError,
        what: str,
        headers: Mapping[str, str] | None = None,
        stall_timeout: float | None = None,
    ) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = (
            list(_SSE_HEADERS)
            if headers is None
            else [(k.encode(), v.encode()) for k, v in headers.items()]
        )
        self._opened = opened
        self._encode = encode
        self._error = error
        self._what = what
        self._stall_timeout = stall_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        opened = self._opened
        try:
            await opened.watcher.run(self._pump(send))
        except (ClientDisconnected, _CutOff):
            pass  # leaving the request contexts below aborts what the worker still runs
        finally:
            opened.watcher.close()
            await opened.stack.aclose()

    async def _pump(self, send: Send) -> None:
        start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        await self._send(send, start)
        opened = self._opened
        try:
            if opened.starting is not None:
                opened.batches, opened.first = await self._wait(send, opened.starting)
            assert opened.batches is not None and opened.first is not None
            writes, ending = self._encode(opened.first)
            while ending is False:
                await self._write(send, writes)
                batch = await self._wait(send, anext(opened.batches, None))
                if batch is None:
                    writes, ending = [], errors.no_terminal(self._what)
                else:
                    writes, ending = self._encode(batch)
        except (_CutOff, ClientDisconnected):
            raise
        except Exception as exc:  # after the 200 went out, errors can only travel in-band
            writes, ending = [], errors.as_api_error(exc, log, self._what)
        if isinstance(ending, APIError):
            log.warning("%s stream failed after it started: %s", self._what, ending.message)
            if self._error is None:
                await self._write(send, writes)
                raise _CutOff()
            event = self._error(ending)
            writes = [*writes[:-1], writes[-1] + event] if writes else [event]
        await self._write(send, writes)
        await self._send(send, {"type": "http.response.body", "body": b"", "more_body": False})

    async def _wait(self, send: Send, work: Awaitable[T]) -> T:
        """Await `work`, writing the keepalive at every interval it takes."""
        keepalive = self._opened.keepalive
        if keepalive is None:
            return await work
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=keepalive.interval)
                if done:
                    return task.result()
                await self._write(send, [keepalive.data])
        except BaseException:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise

    async def _write(self, send: Send, writes: list[bytes]) -> None:
        for body in writes:
            if body:
                await self._send(
                    send, {"type": "http.response.body", "body": body, "more_body": True}
                )

    async def _send(self, send: Send, message: Message) -> None:
        if self._stall_timeout is None:
            await send(message)
            return
        try:
            await asyncio.wait_for(send(message), self._stall_timeout)
        except asyncio.TimeoutError:
            log.warning(
                "%s client stopped reading for %.0f s: cut off", self._what, self._stall_timeout
            )
            raise _CutOff() from None
