"""A turn's transcription: the speech recognizer's text pieces for its audio (`recognize`),
sent as the input-transcription events (`transcribe`), and begun early (`EarlyTranscript`).

The server VAD ends a turn only after `silence_duration_ms` of silence (500 ms by default), and
the speech recognizer then takes its own time (Whisper's encoder runs over a 30 s window
whatever the turn's length). Once a silence has lasted `EARLY_AFTER_MS` (200 ms; less when the
session's `silence_duration_ms` is shorter), the session starts recognizing the turn, from its
start to that moment: when the VAD then ends the turn, the transcript is that much closer to
done. The pause between two words is shorter than that, so a pass is not started (and its
recognition thrown away) at every dip of the speech probability; speech that resumes before
the turn ends cancels the pass (its worker request is aborted: a recognition the worker has
already begun runs to its end), and the next silence starts another.

The transcript is of the turn up to `EARLY_AFTER_MS` into its closing silence (`speech_cut_ms`:
a quiet last sound that the VAD already counted as silence is still heard), whether an early
pass heard it or a pass started at the stop; equal to `/v1/audio/transcriptions` on that audio.
The item's audio and `audio_end_ms` still run to the end of the silence, as OpenAI's do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from gateway.api.realtime.items import Item
from gateway.api.realtime.pcm import RATE, wav_file
from gateway.api.realtime.wire import EventError, as_event_error
from gateway.http import errors
from gateway.http.errors import APIError
from gateway.workers.errors import EngineUnavailable
from gateway.workers.protocol import EngineClient
from protocol.inputs import TranscribeInputs

Send = Callable[[dict[str, Any]], Awaitable[None]]
EARLY_AFTER_MS = 200  # how long a silence lasts before the turn is transcribed


def speech_cut_ms(silence_start_ms: int, silence_duration_ms: int) -> int:
    """Where a turn's transcribed audio ends: `EARLY_AFTER_MS` into the silence that began at
    `silence_start_ms` (at most the silence that ends a turn)."""
    return silence_start_ms + min(EARLY_AFTER_MS, silence_duration_ms)


async def recognize(engine: Callable[[], Awaitable[EngineClient]], audio: bytes,
                    settings: dict[str, Any]) -> AsyncIterator[str]:  # fmt: skip
    """The speech-recognition model's text pieces for a turn's PCM16 audio (`engine` finds
    the model's engine; its errors, like the model's, are raised from the iteration)."""
    client = await engine()
    ready = client.ready_info
    if ready is not None and ready.transcription is None:
        raise EventError("audio input needs a speech-recognition model: start the "
                         "server with `--transcription-model ASR`", None, "model_not_found")  # fmt: skip
    inputs = TranscribeInputs(
        audio=wav_file(audio), filename="turn.wav", language=settings.get("language"),
        prompt=settings.get("prompt"), timestamps=[],
    )  # fmt: skip
    async with client.request(inputs, True) as batches:
        async for batch in batches:
            for delta in batch:
                if delta.text:
                    yield delta.text
                if delta.finish_reason is not None:
                    error = errors.terminal_error(delta)
                    if error is not None:
                        raise error


async def transcribe(send: Send, item: Item, pieces: AsyncIterator[str], announce: bool) -> None:
    """Reads a user item's transcript from `pieces` into its audio part (then freed: the
    conversation keeps the text); with `announce`, as OpenAI's delta / completed events. A
    failure is the `failed` event and an empty transcript."""
    part = item.content[0]
    try:
        texts: list[str] = []
        async for text in pieces:
            texts.append(text)
            if announce:
                await send({
                    "type": "conversation.item.input_audio_transcription.delta",
                    "item_id": item.id, "content_index": 0, "delta": text,
                })  # fmt: skip
        part.text, part.transcribed = "".join(texts).strip(), True
        seconds = round(len(part.audio) / (2 * RATE), 3)  # pcm16 mono at RATE
        part.audio = b""  # heard: the conversation keeps the transcript
        if announce:
            await send({
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": item.id, "content_index": 0, "transcript": part.text,
                "usage": {"type": "duration", "seconds": seconds},
            })  # fmt: skip
    except (EventError, APIError, EngineUnavailable) as exc:
        error = as_event_error(exc)
        part.text, part.transcribed = "", True
        await send({
            "type": "conversation.item.input_audio_transcription.failed",
            "item_id": item.id, "content_index": 0,
            "error": {"type": error.kind, "code": error.code, "message": error.message,
                      "param": error.param},
        })  # fmt: skip


async def read_early(send: Send, item: Item, early: EarlyTranscript, announce: bool) -> None:
    """`transcribe` from an early pass, which ends with it (a cancelled reader cancels the
    pass too)."""
    try:
        await transcribe(send, item, early.pieces(), announce)
    finally:
        await early.cancel()


class EarlyTranscript:
    """The text pieces of one early pass, gathered while nobody reads them yet."""

    def __init__(self, speech_end_ms: int, settings: dict[str, Any],
                 pieces: AsyncIterator[str]) -> None:  # fmt: skip
        self.speech_end_ms = speech_end_ms
        self.settings = settings  # the session's transcription settings it was started with
        self._queue: asyncio.Queue[str | Exception | None] = asyncio.Queue()
        self._cancelled = False
        self.task = asyncio.ensure_future(self._gather(pieces))

    async def _gather(self, pieces: AsyncIterator[str]) -> None:
        try:
            async for piece in pieces:
                self._queue.put_nowait(piece)
        except Exception as exc:  # the recognizer's error: raised to the reader
            self._queue.put_nowait(exc)
        except BaseException:
            self._cancelled = True  # a reader must not take what came so far as the text
            raise
        finally:
            self._queue.put_nowait(None)

    def serves(self, speech_end_ms: int | None, settings: dict[str, Any]) -> bool:
        """Whether this pass heard the turn that ended with speech at `speech_end_ms`, with
        the settings the session has now."""
        return speech_end_ms == self.speech_end_ms and settings == self.settings

    async def pieces(self) -> AsyncIterator[str]:
        """The pass's text pieces, those gathered so far first; its error, raised."""
        while (piece := await self._queue.get()) is not None:
            if isinstance(piece, Exception):
                raise piece
            yield piece
        if self._cancelled:
            raise asyncio.CancelledError

    async def cancel(self) -> None:
        """Ends the pass and waits for it (its worker request aborted); a cancellation of the
        caller itself goes on to the caller."""
        self.task.cancel()
        await asyncio.wait({self.task})
