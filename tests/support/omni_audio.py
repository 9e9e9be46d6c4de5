"""Audio files for the audio-in chat tests: deterministic tones in WAV (any rate, mono or
stereo) and MP3 (PyAV's encoder, through the gateway's own `audio_encoding`; skips without it).
"""

from __future__ import annotations

import io
import wave

import numpy as np
import pytest


def tone(seed: int, seconds: float = 1.0, rate: int = 16000, channels: int = 1) -> np.ndarray:
    """A deterministic chord with a little noise, shape (frames, channels), in [-1, 1]."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    pitches = rng.uniform(110, 880, size=(3, channels))
    signal = sum(np.sin(2 * np.pi * p[None, :] * t[:, None]) for p in pitches) / 3
    noise = 0.05 * rng.standard_normal((t.size, channels))
    return (0.6 * signal + noise).clip(-1, 1).astype(np.float32)


def pcm16(samples: np.ndarray) -> bytes:
    return np.round(samples * 32767).astype("<i2").tobytes()


def wav_bytes(seed: int, seconds: float = 1.0, rate: int = 16000, channels: int = 1) -> bytes:
    """16-bit PCM WAV of `tone(...)`."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16(tone(seed, seconds, rate, channels)))
    return out.getvalue()


def mp3_bytes(seed: int, seconds: float = 1.0, rate: int = 24000) -> bytes:
    """Mono MP3 of `tone(...)`; skips the test when no MP3 encoder is installed."""
    from gateway.audio.speech.encoding import encode, unsupported_reason

    reason = unsupported_reason("mp3", rate)
    if reason is not None:
        pytest.skip(reason)
    return encode("mp3", pcm16(tone(seed, seconds, rate)), rate)
