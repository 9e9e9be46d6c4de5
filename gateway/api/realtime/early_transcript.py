"""A turn's transcription begun where its closing silence began, before the VAD ends the turn.

The server VAD ends a turn only after `silence_duration_ms` of silence (500 ms by default), and
the speech recognizer then takes its own time (Whisper's encoder runs over a 30 s window
whatever the turn's length). The session starts recognizing the turn's speech, from its start
to where the silence began, as soon as that silence begins: when the VAD then ends the turn,
the transcript is that much closer to done. Speech that resumes before the turn ends cancels
the early pass (its worker request is aborted), and the next silence starts another.

The transcript is the speech's: the turn's audio up to where its closing silence began (the
item's audio and `audio_end_ms` still run to the end of the silence, as OpenAI's do), equal to
`/v1/audio/transcriptions` on that audio.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any


class EarlyTranscript:
    """The text pieces of one early pass, gathered while nobody reads them yet."""

    def __init__(self, speech_end_ms: int, settings: dict[str, Any],
                 pieces: AsyncIterator[str]) -> None:  # fmt: skip
        self.speech_end_ms = speech_end_ms
        self.settings = settings  # the session's transcription settings it was started with
        self._queue: asyncio.Queue[str | Exception | None] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._gather(pieces))

    async def _gather(self, pieces: AsyncIterator[str]) -> None:
        try:
            async for piece in pieces:
                self._queue.put_nowait(piece)
        except Exception as exc:  # the recognizer's error: raised to the reader
            self._queue.put_nowait(exc)
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

    async def cancel(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
