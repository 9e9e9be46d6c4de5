"""Transcription for the non-Whisper families (Qwen3-ASR, Parakeet, ...), one chunk at a time.

These models expose one `generate(audio, ...)` call that handles a whole recording. To let an
abort (or another engine's request) in between, `ChunkedRun` cuts long audio into chunks of
at most `CHUNK_SECONDS`, at the quietest point near each boundary, and runs `generate` on one
chunk per `advance()`; segment timestamps are shifted by the chunk's offset. Audio no longer
than one chunk is a single `generate` call on the whole file, so its text equals a direct
mlx-audio transcription.

Results come in two shapes: `STTOutput` (text, `segments` as dicts with start/end/text,
language) and Parakeet's `AlignedResult` (text, `sentences` with start/end/text and timed
tokens); both become protocol `Segment`s.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from protocol.messages import Segment

CHUNK_SECONDS = 30.0
SEARCH_SECONDS = 2.0  # how far before a chunk boundary to look for a quiet cut
_WINDOW_SECONDS = 0.1  # energy window when looking for the quiet point


def split_at_quiet_points(
    audio: np.ndarray, sample_rate: int, max_seconds: float = CHUNK_SECONDS
) -> list[tuple[int, int]]:
    """[start, end) sample ranges covering `audio`, each at most `max_seconds` long, cut at
    the lowest-energy 0.1 s within the last SEARCH_SECONDS of each chunk."""
    total = len(audio)
    limit = int(max_seconds * sample_rate)
    if total <= limit:
        return [(0, total)]
    window = max(1, int(_WINDOW_SECONDS * sample_rate))
    search = min(int(SEARCH_SECONDS * sample_rate), limit // 2)
    ranges, start = [], 0
    while total - start > limit:
        lo, hi = start + limit - search, start + limit
        region = audio[lo:hi].astype(np.float64) ** 2
        if len(region) > window:
            energy = np.convolve(region, np.ones(window) / window, mode="valid")
            cut = lo + int(np.argmin(energy)) + window // 2
        else:
            cut = hi
        ranges.append((start, cut))
        start = cut
    ranges.append((start, total))
    return ranges


class ChunkedRun:
    """One request's transcription with a non-Whisper model: one chunk per `advance()`."""

    def __init__(
        self,
        model: Any,
        audio: np.ndarray,
        sample_rate: int,
        generate_kwargs: dict[str, Any],
        language: str | None = None,
    ) -> None:
        self._model = model
        self._audio = audio
        self._sample_rate = sample_rate
        self._kwargs = generate_kwargs
        self._chunks = split_at_quiet_points(audio, sample_rate)
        self._next = 0
        self._texts: list[str] = []
        self._segments: list[Segment] = []
        self.language = language or ""
        self.completion_tokens = 0
        self.done = False

    def transcript(self) -> str:
        return " ".join(t for t in (t.strip() for t in self._texts) if t)

    def segments(self) -> list[Segment]:
        return list(self._segments)

    def advance(self) -> None:
        import mlx.core as mx

        start, end = self._chunks[self._next]
        self._next += 1
        offset = start / self._sample_rate
        chunk_end = end / self._sample_rate
        result = self._model.generate(mx.array(self._audio[start:end]), **self._kwargs)
        self._texts.append(str(getattr(result, "text", "") or ""))
        for start_s, end_s, text in _timed_pieces(result, chunk_end - offset):
            self._segments.append(
                Segment(
                    len(self._segments),
                    offset + start_s,
                    offset + end_s,
                    text,
                    seek=round(offset * 100),
                    temperature=float(self._kwargs.get("temperature") or 0.0),
                )
            )
        if not self.language:
            self.language = str(getattr(result, "language", "") or "")
        self.completion_tokens += _generated_tokens(result)
        if self._next == len(self._chunks):
            self.done = True
            self._audio = np.empty(0, dtype=np.float32)


def _timed_pieces(result: Any, duration: float) -> list[tuple[float, float, str]]:
    """(start, end, text) of each timed piece of one chunk's result, chunk-relative."""
    sentences = getattr(result, "sentences", None)
    if sentences:
        return [(float(s.start), float(s.end), str(s.text)) for s in sentences]
    pieces = []
    for segment in getattr(result, "segments", None) or []:
        if not isinstance(segment, dict):
            continue
        start, end = segment.get("start"), segment.get("end")
        pieces.append(
            (
                _number(start, 0.0),
                _number(end, duration),
                str(segment.get("text", "")),
            )
        )
    if not pieces:
        text = str(getattr(result, "text", "") or "")
        if text.strip():
            pieces.append((0.0, duration, text))
    return pieces


def _number(value: Any, default: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def _generated_tokens(result: Any) -> int:
    count = getattr(result, "generation_tokens", 0)
    if isinstance(count, int) and count > 0:
        return count
    sentences = getattr(result, "sentences", None) or []
    return sum(len(getattr(s, "tokens", []) or []) for s in sentences)
