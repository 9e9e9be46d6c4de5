"""One transcription's life in the gateway: collect it, or stream it as OpenAI's SSE events.

The worker sends text deltas (one per audio window) and a terminal delta with the segments,
the language and usage. `collect` joins them into a `Transcript`. `stream` answers with
OpenAI's transcription events:

    data: {"type": "transcript.text.delta", "delta": "..."}          one per batch of text
    data: {"type": "transcript.text.done", "text": "...", "usage": {...}}

Streams follow gateway/http/streaming.py: the 200 is not sent before the worker accepted the
request (decoded the audio), so a file that is not audio is still an HTTP 400; after that, a
failure is a `data: {"error": ...}` event and `data: [DONE]`. A `DisconnectWatcher` covers the
whole request: the client going away aborts the worker's work between two audio windows.
"""

from __future__ import annotations

from functools import partial

from starlette.requests import Request

from gateway.api.transcriptions.request import TranscriptionRequest
from gateway.audio.transcription.formats import Transcript, token_usage
from gateway.http import errors
from gateway.http.disconnect import DisconnectWatcher
from gateway.http.sse import SSE_COMMENT, sse_data, sse_error
from gateway.http.streaming import (
    Ending,
    StreamedResponse,
    enter_one,
    keepalive_for,
    open_stream,
)
from gateway.workers.protocol import EngineClient
from protocol.messages import Delta, Usage

WHAT = "transcription"


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


async def collect(request: Request, engine: EngineClient, req: TranscriptionRequest) -> Transcript:
    """Run the transcription to its end; ClientDisconnected if the client leaves first."""
    watcher = DisconnectWatcher(request.receive)
    try:
        texts, terminal = await watcher.run(_collect(engine, req))
    finally:
        watcher.close()
    if terminal is None:
        raise errors.no_terminal(WHAT)
    error = errors.terminal_error(terminal)
    if error is not None:
        raise error
    return transcript_of(req, "".join(texts), terminal)


async def _collect(
    engine: EngineClient, req: TranscriptionRequest
) -> tuple[list[str], Delta | None]:
    texts: list[str] = []
    async with engine.request(req.inputs(), False) as batches:
        async for batch in batches:
            for delta in batch:
                if delta.text:
                    texts.append(delta.text)
                if delta.finish_reason is not None:
                    return texts, delta
    return texts, None


async def stream(
    request: Request, engine: EngineClient, req: TranscriptionRequest
) -> StreamedResponse[list[Delta]]:
    """Wait for the worker's first answer, then hand the open request to an SSE response."""
    enter = partial(enter_one, engine, req.inputs(), what=WHAT)
    opened = await open_stream(request, enter, keepalive_for(request, SSE_COMMENT))
    return StreamedResponse(opened, _TranscriptEvents().encode, sse_error, WHAT)


class _TranscriptEvents:
    """A streamed transcription's batches -> one write each of OpenAI's events."""

    def __init__(self) -> None:
        self._text: list[str] = []

    def encode(self, batch: list[Delta]) -> tuple[list[bytes], Ending]:
        """Its text as one delta event, then the done event if it ended."""
        text = "".join(d.text for d in batch)
        out = b""
        if text:
            self._text.append(text)
            out += sse_data({"type": "transcript.text.delta", "delta": text})
        terminal = next((d for d in batch if d.finish_reason is not None), None)
        if terminal is None:
            return [out], False
        error = errors.terminal_error(terminal)
        if error is not None:
            return [out], error
        done = {
            "type": "transcript.text.done",
            "text": "".join(self._text),
            "usage": token_usage(terminal.usage or Usage(0, 0)),
        }
        return [out + sse_data(done)], True
