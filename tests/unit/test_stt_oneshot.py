"""`vllm-omni-mlx transcribe FILE --model ...`: one transcription, no server, as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.checkpoints import ensure_checkpoint
from tests.support.stt_audio import SENTENCES, speech_wav

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
