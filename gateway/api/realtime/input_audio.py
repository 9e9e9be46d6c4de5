"""The input audio buffer: PCM16 at 24 kHz appended by the client, cut into turns by the
server VAD (or committed by hand), bounded.

Time is counted as OpenAI counts it: milliseconds of input audio since the session began
(`audio_start_ms` / `audio_end_ms`). With server VAD the buffer keeps, between turns, only the
last `prefix_padding_ms` (the start of speech is moved back by that much), so a session that
streams silence for hours holds almost nothing; a turn may last at most `MAX_BUFFER_MS`.
"""

from __future__ import annotations

from gateway.api.realtime.vad import Turn, TurnDetector
from gateway.api.realtime.wire import EventError

BYTES_PER_MS = 48  # 24 kHz, 16-bit mono
MAX_BUFFER_MS = 10 * 60 * 1000
MIN_COMMIT_MS = 100  # OpenAI's: a commit needs at least 100 ms of audio
# Kept between turns beyond the prefix padding: the VAD hears in 32 ms windows, so a turn can
# start up to a window before the end of the audio appended so far.
SLACK_MS = 100


class InputBuffer:
    def __init__(self, detector: TurnDetector | None) -> None:
        self.detector = detector
        self._audio = bytearray()
        self._start_ms = 0  # session time of _audio[0]
        self._heard_ms = 0.0  # session time of the buffer's end
        self.turn_start_ms: int | None = None  # where the VAD's turn in progress began

    @property
    def duration_ms(self) -> int:
        return len(self._audio) // BYTES_PER_MS

    @property
    def end_ms(self) -> int:
        return int(self._heard_ms)

    def append(self, pcm: bytes) -> list[Turn]:
        """Add audio; the VAD's turn events (a `stopped` turn's audio is then `take_turn`'s)."""
        if len(self._audio) + len(pcm) > MAX_BUFFER_MS * BYTES_PER_MS:
            raise EventError(
                f"the input audio buffer holds at most {MAX_BUFFER_MS // 60000} minutes: commit "
                "or clear it", "audio", "input_audio_buffer_full",
            )  # fmt: skip
        self._audio += pcm
        self._heard_ms += len(pcm) / BYTES_PER_MS
        if self.detector is None:
            return []
        turns = self.detector.feed(pcm)
        if not self.detector.speaking and not turns:
            padding = self.detector.rule.settings.prefix_padding_ms
            self._keep_from(self.end_ms - padding - SLACK_MS)
        return turns

    def _keep_from(self, ms: int) -> None:
        drop = max(0, ms - self._start_ms) * BYTES_PER_MS
        if drop:
            del self._audio[:drop]
            self._start_ms += drop // BYTES_PER_MS

    def _span(self, start_ms: int | None, end_ms: int | None) -> tuple[int, int]:
        """Offsets in ms into the buffer of `start_ms` (default: its start) and `end_ms`
        (default: its end), clipped to what it holds."""
        start = max(0, (start_ms if start_ms is not None else self._start_ms) - self._start_ms)
        end = (end_ms if end_ms is not None else self.end_ms) - self._start_ms
        return start, max(start, min(end, len(self._audio) // BYTES_PER_MS))

    def peek(self, start_ms: int | None = None, end_ms: int | None = None) -> bytes:
        """The audio from `start_ms` to `end_ms` (as `take`), left in the buffer."""
        start, end = self._span(start_ms, end_ms)
        return bytes(self._audio[start * BYTES_PER_MS : end * BYTES_PER_MS])

    def take(self, start_ms: int | None = None, end_ms: int | None = None) -> bytes:
        """The audio from `start_ms` (default: the buffer's start) to `end_ms` (default: its
        end), removed with everything before it."""
        start, end = self._span(start_ms, end_ms)
        audio = bytes(self._audio[start * BYTES_PER_MS : end * BYTES_PER_MS])
        del self._audio[: end * BYTES_PER_MS]
        self._start_ms += end
        return audio

    def commit(self) -> bytes:
        """All the buffered audio (a commit by hand); EventError under `MIN_COMMIT_MS`."""
        if self.duration_ms < MIN_COMMIT_MS:
            raise EventError(
                f"the input audio buffer holds {self.duration_ms} ms: a commit needs at least "
                f"{MIN_COMMIT_MS} ms of audio", None, "input_audio_buffer_commit_empty",
            )  # fmt: skip
        if self.detector is not None:
            self.detector.reset()
        return self.take()

    def clear(self) -> None:
        self.take()
        if self.detector is not None:
            self.detector.reset()
