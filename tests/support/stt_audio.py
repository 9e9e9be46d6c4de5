"""Audio files for the speech-in tests: real speech from espeak-ng, other formats from ffmpeg.

Without espeak-ng (e.g. on a Mac without Homebrew's) `speech_wav` falls back to a synthetic
voice-like signal (harmonics under a syllable-rate envelope): the tiny random-weight Whisper
transcribes either, and the tests compare the server with a direct run on the same file.
Encoding to FLAC / MP3 / Ogg-Opus / M4A needs ffmpeg; those tests skip without it
(CI installs both: `apt-get install -y espeak-ng ffmpeg`).
"""

from __future__ import annotations

import shutil
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

SENTENCES = (
    "Hello world. This is a test of the speech recognition server.",
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Speech recognition turns spoken language into text, one window at a time.",
)


def write_wav(path: Path, samples: np.ndarray, rate: int = 16000) -> Path:
    """16-bit mono PCM WAV."""
    pcm = np.clip(np.round(samples * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm.tobytes())
    return path


def synthetic_voice(seconds: float, seed: int = 0, rate: int = 22050) -> np.ndarray:
    """A deterministic voice-like signal: a gliding pitch with harmonics, 4 syllables a second."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    pitch = 110 + 30 * np.sin(2 * np.pi * 0.7 * t + rng.uniform(0, 6))
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voice = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = np.clip(np.sin(2 * np.pi * 4 * t + rng.uniform(0, 6)), 0, None) ** 2
    return (0.3 * voice * envelope).astype(np.float32)


def speech_wav(path: Path, text: str, seed: int = 0) -> Path:
    """`text` spoken by espeak-ng (22.05 kHz WAV), or a synthetic voice without it."""
    if shutil.which("espeak-ng"):
        subprocess.run(["espeak-ng", "-w", str(path), text], check=True, capture_output=True)
        return path
    return write_wav(path, synthetic_voice(0.06 * len(text), seed), 22050)


def concat_wavs(path: Path, parts: list[Path], repeat: int = 1) -> Path:
    """The parts one after another (all must share a rate), `repeat` times."""
    frames, rate = [], 16000
    for _ in range(repeat):
        for part in parts:
            with wave.open(str(part), "rb") as src:
                rate = src.getframerate()
                frames.append(src.readframes(src.getnframes()))
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(frames))
    return path


def duration(path: Path) -> float:
    with wave.open(str(path), "rb") as src:
        return src.getnframes() / src.getframerate()


def encode(src: Path, dst: Path, *codec_args: str) -> Path:
    """`src` re-encoded by ffmpeg (the format from `dst`'s suffix); skips without ffmpeg."""
    if not shutil.which("ffmpeg"):
        pytest.skip("ffmpeg is not installed (apt-get install -y ffmpeg)")
    cmd = ["ffmpeg", "-v", "error", "-y", "-i", str(src), *codec_args, str(dst)]
    subprocess.run(cmd, check=True, capture_output=True)
    return dst
