"""The speech formats: each really is its format, decodes back to the samples' rate and length
(exactly for lossless formats; lossy codecs add at most a few frames of priming and padding),
streamed or buffered."""

from __future__ import annotations

import io
import struct

import av
import numpy as np
import pytest
import soundfile

from gateway.audio.speech.encoding import (
    FORMATS,
    available_formats,
    encode,
    make_encoder,
    unsupported_reason,
    wav_header,
)

RATE = 24000
LOSSY_SLACK = 2560  # samples: encoder delay + padding to whole codec frames
MAGIC = {
    "wav": (b"RIFF",),
    "flac": (b"fLaC",),
    "opus": (b"OggS",),
    "mp3": (b"ID3", b"\xff"),  # an ID3 tag, or straight an MPEG frame sync
    "aac": (b"\xff",),  # an ADTS sync word
}


def tone(samples: int = RATE // 2 + 123) -> bytes:
    t = np.arange(samples)
    return (np.sin(t * 0.05) * 8000).astype("<i2").tobytes()


def decode(data: bytes) -> tuple[np.ndarray, int]:
    """Decoded int16 samples and their rate: Ogg Opus through libsndfile (it decodes at the
    rate the stream was made from; FFmpeg always decodes Opus at 48 kHz), the rest FFmpeg."""
    if data.startswith(b"OggS"):
        return soundfile.read(io.BytesIO(data), dtype="int16")
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        frames = [f.to_ndarray().reshape(-1) for f in container.decode(stream)]
        return np.concatenate(frames), stream.codec_context.sample_rate


def streamed(fmt: str, pcm: bytes, rate: int = RATE, piece: int = 2000) -> bytes:
    encoder = make_encoder(fmt, rate, streaming=True)
    parts = [encoder.feed(pcm[i : i + piece]) for i in range(0, len(pcm), piece)]
    return b"".join(parts) + encoder.finish()


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_lossless_formats_decode_to_the_same_samples(fmt):
    pcm = tone()
    samples, rate = soundfile.read(io.BytesIO(encode(fmt, pcm, RATE)), dtype="int16")
    assert rate == RATE
    assert samples.tobytes() == pcm


def test_pcm_is_the_samples_themselves():
    assert encode("pcm", tone(), RATE) == tone()


@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac"])
@pytest.mark.parametrize("mode", ["buffered", "streamed"])
def test_lossy_formats_decode_to_the_right_rate_and_length(fmt, mode):
    pcm = tone()
    data = encode(fmt, pcm, RATE) if mode == "buffered" else streamed(fmt, pcm)
    samples, rate = decode(data)
    assert rate == RATE
    assert 0 <= len(samples) - len(pcm) // 2 <= LOSSY_SLACK


@pytest.mark.parametrize("fmt", ["wav", "flac", "mp3", "opus", "aac"])
def test_every_format_starts_with_its_own_signature(fmt):
    assert encode(fmt, tone(), RATE).startswith(MAGIC[fmt])  # any of the alternatives


@pytest.mark.parametrize("fmt", ["wav", "flac"])
def test_streamed_lossless_files_decode_to_the_same_samples(fmt):
    pcm = tone()
    samples, rate = decode(streamed(fmt, pcm))
    assert rate == RATE
    assert samples.tobytes() == pcm


def test_streamed_wav_declares_an_unknown_length():
    head = streamed("wav", tone())[:44]
    assert struct.unpack("<I", head[4:8])[0] == 0xFFFFFFFF
    assert struct.unpack("<I", head[40:44])[0] == 0xFFFFFFFF


def test_buffered_wav_declares_its_exact_length():
    pcm = tone()
    head = encode("wav", pcm, RATE)[:44]
    assert head == wav_header(RATE, len(pcm))
    assert struct.unpack("<I", head[40:44])[0] == len(pcm)


def test_a_streamed_encoder_hands_out_bytes_before_the_end():
    encoder = make_encoder("mp3", RATE, streaming=True)
    early = b"".join(encoder.feed(tone(RATE)) for _ in range(3))
    assert early  # the client hears audio before the generation ends


def test_opus_refuses_a_rate_it_cannot_carry():
    reason = unsupported_reason("opus", 32000)
    assert reason is not None and "32000" in reason


def test_an_unknown_format_is_refused_with_the_list():
    reason = unsupported_reason("ogg", RATE)
    assert reason is not None and all(f in reason for f in FORMATS)


def test_every_format_is_available_at_24_khz():
    assert available_formats(RATE) == list(FORMATS)
