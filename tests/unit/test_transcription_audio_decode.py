"""Decoding uploads in the worker: formats, resampling, and errors that name the problem."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.stt_audio import SENTENCES, encode, speech_wav, synthetic_voice, write_wav
from worker.runtime.errors import RequestError

pytest.importorskip("mlx_audio.audio_io")

from worker.transcription.audio_decode import decode_audio  # noqa: E402


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    return speech_wav(tmp_path_factory.mktemp("decode") / "speech.wav", SENTENCES[0])


def test_wav_is_resampled_to_the_model_rate(tmp_path):
    path = write_wav(tmp_path / "a.wav", synthetic_voice(2.0, rate=22050), 22050)
    samples = decode_audio(path.read_bytes(), "a.wav", 16000)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(len(samples) - 32000) <= 1


def test_decoded_samples_equal_mlx_audio_load_audio_of_the_file(speech):
    from mlx_audio.stt.utils import load_audio

    direct = np.array(load_audio(str(speech), sr=16000))
    assert np.array_equal(decode_audio(speech.read_bytes(), speech.name, 16000), direct)


@pytest.mark.parametrize(
    ("suffix", "codec"),
    [
        (".flac", ()),
        (".mp3", ()),
        (".ogg", ("-c:a", "libopus")),
        (".oga", ("-c:a", "libvorbis")),
        (".m4a", ("-c:a", "aac")),
        (".webm", ("-c:a", "libopus")),
    ],
)
def test_compressed_formats_decode_to_the_same_length(speech, tmp_path, suffix, codec):
    reference = decode_audio(speech.read_bytes(), speech.name, 16000)
    path = encode(speech, tmp_path / f"speech{suffix}", *codec)
    samples = decode_audio(path.read_bytes(), path.name, 16000)
    # Codec delay and padding (AAC, Opus) may add a few frames, never a second.
    assert abs(len(samples) - len(reference)) < 16000 // 10
    assert np.abs(samples).max() > 0.05


def test_format_comes_from_the_bytes_not_the_filename(speech):
    samples = decode_audio(speech.read_bytes(), "recording.mp3", 16000)
    assert len(samples) > 0


@pytest.mark.parametrize(
    ("data", "filename", "named"),
    [
        (b"", "empty.wav", "empty"),
        (b"just some text, not audio at all", "notes.txt", "not in a supported audio format"),
        (b"ID3" + b"\x00" * 64 + b"\x01\x02" * 100, "broken.mp3", "could not be decoded"),
        (b"OggS" + b"\x07" * 300, "broken.ogg", "could not be decoded"),
    ],
)
def test_undecodable_uploads_are_request_errors(data, filename, named):
    if filename.endswith(".ogg"):
        import shutil

        if not shutil.which("ffmpeg"):
            pytest.skip("ffmpeg is not installed")
    with pytest.raises(RequestError) as caught:
        decode_audio(data, filename, 16000)
    assert named in caught.value.message
    assert caught.value.message.startswith("`file`")
