"""One transcription's life in the gateway: collect it, or stream it as OpenAI's SSE events.

The worker sends text deltas (one per audio window) and a terminal delta with the segments,
the language and usage. `collect` joins them into a `Transcript`. `stream` answers with
OpenAI's transcription events:

    data: {"type": "transcript.text.delta", "delta": "..."}          one per batch of text
    data: {"type": "transcript.text.done", "text": "...", "usage": {...}}

As for chat streams, the 200 is not sent before the worker accepted the request (decoded the
audio), so a file that is not audio is still an HTTP 400; after that, a failure is a
`data: {"error": ...}` event and `data: [DONE]`. A `DisconnectWatcher` covers the whole
request: the client going away aborts the worker's work between two audio windows.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from gateway import errors
from gateway.disconnect import ClientDisconnected, DisconnectWatcher
from gateway.sse import SSE_HEADERS, sse_data, sse_error
from gateway.transcription_formats import Transcript, token_usage
from gateway.transcription_request import TranscriptionRequest
from protocol.messages import Delta, Op, SamplingParams, Usage

log = logging.getLogger(__name__)

Batches = AsyncIterator[list[Delta]]
_HEADERS = [(k.encode(), v.encode()) for k, v in SSE_HEADERS.items()]


def _sampling(req: TranscriptionRequest) -> SamplingParams:
    # The engine reads everything from Submit.inputs; max_tokens has no meaning for audio.
    return SamplingParams(max_tokens=0, temperature=req.temperature)


def transcript_of(req: TranscriptionRequest, text: str, terminal: Delta) -> Transcript:
    usage = terminal.usage or Usage(0, 0)
    return Transcript(
        text=text,
        task=req.task,
        language=terminal.language or req.language or "",
        segments=list(terminal.segments),
        usage=usage,
        duration=float(usage.prompt_tokens),
    )


async def collect(request: Request, engine: Any, req: TranscriptionRequest) -> Transcript:
    """Run the transcription to its end; ClientDisconnected if the client leaves first."""
    watcher = DisconnectWatcher(request.receive)
    try:
        texts, terminal = await watcher.run(_collect(engine, req))
    finally:
        watcher.close()
    if terminal is None:
        raise errors.no_terminal("transcription")
    error = errors.terminal_error(terminal)
    if error is not None:
        raise error
    return transcript_of(req, "".join(texts), terminal)


async def _collect(engine: Any, req: TranscriptionRequest) -> tuple[list[str], Delta | None]:
    texts: list[str] = []
    async with engine.request(Op.TRANSCRIBE, req.inputs(), _sampling(req), False) as batches:
        async for batch in batches:
            for delta in batch:
                if delta.text:
                    texts.append(delta.text)
                if delta.finish_reason is not None:
                    return texts, delta
    return texts, None


async def stream(request: Request, engine: Any, req: TranscriptionRequest) -> Response:
    """Wait for the worker's first answer, then hand the open request to an SSE response."""
    watcher = DisconnectWatcher(request.receive)
    stack = AsyncExitStack()
    try:
        batches, first = await watcher.run(_open(engine, req, stack))
        terminal = next((d for d in first if d.finish_reason is not None), None)
        error = errors.terminal_error(terminal) if terminal is not None else None
        if error is not None:
            raise error
    except BaseException:
        await stack.aclose()
        watcher.close()
        raise
    return TranscriptEvents(stack, watcher, batches, first)


async def _open(
    engine: Any, req: TranscriptionRequest, stack: AsyncExitStack
) -> tuple[Batches, list[Delta]]:
    batches = await stack.enter_async_context(
        engine.request(Op.TRANSCRIBE, req.inputs(), _sampling(req), True)
    )
    iterator = batches.__aiter__()
    try:
        first = await iterator.__anext__()
    except StopAsyncIteration:
        await stack.aclose()
        raise errors.no_terminal("transcription") from None
    except BaseException:
        await stack.aclose()  # leaving the context before the terminal delta aborts the request
        raise
    return iterator, first


class TranscriptEvents(Response):
    """The SSE response of a streamed transcription; owns the open engine request."""

    def __init__(
        self,
        stack: AsyncExitStack,
        watcher: DisconnectWatcher,
        batches: Batches,
        first: list[Delta],
    ) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = list(_HEADERS)
        self._stack = stack
        self._watcher = watcher
        self._batches = batches
        self._first = first
        self._text: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._watcher.run(self._pump(send))
        except ClientDisconnected:
            pass
        finally:
            self._watcher.close()
            await self._stack.aclose()

    async def _pump(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        try:
            body, done = self._encode(self._first)
            await self._write(send, body)
            if not done:
                async for batch in self._batches:
                    body, done = self._encode(batch)
                    await self._write(send, body)
                    if done:
                        break
                else:
                    await self._write(send, sse_error(errors.no_terminal("transcription")))
        except Exception as exc:  # after the 200 went out, errors can only travel in-band
            await self._write(send, sse_error(errors.as_api_error(exc, log, "transcription")))
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    async def _write(send: Send, body: bytes) -> None:
        if body:
            await send({"type": "http.response.body", "body": body, "more_body": True})

    def _encode(self, batch: list[Delta]) -> tuple[bytes, bool]:
        """One write per batch: its text as one delta event, then the end if it ended."""
        text = "".join(d.text for d in batch)
        out = b""
        if text:
            self._text.append(text)
            out += sse_data({"type": "transcript.text.delta", "delta": text})
        terminal = next((d for d in batch if d.finish_reason is not None), None)
        if terminal is None:
            return out, False
        error = errors.terminal_error(terminal)
        if error is not None:
            return out + sse_error(error), True
        done = {
            "type": "transcript.text.done",
            "text": "".join(self._text),
            "usage": token_usage(terminal.usage or Usage(0, 0)),
        }
        return out + sse_data(done), True
