"""Uploaded audio bytes -> mono float32 samples at the model's rate, in the worker.

Decoding is mlx-audio's own reader (`mlx_audio.audio_io.read`): miniaudio for WAV, FLAC, MP3
and Vorbis, ffmpeg for M4A/AAC, Ogg/Opus, WebM, CAF and AIFF. It resamples to the rate asked
for, so the samples equal what `mlx_audio.stt.load_audio(path)` gives a direct caller of the
same file. The format comes from the file's first bytes; the upload's filename extension is
the fallback for containers the bytes alone do not name.

Every failure a client can cause (an empty, truncated or non-audio file, a format no decoder
handles) is a `RequestError` naming the problem: it fails the request, never the worker.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import PurePath

import numpy as np

from worker.runtime.errors import bad_request

# Extensions mlx-audio's reader decodes (miniaudio, or ffmpeg when it is installed).
KNOWN_EXTENSIONS = frozenset(
    "wav flac mp3 ogg oga opus vorbis m4a m4b mp4 aac webm caf aiff aif aifc".split()
)
# Extension aliases mlx-audio's reader does not know by these names.
_EXTENSION_ALIASES = {"oga": "ogg", "aif": "aiff"}
_REASON_LIMIT = 300


def decode_audio(data: bytes, filename: str, sample_rate: int) -> np.ndarray:
    """Mono float32 samples in [-1, 1] at `sample_rate`; RequestError when not decodable."""
    if not data:
        raise bad_request("`file` is empty: the upload holds no audio")
    try:
        samples = _read(data, _extension(filename), sample_rate)
    except _UnknownFormat:
        shown = f" ({filename!r})" if filename else ""
        raise bad_request(
            f"`file`{shown} is not in a supported audio format: the content is not "
            "WAV, FLAC, MP3, Ogg (Vorbis/Opus), M4A/AAC, WebM, CAF or AIFF"
        ) from None
    except Exception as exc:  # decoder failures: miniaudio.DecodeError, ffmpeg's RuntimeError
        raise bad_request(
            f"`file` could not be decoded as audio (corrupt or truncated?): {_reason(exc)}"
        ) from None
    samples = np.asarray(samples, dtype=np.float32).reshape(-1)
    if samples.size == 0:
        raise bad_request("`file` decodes to no audio samples")
    if not np.isfinite(samples).all():
        raise bad_request("`file` decodes to invalid (non-finite) samples")
    return samples


class _UnknownFormat(Exception):
    """Neither the bytes nor the filename name a format the reader knows."""


def _read(data: bytes, extension: str, sample_rate: int) -> np.ndarray:
    from mlx_audio.audio_io import read

    options = {"dtype": "float32", "sample_rate": sample_rate, "nchannels": 1}
    try:
        samples, _ = read(io.BytesIO(data), **options)
        return samples
    except ValueError as exc:
        if "detect audio format" not in str(exc):
            raise
    if extension not in KNOWN_EXTENSIONS:
        raise _UnknownFormat
    # The reader takes its fallback format from a path's extension, not from bytes.
    fd, path = tempfile.mkstemp(suffix="." + _EXTENSION_ALIASES.get(extension, extension))
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        samples, _ = read(path, **options)
        return samples
    finally:
        os.unlink(path)


def _extension(filename: str) -> str:
    return PurePath(filename or "").suffix.lstrip(".").lower()


def _reason(exc: BaseException) -> str:
    """The decoder's own words, on one line and short (ffmpeg's banner is not for clients)."""
    text = " ".join(str(exc).split()).rstrip(":") or type(exc).__name__
    return text if len(text) <= _REASON_LIMIT else text[: _REASON_LIMIT - 3] + "..."
