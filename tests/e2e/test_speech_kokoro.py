"""Speech out end to end for Kokoro: a tiny Kokoro checkpoint served alone (`serve X --omni`),
driven by the openai SDK and plain HTTP.

GET /v1/audio/voices lists the checkpoint's voice packs and the languages whose G2P loads on
this server; the audio of a preset voice at a changed speed equals mlx-audio's Kokoro model in
this process on the same phonemes (a sentence per call) for the same seed, sample for sample,
with the worker's faster CPU operations in its decoder (worker/speech/kokoro_fast.py).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.support.server import SAME_BLAS, openai_client
from worker.tiny_models import ensure_checkpoint

pytest.importorskip(
    "misaki.espeak",
    reason="Kokoro's G2P needs misaki, phonemizer-fork and espeakng-loader (pip install them)",
)

TEXT = "Hola.\nBuenas."


@pytest.fixture(scope="module")
def kokoro_path() -> str:
    return str(ensure_checkpoint("kokoro"))


@pytest.fixture(scope="module")
def kokoro(start_server, kokoro_path):
    return start_server(kokoro_path, "--omni", *SAME_BLAS, name="omni-kokoro")


@cache
def _direct_model(path: str):
    from mlx_audio.tts.utils import load_model

    return load_model(Path(path))


def direct_pcm(path: str, seed: int, voice: str, code: str, speed: float) -> bytes:
    """mlx-audio's Kokoro in this process, as its pipeline calls it per chunk, as int16 PCM."""
    import mlx.core as mx

    from worker.speech import kokoro_fast, kokoro_weights
    from worker.speech.audio import to_pcm16
    from worker.speech.kokoro_text import chunks, load_g2p

    kokoro_fast.install()
    kokoro_weights.uninstall()  # weights normalized on every call, as mlx-audio does
    model = _direct_model(path)  # before seeding: building the model draws random numbers
    pack = mx.load(f"{path}/voices/{voice}.safetensors")["voice"]
    mx.random.seed(seed)
    audio = b""
    for phonemes in chunks(load_g2p(code)(TEXT)):
        out = model(phonemes, pack[len(phonemes) - 1], speed, return_output=True)
        audio += to_pcm16(np.asarray(out.audio[0], np.float32))
    return audio


def test_kokoro_voices_list_its_voice_packs_and_languages(kokoro, kokoro_path):
    response = httpx.get(f"{kokoro.url}/v1/audio/voices", headers=kokoro.headers, timeout=30)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == Path(kokoro_path).name
    presets = {v["name"]: v["language"] for v in body["voices"] if v.get("type") == "preset"}
    assert presets == {"af_heart": "a", "ef_dora": "e", "ff_siwis": "f"}
    assert {"a", "en", "e", "f", "es"} <= set(body["languages"])  # English through espeak-ng
    assert body["speed"] is True and body["cloning"] is False and body["sample_rate"] == 24000


def test_kokoro_speech_equals_direct_mlx_audio_for_the_same_seed(kokoro, kokoro_path):
    got = (
        openai_client(kokoro)
        .audio.speech.create(
            model=Path(kokoro_path).name,
            voice="ef_dora",
            input=TEXT,
            response_format="pcm",
            speed=0.5,
            extra_body={"seed": 7},
        )
        .content
    )
    want = direct_pcm(kokoro_path, 7, voice="ef_dora", code="e", speed=0.5)
    assert len(got) > 0 and got == want
