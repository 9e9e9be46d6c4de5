"""`vllm-omni-mlx tts`: one text to one audio file, no server, through the real subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import mlx.core as mx
import pytest
import soundfile

from gateway.cli.speech import format_for
from tests.support.server import SAME_BLAS
from worker.speech.audio import to_pcm16
from worker.tiny_models import ensure_checkpoint

CLI = str(Path(sys.executable).with_name("vllm-omni-mlx"))
TEXT = "Hello world."


@pytest.fixture(scope="module")
def soprano_path() -> str:
    return str(ensure_checkpoint("soprano"))


def tts(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, "tts", *args], capture_output=True, text=True, timeout=300)


def test_speech_writes_what_mlx_audio_generates_for_the_seed(soprano_path, tmp_path):
    from mlx_audio.tts.utils import load_model

    out = tmp_path / "hello.wav"
    # --blas bundled: this process's BLAS, for equal float arithmetic (tests/support/server.py)
    done = tts("--model", soprano_path, "--text", TEXT, "--out", str(out), "--seed", "3",
               *SAME_BLAS)  # fmt: skip
    assert done.returncode == 0, done.stderr
    samples, rate = soundfile.read(out, dtype="int16")
    model = load_model(Path(soprano_path))
    mx.random.seed(3)
    want = b"".join(to_pcm16(r.audio) for r in model.generate(text=TEXT, max_tokens=10))
    assert rate == 32000 and samples.tobytes() == want


def test_speech_refuses_an_unknown_voice_naming_the_voices(soprano_path, tmp_path):
    out = tmp_path / "x.wav"
    done = tts("--model", soprano_path, "--text", TEXT, "--out", str(out), "--voice", "alloy")
    assert done.returncode == 2 and "default" in done.stderr
    assert not out.exists()


def test_the_format_follows_the_output_suffix_unless_given():
    assert format_for("a.flac", None) == "flac"
    assert format_for("a.ogg", None) == "opus"
    assert format_for("a.bin", None) == "wav"
    assert format_for("a.flac", "mp3") == "mp3"
