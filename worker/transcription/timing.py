"""Segment times a client can rely on: inside the clip and never going backwards.

Whisper's timestamp tokens are predictions: a window can end past the audio's last sample (the
last window is padded to 30 s), and a random or confused model can emit a later segment that
starts before the one ahead of it, or a time that is not a number. SRT / VTT players and
OpenAI's verbose_json readers expect cues in order within the clip, so the terminal delta's
segments are put in that order here, where the exact duration is known.
"""

from __future__ import annotations

import math

from protocol.messages import Segment


def bounded_segments(segments: list[Segment], duration: float) -> list[Segment]:
    """`segments` with every start and end (words' too) in [0, duration], each start at or
    after the previous segment's start, each end at or after its start."""
    floor = 0.0
    for segment in segments:
        segment.start = _clamp(segment.start, floor, duration)
        segment.end = _clamp(segment.end, segment.start, duration)
        floor = segment.start
        for word in segment.words:
            if len(word) == 3:
                word[1] = _clamp(word[1], segment.start, segment.end)
                word[2] = _clamp(word[2], word[1], segment.end)
    return segments


def _clamp(value: float, low: float, high: float) -> float:
    if not isinstance(value, int | float) or not math.isfinite(value):
        return low
    return min(max(float(value), low), max(low, high))
