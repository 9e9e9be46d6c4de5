"""A speech request's life in the gateway: the whole file, or its bytes / SSE events as the
worker produces PCM.

As for text (gateway/generation.py), a stream's headers go out only once the worker accepted
the request, so a voice or input the model refuses is still an HTTP 400; after that, a failure
ends a raw audio stream by closing the connection before its last chunk (a client sees a
truncated transfer, never a file that looks whole), and an SSE stream with an error event.

Backpressure, so that a client reading slower than real time cannot grow memory without
bound: PCM waiting for a lagging reader is capped per request by its RequestStream (past the
cap the stream ends with an error and the worker is told to abort); a reader that stops reading
altogether blocks the response's writes, and a write that cannot complete within
`STALL_TIMEOUT` seconds cuts the client off and aborts the generation the same way.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway import errors
from gateway.audio_encoding import CONTENT_TYPES, AudioEncoder, make_encoder
from gateway.disconnect import ClientDisconnected, DisconnectWatcher
from gateway.speech_requests import SpeechCall
from gateway.sse import SSE_HEADERS, sse_event
from protocol.messages import Delta, SamplingParams, Usage

log = logging.getLogger(__name__)

STALL_TIMEOUT = 30.0  # seconds one write to the client may stay blocked


@dataclass(slots=True)
class Speech:
    pcm: bytes
    sample_rate: int
    usage: Usage


def _sampling(call: SpeechCall) -> SamplingParams:
    return SamplingParams(max_tokens=1, seed=call.seed)


async def collect(request: Request, engine: Any, call: SpeechCall) -> Speech:
    """Generate the whole speech; the client leaving cancels it (ClientDisconnected)."""
    watcher = DisconnectWatcher(request.receive)
    try:
        return await watcher.run(_collect(engine, call))
    finally:
        watcher.close()


async def _collect(engine: Any, call: SpeechCall) -> Speech:
    chunks: list[bytes] = []
    rate = 0
    async with engine.request(call.op, call.inputs, _sampling(call), False) as batches:
        async for batch in batches:
            for delta in batch:
                if delta.audio:
                    chunks.append(delta.audio)
                    rate = delta.sample_rate or rate
                if delta.finish_reason is not None:
                    error = errors.terminal_error(delta)
                    if error is not None:
                        raise error
                    return Speech(b"".join(chunks), rate, delta.usage or Usage(0, 0))
    raise errors.no_terminal("speech")


async def stream(request: Request, engine: Any, call: SpeechCall, sample_rate: int) -> Response:
    """Wait until the worker accepted the request, then hand it to a streaming response."""
    watcher = DisconnectWatcher(request.receive)
    stack = AsyncExitStack()
    try:
        batches, first = await watcher.run(_open(engine, call, stack))
        terminal = next((d for d in first if d.finish_reason is not None), None)
        error = errors.terminal_error(terminal) if terminal is not None else None
        if error is not None:
            raise error
    except BaseException:
        await stack.aclose()
        watcher.close()
        raise
    return SpeechStream(stack, watcher, batches, first, call, sample_rate)


async def _open(
    engine: Any, call: SpeechCall, stack: AsyncExitStack
) -> tuple[AsyncIterator[list[Delta]], list[Delta]]:
    batches = await stack.enter_async_context(
        engine.request(call.op, call.inputs, _sampling(call), True)
    )
    iterator = batches.__aiter__()
    try:
        first = await iterator.__anext__()
    except StopAsyncIteration:
        raise errors.no_terminal("speech") from None
    return iterator, first


class _CutOff(Exception):
    """The response cannot be completed: the connection is dropped before its end."""


class SpeechStream(Response):
    """Streams one speech request's audio as encoded bytes or as OpenAI speech SSE events."""

    def __init__(
        self,
        stack: AsyncExitStack,
        watcher: DisconnectWatcher,
        batches: AsyncIterator[list[Delta]],
        first: list[Delta],
        call: SpeechCall,
        sample_rate: int,
        stall_timeout: float | None = None,
    ) -> None:
        self.status_code = 200
        self.background = None
        self._sse = call.mode == "sse"
        headers = (
            dict(SSE_HEADERS)
            if self._sse
            else {
                "content-type": CONTENT_TYPES[call.response_format],
                "cache-control": "no-cache",
            }
        )
        self.raw_headers = [(k.encode(), v.encode()) for k, v in headers.items()]
        self._stack = stack
        self._watcher = watcher
        self._batches = batches
        self._first = first
        self._encoder: AudioEncoder = make_encoder(call.response_format, sample_rate, True)
        self._stall_timeout = STALL_TIMEOUT if stall_timeout is None else stall_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._watcher.run(self._pump(send))
        except (ClientDisconnected, _CutOff):
            pass  # leaving the request context below aborts the generation
        finally:
            self._watcher.close()
            await self._stack.aclose()

    async def _pump(self, send: Send) -> None:
        await self._send(
            send, {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
        )
        terminal = await self._audio(send)
        error = (
            errors.terminal_error(terminal)
            if terminal is not None
            else errors.no_terminal("speech")
        )
        if error is not None:
            log.warning("speech stream failed after it started: %s", error.message)
            if not self._sse:
                raise _CutOff()
            await self._body(send, sse_event("error", {"type": "error", **error.body()}))
        else:
            await self._write(send, self._encoder.finish())
            if self._sse:
                await self._body(send, sse_event("speech.audio.done", _done(terminal)))
        await self._send(send, {"type": "http.response.body", "body": b"", "more_body": False})

    async def _audio(self, send: Send) -> Delta | None:
        """Write audio as it arrives; the terminal delta, or None if the stream just ended."""
        batch: list[Delta] | None = self._first
        while batch is not None:
            for delta in batch:
                if delta.audio:
                    await self._write(send, self._encoder.feed(delta.audio))
                if delta.finish_reason is not None:
                    return delta
            batch = await anext(self._batches, None)
        return None

    async def _write(self, send: Send, encoded: bytes) -> None:
        if not encoded:
            return
        if self._sse:
            audio = base64.b64encode(encoded).decode()
            encoded = sse_event(
                "speech.audio.delta", {"type": "speech.audio.delta", "audio": audio}
            )
        await self._body(send, encoded)

    async def _body(self, send: Send, body: bytes) -> None:
        await self._send(send, {"type": "http.response.body", "body": body, "more_body": True})

    async def _send(self, send: Send, message: dict[str, Any]) -> None:
        try:
            await asyncio.wait_for(send(message), self._stall_timeout)
        except asyncio.TimeoutError:
            log.warning("speech client stopped reading for %.0f s: cut off", self._stall_timeout)
            raise _CutOff() from None


def _done(terminal: Delta) -> dict[str, Any]:
    usage = terminal.usage or Usage(0, 0)
    return {
        "type": "speech.audio.done",
        "usage": {
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        },
    }
