"""The speech engine on a tiny random-weight Kokoro checkpoint, loaded through mlx-audio's own
loader: seeded output equals direct mlx-audio generation sample for sample (voice, language,
speed, one segment per line), the voice packs and the languages whose G2P loads are listed,
and a voice whose language cannot be spoken here is refused by name.

"Direct" is `mx.random.seed(S); model.generate(text=..., voice=..., speed=..., lang_code=...)`
(Kokoro's source of harmonics draws noise from MLX's global generator).
"""

from __future__ import annotations

import importlib

import mlx.core as mx
import numpy as np
import pytest

from scripts.checkpoints import ensure_checkpoint
from scripts.checkpoints.kokoro import KOKORO_VOICES
from tests.support.speech import run, submit
from worker.speech.audio import to_pcm16
from worker.speech.engine import TtsEngine, load_tts_engine

pytest.importorskip(
    "misaki.espeak",
    reason="Kokoro's G2P needs misaki, phonemizer-fork and espeakng-loader (pip install them)",
)

TEXT = "Hola.\nBuenas."  # two lines: two segments, two steps


def _english_g2p_imports() -> bool:
    try:
        importlib.import_module("misaki.en")  # misaki[en]: spaCy, num2words, ...
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def kokoro() -> TtsEngine:
    return load_tts_engine(str(ensure_checkpoint("kokoro")))


def pcm(deltas: list) -> bytes:
    assert deltas[-1].finish_reason == "stop", deltas[-1].error
    return b"".join(d.audio for d in deltas if d.audio)


def direct(model, seed: int, text: str = TEXT, **kwargs) -> bytes:
    mx.random.seed(seed)
    return b"".join(
        to_pcm16(np.asarray(r.audio, np.float32)) for r in model.generate(text=text, **kwargs)
    )


def test_kokoro_lists_its_voice_packs_and_the_languages_it_can_speak(kokoro):
    info = kokoro.ready_info()
    assert info.family == "kokoro" and info.sample_rate == 24000
    assert {v.name for v in info.voices} == set(KOKORO_VOICES)
    assert {v.name: v.language for v in info.voices}["ef_dora"] == "e"
    assert {"e", "f", "es", "fr"} <= set(info.languages)
    if not _english_g2p_imports():
        assert "a" not in info.languages and "en" not in info.languages
    assert info.speed is True and (info.cloning, info.instructions) == (False, False)


def test_seeded_kokoro_equals_direct_mlx_audio_sample_for_sample(kokoro):
    deltas = run(kokoro, submit("a", TEXT, voice="ef_dora", seed=3))["a"]
    got = pcm(deltas)
    assert sum(1 for d in deltas if d.audio) == 2  # one delta per line
    assert len(got) > 0 and got == direct(kokoro.model, 3, voice="ef_dora", lang_code="e")
    assert deltas[-1].usage.completion_tokens > 0  # phonemes spoken


def test_kokoro_language_alias_and_speed_equal_direct_mlx_audio(kokoro):
    # A French voice speaking Spanish ("es" is mlx-audio's alias of "e"), at half speed.
    request = submit("a", "Hola.", voice="ff_siwis", language="es", speed=0.5, seed=4)
    got = pcm(run(kokoro, request)["a"])
    assert got == direct(kokoro.model, 4, "Hola.", voice="ff_siwis", lang_code="e", speed=0.5)
    normal = direct(kokoro.model, 4, "Hola.", voice="ff_siwis", lang_code="e", speed=1.0)
    assert len(got) > len(normal)  # half speed: longer


def test_kokoro_without_a_voice_speaks_its_first_listed_voice(kokoro):
    first = kokoro.voices[0]["name"]
    got = pcm(run(kokoro, submit("a", "Hola.", seed=2))["a"])
    assert got == direct(kokoro.model, 2, "Hola.", voice=first, lang_code=first[0])


@pytest.mark.skipif(_english_g2p_imports(), reason="misaki[en] is installed: English is spoken")
def test_kokoro_voice_of_a_language_without_its_g2p_is_400_naming_the_package(kokoro):
    end = run(kokoro, submit("a", "Hello.", voice="af_heart"))["a"][-1]
    assert end.finish_reason == "error" and end.error.code == "bad_request"
    assert "misaki[en]" in end.error.message and "language" in end.error.message


def test_kokoro_unknown_voice_lists_the_voice_packs(kokoro):
    end = run(kokoro, submit("a", "Hola.", voice="nobody"))["a"][-1]
    assert end.finish_reason == "error" and "ef_dora" in end.error.message
