"""Audio conversions at the speech engine's edges: model output -> PCM bytes, bytes -> reference.

PCM on the wire is little-endian int16, converted exactly as mlx-audio's own file writer
(`mlx_audio.audio_io.write`) converts float audio: clip to [-1, 1], scale by 32767, truncate.
A WAV file mlx-audio writes for the same audio therefore holds the same samples.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from worker.runtime.errors import bad_request

MAX_REFERENCE_SECONDS = 60.0
# Shorter clips are too short for the speaker encoders' windows (Qwen3-TTS's mel front end
# alone needs 1024 samples) and carry too little of a voice to clone.
MIN_REFERENCE_SECONDS = 0.5


def mono(audio: Any) -> Any:
    """Model audio as one channel: multi-channel output ([samples, channels], MOSS-TTS-Nano's
    stereo) is averaged in float32, since speech travels and is encoded as mono."""
    if getattr(audio, "ndim", 1) < 2:
        return audio
    return np.asarray(audio, dtype=np.float32).mean(axis=1)


def to_pcm16(audio: Any) -> bytes:
    """Float audio (an mx.array or numpy array in [-1, 1]) as little-endian int16 bytes."""
    samples = np.asarray(audio, dtype=np.float32).reshape(-1)
    return (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()


def decode_reference(data: bytes, sample_rate: int) -> Any:
    """Reference audio (any format mlx-audio reads: WAV, FLAC, MP3, OGG, ...) as a mono float32
    mx.array at `sample_rate`, read exactly as mlx-audio's `load_audio(path, sample_rate)` reads
    a file; a bad_request naming ref_audio when it is not usable audio, or is shorter than
    MIN_REFERENCE_SECONDS or longer than MAX_REFERENCE_SECONDS."""
    import mlx.core as mx
    from mlx_audio.audio_io import read

    if not data:
        raise bad_request("ref_audio is empty")
    try:
        samples, _ = read(
            io.BytesIO(data),
            dtype="float32",
            sample_rate=sample_rate,
            nchannels=1,
            # A little past the limit: enough to tell an over-long clip without decoding it all.
            duration=MAX_REFERENCE_SECONDS + 1.0,
        )
    except Exception as exc:  # every decoder failure means the same to the client
        raise bad_request(f"ref_audio could not be decoded as audio: {exc}") from None
    samples = np.asarray(samples, dtype=np.float32).reshape(-1)
    if samples.size == 0:
        raise bad_request("ref_audio holds no samples")
    seconds = samples.size / sample_rate
    if seconds > MAX_REFERENCE_SECONDS:
        raise bad_request(
            f"ref_audio is longer than {MAX_REFERENCE_SECONDS:g} s: send a shorter clip"
        )
    if seconds < MIN_REFERENCE_SECONDS:
        raise bad_request(
            f"ref_audio is {seconds:.2f} s long: a voice needs at least "
            f"{MIN_REFERENCE_SECONDS:g} s of reference audio"
        )
    if not np.isfinite(samples).all():
        raise bad_request("ref_audio holds samples that are not finite numbers")
    return mx.array(samples)
