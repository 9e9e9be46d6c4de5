"""`vllm-omni-mlx transcribe FILE --model ...`: one transcription, no server, as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stt_audio import SENTENCES, speech_wav
from worker.tiny_models import ensure_checkpoint

CLI = str(Path(sys.executable).with_name("vllm-omni-mlx"))


def test_transcribe_writes_the_direct_mlx_audio_transcript(tmp_path):
    mlx_audio_stt = pytest.importorskip("mlx_audio.stt")
    whisper = str(ensure_checkpoint("whisper"))
    audio = speech_wav(tmp_path / "speech.wav", SENTENCES[1])
    out = tmp_path / "transcript.json"
    args = ["--model", whisper, "--language", "en", "--format", "verbose_json", "--out", str(out)]
    done = subprocess.run([CLI, "transcribe", str(audio), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    body = json.loads(out.read_text())
    direct = mlx_audio_stt.load(whisper).generate(str(audio), language="en")
    assert body["text"] == direct.text.strip()
    assert [s["text"] for s in body["segments"]] == [s["text"] for s in direct.segments]
    assert body["language"] == "english"


def test_transcribe_with_a_text_model_fails_naming_the_speech_families(tmp_path):
    audio = speech_wav(tmp_path / "speech.wav", SENTENCES[0])
    qwen3 = str(ensure_checkpoint("qwen3"))
    done = subprocess.run(
        [CLI, "transcribe", str(audio), "--model", qwen3], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "not a speech-recognition model" in done.stderr and "whisper" in done.stderr


def test_the_one_shot_commands_run_as_the_servers_worker_does(monkeypatch):
    """float32 on a CPU and OpenBLAS preloaded: transcribe took 16 s for a clip the server
    transcribed in 2.7 s (float16 Whisper on the reference BLAS)."""
    from gateway.cli import default_models
    from gateway.cli.oneshot import effective_dtype, subprocess_env
    from protocol.launch.blas import find_openblas

    monkeypatch.setattr(default_models, "default_dtype", lambda: None)  # a CPU
    assert effective_dtype("auto") == "float32" and effective_dtype("float16") == "float16"
    monkeypatch.setattr(default_models, "default_dtype", lambda: "float16")  # Metal, CUDA
    assert effective_dtype("auto") == "auto"
    library = find_openblas()
    env = subprocess_env("auto")
    if library is not None:
        assert library in env["LD_PRELOAD"]
    assert "libopenblas" not in subprocess_env("bundled").get("LD_PRELOAD", "")


def test_the_one_shot_commands_take_the_servers_names(monkeypatch, tmp_path):
    """`transcribe --model whisper-1` and `tts --model tts-1` reach the embedded default's
    models, as on the server (they tried the hub before); other names resolve as in serve."""
    from gateway.cli import default_models
    from gateway.cli.oneshot import oneshot_model
    from gateway.workers.served_models import SPEECH, TRANSCRIPTION
    from tests.support.fake_engine import fake_checkpoint

    monkeypatch.setattr(default_models, "transcription_model", lambda echo: "/asr")
    monkeypatch.setattr(default_models, "speech_model", lambda echo: "/tts")
    assert oneshot_model("whisper-1", TRANSCRIPTION) == "/asr"
    assert oneshot_model("gpt-4o-mini-transcribe", TRANSCRIPTION) == "/asr"
    assert oneshot_model("tts-1", SPEECH) == "/tts"
    checkpoint = fake_checkpoint(tmp_path / "mine")
    assert oneshot_model(str(checkpoint), SPEECH) == str(checkpoint)
