"""A speech request's life in the gateway: the whole file, or its bytes / SSE events as the
worker produces PCM.

Streams follow gateway/http/streaming.py: the headers go out only once the worker accepted the
request, so a voice or input the model refuses is still an HTTP 400; after that, a failure ends
a raw audio stream by closing the connection before its last chunk (a client sees a truncated
transfer, never a file that looks whole), and an SSE stream with an error event.

Backpressure, so that a client reading slower than real time cannot grow memory without
bound: PCM waiting for a lagging reader is capped per request by its RequestStream (past the
cap the stream ends with an error and the worker is told to abort); a reader that stops reading
altogether blocks the response's writes, and a write that cannot complete within
`STALL_TIMEOUT` seconds cuts the client off and aborts the generation the same way. That is
why each audio delta is its own write: one write of a whole lagging batch could not drain
within the timeout even for a client that reads steadily.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import partial
from typing import Any

from starlette.requests import Request

from gateway.audio.speech.encoding import CONTENT_TYPES, make_encoder
from gateway.audio.speech.request import SpeechCall
from gateway.http import errors
from gateway.http.disconnect import DisconnectWatcher
from gateway.http.errors import APIError
from gateway.http.sse import SSE_COMMENT, sse_event
from gateway.http.streaming import (
    STALL_TIMEOUT,
    Ending,
    Opened,
    StreamedResponse,
    enter_one,
    keepalive_for,
    open_stream,
)
from gateway.workers.protocol import EngineClient
from protocol.messages import Delta, Usage


@dataclass(slots=True)
class Speech:
    pcm: bytes
    sample_rate: int
    usage: Usage


async def collect(request: Request, engine: EngineClient, call: SpeechCall) -> Speech:
    """Generate the whole speech; the client leaving cancels it (ClientDisconnected)."""
    watcher = DisconnectWatcher(request.receive)
    try:
        return await watcher.run(_collect(engine, call))
    finally:
        watcher.close()


async def _collect(engine: EngineClient, call: SpeechCall) -> Speech:
    chunks: list[bytes] = []
    rate = 0
    async with engine.request(call.inputs, False) as batches:
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


async def stream(
    request: Request, engine: EngineClient, call: SpeechCall, sample_rate: int
) -> StreamedResponse[list[Delta]]:
    """Wait until the worker accepted the request, then hand it to a streaming response."""
    enter = partial(enter_one, engine, call.inputs, what="speech")
    # SSE events can carry keepalives; raw audio bytes cannot (the headers wait for the start).
    keepalive = keepalive_for(request, SSE_COMMENT) if call.mode == "sse" else None
    return speech_response(await open_stream(request, enter, keepalive), call, sample_rate)


def speech_response(
    opened: Opened[list[Delta]],
    call: SpeechCall,
    sample_rate: int,
    stall_timeout: float = STALL_TIMEOUT,
) -> StreamedResponse[list[Delta]]:
    """The streamed response of an opened speech request: encoded audio bytes, or OpenAI's
    speech SSE events when `call.mode` is "sse"."""
    frames = _SpeechFrames(call, sample_rate)
    if frames.sse:
        return StreamedResponse(opened, frames.encode, _sse_error, "speech", None, stall_timeout)
    headers = {"content-type": CONTENT_TYPES[call.response_format], "cache-control": "no-cache"}
    return StreamedResponse(opened, frames.encode, None, "speech", headers, stall_timeout)


class _SpeechFrames:
    """Audio deltas -> one write each: encoded bytes, or a base64 `speech.audio.delta` event."""

    def __init__(self, call: SpeechCall, sample_rate: int) -> None:
        self.sse = call.mode == "sse"
        self._audio = make_encoder(call.response_format, sample_rate, True)

    def encode(self, batch: list[Delta]) -> tuple[list[bytes], Ending]:
        writes: list[bytes] = []
        for delta in batch:
            if delta.audio:
                writes.append(self._frame(self._audio.feed(delta.audio)))
            if delta.finish_reason is None:
                continue
            error = errors.terminal_error(delta)
            if error is not None:
                return writes, error
            writes.append(self._frame(self._audio.finish()))
            if self.sse:
                writes.append(sse_event("speech.audio.done", _done(delta)))
            return writes, True
        return writes, False

    def _frame(self, encoded: bytes) -> bytes:
        if not self.sse or not encoded:
            return encoded
        audio = base64.b64encode(encoded).decode()
        return sse_event("speech.audio.delta", {"type": "speech.audio.delta", "audio": audio})


def _sse_error(error: APIError) -> bytes:
    return sse_event("error", {"type": "error", **error.body()})


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
