"""The speech engine on a tiny random-weight Kokoro checkpoint (Kokoro-82M's real vocabulary),
loaded through mlx-audio's own loader: seeded output equals mlx-audio's Kokoro model called
directly on the same phonemes, chunk for chunk and sample for sample (voice, language, speed,
a sentence per chunk), English is read without misaki[en] (espeak-ng), the voice packs and the
languages are listed, and input with nothing to speak is refused by name.

"Direct" is `mx.random.seed(S)`, then for each chunk `model(phonemes, pack[len(phonemes) - 1],
speed)`: mlx-audio's `KokoroPipeline.infer` (Kokoro's source of harmonics draws noise from
MLX's global generator).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

from tests.support.speech import run, submit
from worker.speech.audio import to_pcm16
from worker.speech.engine import TtsEngine, load_tts_engine
from worker.speech.kokoro_text import chunks, load_g2p
from worker.tiny_models import ensure_checkpoint
from worker.tiny_models.kokoro import KOKORO_VOICES

pytest.importorskip(
    "misaki.espeak",
    reason="Kokoro's G2P needs misaki, phonemizer-fork and espeakng-loader (pip install them)",
)

TEXT = "Hola. Buenas tardes."  # two sentences: two chunks, two steps


@pytest.fixture(scope="module")
def kokoro() -> TtsEngine:
    return load_tts_engine(str(ensure_checkpoint("kokoro")))


def pcm(deltas: list) -> bytes:
    assert deltas[-1].finish_reason == "stop", deltas[-1].error
    return b"".join(d.audio for d in deltas if d.audio)


def direct(engine: TtsEngine, seed: int, text: str, voice: str, code: str,
           speed: float = 1.0) -> bytes:  # fmt: skip
    """mlx-audio's Kokoro on the phonemes of `text`, sentence by sentence."""
    model = engine.model
    pack = mx.load(f"{engine.path}/voices/{voice}.safetensors")["voice"]
    mx.random.seed(seed)
    audio = b""
    for phonemes in chunks(load_g2p(code)(text)):
        out = model(phonemes, pack[len(phonemes) - 1], speed, return_output=True)
        audio += to_pcm16(np.asarray(out.audio[0], np.float32))
    return audio


def test_kokoro_lists_its_voice_packs_and_the_languages_it_can_speak(kokoro):
    info = kokoro.ready_info()
    assert info.family == "kokoro" and info.sample_rate == 24000
    assert {v.name for v in info.voices} == set(KOKORO_VOICES)
    assert info.voices[0].name == "af_heart"  # mlx-audio's default voice, listed first
    assert {v.name: v.language for v in info.voices}["ef_dora"] == "e"
    # English through espeak-ng, without misaki[en] (spaCy, PyTorch)
    assert {"a", "b", "en", "e", "f", "es", "fr"} <= set(info.languages)
    assert info.speed is True and (info.cloning, info.instructions) == (False, False)


def test_seeded_kokoro_equals_direct_mlx_audio_sample_for_sample(kokoro):
    deltas = run(kokoro, submit("a", TEXT, voice="ef_dora", seed=3))["a"]
    got = pcm(deltas)
    assert sum(1 for d in deltas if d.audio) == 2  # one delta per sentence
    assert len(got) > 0 and got == direct(kokoro, 3, TEXT, "ef_dora", "e")
    assert deltas[-1].usage.completion_tokens > 0  # phonemes spoken


def test_kokoro_language_alias_and_speed_equal_direct_mlx_audio(kokoro):
    # A French voice speaking Spanish ("es" is mlx-audio's alias of "e"), at half speed.
    request = submit("a", "Hola.", voice="ff_siwis", language="es", speed=0.5, seed=4)
    got = pcm(run(kokoro, request)["a"])
    assert got == direct(kokoro, 4, "Hola.", "ff_siwis", "e", speed=0.5)
    normal = direct(kokoro, 4, "Hola.", "ff_siwis", "e", speed=1.0)
    assert len(got) > len(normal)  # half speed: longer


def test_kokoro_without_a_voice_speaks_english_in_its_default_voice(kokoro):
    got = pcm(run(kokoro, submit("a", "Hello there.", seed=2))["a"])
    assert got == direct(kokoro, 2, "Hello there.", "af_heart", "a")


def test_a_voice_whose_language_is_not_read_here_reads_english():
    # Kokoro-82M's Japanese voices (the only real packs on PyPI) read English text unless
    # misaki[ja] is installed and the request asks for Japanese.
    from worker.speech.kokoro_speaker import ENGLISH, KokoroSpeaker

    speaker = KokoroSpeaker.__new__(KokoroSpeaker)
    speaker.g2p = {"a": load_g2p("a")}
    assert speaker.language_for("jm_kumo", None) == ENGLISH
    with pytest.raises(Exception, match="language 'ja' cannot be read"):
        speaker.language_for("jm_kumo", "ja")


def test_input_with_nothing_to_speak_is_refused_naming_the_g2p(kokoro):
    end = run(kokoro, submit("a", "\x00\x01", voice="af_heart"))["a"][-1]
    assert end.finish_reason == "error" and end.error.code == "bad_request"
    assert "nothing Kokoro can speak" in end.error.message and "espeak-ng" in end.error.message


def test_a_sentence_over_the_chunk_limit_is_spoken_whole_in_pieces(kokoro, monkeypatch):
    # The limit is Kokoro's 510 phonemes (tests/unit/test_kokoro_text.py); a small one here
    # keeps the tiny model's audio short.
    import functools

    from worker.speech import kokoro_speaker

    small = functools.partial(chunks, limit=12)
    monkeypatch.setattr(kokoro_speaker, "chunks", small)
    text = "One, two, three four five."
    pieces = list(small(load_g2p("a")(text)))
    assert len(pieces) >= 3 and all(len(p) <= 12 for p in pieces)
    deltas = run(kokoro, submit("a", text, voice="af_heart", seed=5))["a"]
    assert sum(1 for d in deltas if d.audio) == len(pieces)
    monkeypatch.setattr("tests.unit.test_speech_kokoro.chunks", small)
    assert pcm(deltas) == direct(kokoro, 5, text, "af_heart", "a")


def test_kokoro_unknown_voice_lists_the_voice_packs(kokoro):
    end = run(kokoro, submit("a", "Hola.", voice="nobody"))["a"][-1]
    assert end.finish_reason == "error" and "ef_dora" in end.error.message
