"""PCM (mono, little-endian int16) -> the audio file formats /v1/audio/speech answers with.

Encoding lives in the gateway: the worker sends PCM deltas whatever the client asked for, and
the gateway turns them into the requested format as they arrive, off the MLX thread. Every
format is really encoded in that format:
- `pcm`: the raw samples; `wav`: a RIFF header, then the samples (streamed: with the
  "unknown length" sizes 0xFFFFFFFF that streaming players accept; buffered: exact sizes);
- `flac`, `mp3`, `opus` (in Ogg), `aac` (ADTS): FFmpeg's encoders through PyAV (the `av`
  package, part of the `tts` extra), fed incrementally, so a stream carries each encoded
  packet as soon as the encoder emits it.
A format whose encoder is missing, or that cannot carry the model's sample rate (Opus takes
8, 12, 16, 24 or 48 kHz; MP3 takes 8-48 kHz), is refused up front with a 400 naming
`response_format`; audio is never resampled behind the client's back.
"""

from __future__ import annotations

import struct
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
CONTENT_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",  # Opus in an Ogg container, as OpenAI sends it
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
# format -> (PyAV container format, codec name, sample rates the codec takes; None: any)
_AV_FORMATS: dict[str, tuple[str, str, frozenset[int] | None]] = {
    "mp3": (
        "mp3",
        "libmp3lame",
        frozenset({8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}),
    ),
    "opus": ("ogg", "libopus", frozenset({8000, 12000, 16000, 24000, 48000})),
    "aac": (
        "adts",
        "aac",
        frozenset(
            {8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000, 64000, 88200, 96000}
        ),
    ),
    "flac": ("flac", "flac", None),
}
_UNKNOWN_SIZE = 0xFFFFFFFF


class AudioEncoder(Protocol):
    def feed(self, pcm: bytes) -> bytes:
        """Encode more samples; returns the encoded bytes ready so far (maybe none)."""
        ...

    def finish(self) -> bytes:
        """Flush the encoder and close the file; returns the last bytes."""
        ...


def unsupported_reason(fmt: str, sample_rate: int) -> str | None:
    """Why `fmt` cannot be produced at `sample_rate` here; None when it can."""
    if fmt not in FORMATS:
        return f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}"
    if fmt not in _AV_FORMATS:
        return None
    _, codec, rates = _AV_FORMATS[fmt]
    if not _have_codec(codec):
        return f"{fmt} needs the {codec} encoder (pip install 'vllm-omni-mlx[tts]')"
    if rates is not None and sample_rate not in rates:
        listed = ", ".join(str(r) for r in sorted(rates))
        return f"{fmt} cannot carry this model's {sample_rate} Hz audio (it takes {listed} Hz)"
    return None


def available_formats(sample_rate: int) -> list[str]:
    return [f for f in FORMATS if unsupported_reason(f, sample_rate) is None]


def make_encoder(fmt: str, sample_rate: int, streaming: bool) -> AudioEncoder:
    """An incremental encoder. `streaming` picks headers that need no rewrite at the end
    (WAV's unknown sizes; FLAC without the final sample count), since a streamed response
    cannot go back; a buffered one gets exact headers."""
    if fmt == "pcm":
        return _Pcm()
    if fmt == "wav":
        return _StreamedWav(sample_rate) if streaming else _BufferedWav(sample_rate)
    container, codec, _ = _AV_FORMATS[fmt]
    return _AvEncoder(container, codec, sample_rate, seekable=not streaming)


def encode(fmt: str, pcm: bytes, sample_rate: int) -> bytes:
    """A whole buffered file."""
    encoder = make_encoder(fmt, sample_rate, streaming=False)
    return encoder.feed(pcm) + encoder.finish()


def wav_header(sample_rate: int, data_bytes: int) -> bytes:
    """The 44-byte header of a mono 16-bit PCM WAV file (sizes 0xFFFFFFFF: unknown)."""
    riff = _UNKNOWN_SIZE if data_bytes == _UNKNOWN_SIZE else 36 + data_bytes
    return (
        b"RIFF"
        + struct.pack("<I", riff)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16)
        + b"data"
        + struct.pack("<I", data_bytes)
    )


class _Pcm:
    def feed(self, pcm: bytes) -> bytes:
        return pcm

    def finish(self) -> bytes:
        return b""


class _StreamedWav:
    def __init__(self, sample_rate: int) -> None:
        self._header: bytes | None = wav_header(sample_rate, _UNKNOWN_SIZE)

    def feed(self, pcm: bytes) -> bytes:
        head, self._header = self._header or b"", None
        return head + pcm

    def finish(self) -> bytes:
        return self._header or b""  # an empty stream is still a (header-only) file


class _BufferedWav:
    def __init__(self, sample_rate: int) -> None:
        self._rate = sample_rate
        self._chunks: list[bytes] = []

    def feed(self, pcm: bytes) -> bytes:
        self._chunks.append(pcm)
        return b""

    def finish(self) -> bytes:
        data = b"".join(self._chunks)
        return wav_header(self._rate, len(data)) + data


class _Sink:
    """Where PyAV writes: collects bytes to hand out; seekable only for buffered files (so the
    muxer may go back and complete headers), never for streams."""

    def __init__(self, seekable: bool) -> None:
        self._buffer = bytearray()
        self._pos = 0
        if seekable:
            self.seek = self._seek  # PyAV seeks only when the object offers seek/tell
            self.tell = self._tell

    def write(self, data: Any) -> int:
        data = bytes(data)
        end = self._pos + len(data)
        if end > len(self._buffer):
            self._buffer.extend(b"\0" * (end - len(self._buffer)))
        self._buffer[self._pos : end] = data
        self._pos = end
        return len(data)

    def _seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: len(self._buffer)}[whence]
        self._pos = base + offset
        return self._pos

    def _tell(self) -> int:
        return self._pos

    def take(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        self._pos = 0
        return data

    def getvalue(self) -> bytes:
        return bytes(self._buffer)


class _AvEncoder:
    def __init__(self, container: str, codec: str, sample_rate: int, seekable: bool) -> None:
        import av

        self._seekable = seekable
        self._sink = _Sink(seekable)
        self._container = av.open(self._sink, mode="w", format=container)
        self._stream = self._container.add_stream(codec, rate=sample_rate, layout="mono")
        self._rate = sample_rate
        self._samples = 0
        self._av = av

    def feed(self, pcm: bytes) -> bytes:
        if pcm:
            samples = np.frombuffer(pcm, dtype="<i2").astype(np.int16).reshape(1, -1)
            frame = self._av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
            frame.sample_rate = self._rate
            frame.pts = self._samples
            frame.time_base = Fraction(1, self._rate)
            self._samples += samples.shape[1]
            self._mux(self._stream.encode(frame))
        return b"" if self._seekable else self._sink.take()

    def finish(self) -> bytes:
        self._mux(self._stream.encode(None))
        self._container.close()
        return self._sink.getvalue() if self._seekable else self._sink.take()

    def _mux(self, packets: list[Any]) -> None:
        for packet in packets:
            self._container.mux(packet)


_CODECS: dict[str, bool] = {}


def _have_codec(name: str) -> bool:
    if name not in _CODECS:
        try:
            import av

            av.codec.Codec(name, "w")
            _CODECS[name] = True
        except Exception:  # ImportError, or an FFmpeg build without this encoder
            _CODECS[name] = False
    return _CODECS[name]
