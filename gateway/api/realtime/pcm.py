"""PCM16 helpers of the realtime session: a committed turn as a WAV file for the speech
recognizer, and TTS audio at the API's 24 kHz."""

from __future__ import annotations

import io
import wave

import numpy as np

RATE = 24000


def wav_file(pcm: bytes, rate: int = RATE) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes(pcm)
    return out.getvalue()


def to_api_rate(pcm: bytes, rate: int) -> bytes:
    """PCM16 at `rate` -> at 24 kHz (linear interpolation; a TTS at 24 kHz passes as it is)."""
    if rate == RATE or not pcm:
        return pcm
    samples = np.frombuffer(pcm, "<i2").astype(np.float32)
    count = max(1, round(len(samples) * RATE / rate))
    positions = np.arange(count) * (rate / RATE)
    out = np.interp(positions, np.arange(len(samples)), samples)
    return np.clip(np.round(out), -32768, 32767).astype("<i2").tobytes()
