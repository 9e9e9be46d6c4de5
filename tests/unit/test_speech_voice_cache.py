"""Qwen3-TTS's voice cache (worker/speech/voice_cache.py) in the speech engine, on tiny
random-weight checkpoints: a voice's prefix KV, x-vector and reference codes are computed once
and reused, and every request's seeded audio still equals direct mlx-audio sample for sample,
cold and warm, for preset voices (with and without instructions), described voices and both
kinds of cloned voice; a changed reference clip is a new entry even where mlx-audio's own key
(the clip's length and sum) cannot tell it apart; the cache stays within its bytes (LRU,
evictions counted)."""

from __future__ import annotations

import io

import mlx.core as mx
import numpy as np
import pytest
import soundfile

from tests.support.speech import generated_audio, run, submit
from worker.runtime.stats import WorkerStats
from worker.speech.audio import decode_reference, to_pcm16
from worker.speech.engine import TtsEngine, load_tts_engine
from worker.tiny_models import ensure_checkpoint

INTERVAL = 0.08  # the worker's default streamed chunk
TEXTS = ("Good morning.", "The weather is fine today, thank you.")
REF_TEXT = "Hello there."
RATE = 8000  # the tiny checkpoints' rate


def engine_for(arch: str, voice_cache_bytes: int = 64 << 20) -> TtsEngine:
    engine = load_tts_engine(str(ensure_checkpoint(arch)), voice_cache_bytes=voice_cache_bytes)
    engine.bind_stats(WorkerStats("tts"))
    return engine


@pytest.fixture(scope="module")
def custom() -> TtsEngine:
    return engine_for("qwen3_tts")


@pytest.fixture(scope="module")
def base() -> TtsEngine:
    return engine_for("qwen3_tts_base")


STAND_INS = ("talker", "_prepare_generation_inputs", "_prepare_icl_generation_inputs")
STAND_INS += ("extract_speaker_embedding", "_icl_cache")


def counts(engine: TtsEngine) -> tuple[int, int, int]:
    s = engine.stats.snapshot()
    return s.voice_cache_queries, s.voice_cache_hits, s.voice_cache_evictions


def speak(engine: TtsEngine, text: str, seed: int, **inputs) -> bytes:
    deltas = run(engine, submit("r", text=text, seed=seed, **inputs))["r"]
    assert deltas[-1].finish_reason == "stop", deltas[-1].error
    return b"".join(d.audio for d in deltas if d.audio)


def direct(engine: TtsEngine, text: str, seed: int, **inputs) -> bytes:
    """mlx-audio on its own for the same request (its own clip-code cache empty before and
    after)."""
    engine.model._icl_cache.clear()
    kwargs = engine.generate_kwargs(engine._validate(submit("r", text=text, **inputs).inputs))
    mx.random.seed(seed)
    audio = b"".join(to_pcm16(a) for a in generated_audio(engine.model, **kwargs))
    engine.model._icl_cache.clear()
    return audio


def wav(samples: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, RATE, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def quiet_sine() -> np.ndarray:
    # Amplitude 0.01: every partial sum of the decoded int16 / 32768 samples is exact in
    # float32, so the clip's sum is the same in any order (see the changed-clip test).
    t = np.arange(RATE) / RATE
    return 0.01 * np.sin(2 * np.pi * 220 * t) + 0.004 * np.sin(2 * np.pi * 530 * t)


@pytest.mark.parametrize("instructions", [None, "Speak slowly and warmly."])
def test_a_preset_voice_is_prefilled_once_and_every_request_equals_direct(custom, instructions):
    extra = {"voice": "ryan", "instructions": instructions}
    before = counts(custom)
    first = speak(custom, TEXTS[0], 5, **extra)
    middle = counts(custom)
    second = speak(custom, TEXTS[1], 6, **extra)
    after = counts(custom)
    # Queried: each request's whole prefill; hit: the second's voice prefix, not its text.
    assert middle[0] > before[0] and middle[1] == before[1]  # cold
    assert 0 < after[1] - middle[1] < after[0] - middle[0]  # warm
    assert first == direct(custom, TEXTS[0], 5, **extra)
    assert second == direct(custom, TEXTS[1], 6, **extra)


def test_another_voice_or_instruction_is_another_prefix(custom):
    speak(custom, TEXTS[0], 1, voice="vivian", instructions="Whisper.")
    before = counts(custom)
    got = speak(custom, TEXTS[0], 1, voice="vivian", instructions="Shout.")
    assert counts(custom)[1] == before[1]  # queried, not hit
    assert got == direct(custom, TEXTS[0], 1, voice="vivian", instructions="Shout.")
    again = speak(custom, TEXTS[1], 2, voice="eric")
    assert again == direct(custom, TEXTS[1], 2, voice="eric")


def test_a_described_voice_is_reused_and_equals_direct():
    design = engine_for("qwen3_tts_voice_design")
    description = "A calm, low voice with a slight rasp."
    speak(design, TEXTS[0], 3, instructions=description)
    before = counts(design)
    got = speak(design, TEXTS[1], 4, instructions=description)
    assert counts(design)[1] > before[1]
    assert got == direct(design, TEXTS[1], 4, instructions=description)


@pytest.mark.parametrize("ref_text", [None, REF_TEXT])
def test_a_cloned_voice_encodes_its_clip_once(base, ref_text, monkeypatch):
    model = base.model
    calls = {"x-vector": 0, "codes": 0}
    speaker_call = type(model.speaker_encoder).__call__
    encode = type(model.speech_tokenizer).encode

    def counted_speaker(self, *args, **kwargs):
        calls["x-vector"] += 1
        return speaker_call(self, *args, **kwargs)

    def counted_encode(self, *args, **kwargs):
        calls["codes"] += 1
        return encode(self, *args, **kwargs)

    monkeypatch.setattr(type(model.speaker_encoder), "__call__", counted_speaker)
    monkeypatch.setattr(type(model.speech_tokenizer), "encode", counted_encode)
    hz = 180 if ref_text else 240  # a clip of its own: the other case's x-vector is kept
    clip = wav(0.3 * np.sin(2 * np.pi * hz * np.arange(RATE) / RATE))
    voice = {"ref_audio": clip, "ref_text": ref_text}
    first = speak(base, TEXTS[0], 8, **voice)
    before = counts(base)
    second = speak(base, TEXTS[1], 9, **voice)
    assert calls == {"x-vector": 1, "codes": 1 if ref_text else 0}
    hit, queried = counts(base)[1] - before[1], counts(base)[0] - before[0]
    assert 0 < hit < queried  # the prefix (with the transcript) kept; text and frames not
    assert first == direct(base, TEXTS[0], 8, **voice)
    assert second == direct(base, TEXTS[1], 9, **voice)


def test_a_changed_clip_that_mlx_audios_own_key_confuses_is_a_new_voice(base):
    samples = quiet_sine()
    clips = [wav(samples), wav(samples[::-1])]
    decoded = [decode_reference(c, RATE) for c in clips]
    # mlx-audio keys a clip's codes by (ref_text, (length, sum)): the two clips share it.
    assert [(a.size, float(a.sum())) for a in decoded][0] == (
        decoded[1].size,
        float(decoded[1].sum()),
    )
    assert not mx.array_equal(decoded[0], decoded[1])
    got = [speak(base, TEXTS[0], 11, ref_audio=c, ref_text=REF_TEXT) for c in clips]
    want = [direct(base, TEXTS[0], 11, ref_audio=c, ref_text=REF_TEXT) for c in clips]
    assert got == want and got[0] != got[1]


def test_the_cache_stays_within_its_bytes_evicting_the_oldest():
    engine = engine_for("qwen3_tts")
    speak(engine, TEXTS[0], 1, voice="ryan")
    one_voice = engine.voice_cache.bytes
    assert one_voice > 0
    engine.voice_cache.max_bytes = one_voice + one_voice // 2  # room for one prefix
    speak(engine, TEXTS[0], 1, voice="vivian")
    assert engine.voice_cache.bytes <= engine.voice_cache.max_bytes
    assert counts(engine)[2] == 1 and len(engine.voice_cache) == 1
    before = counts(engine)
    got = speak(engine, TEXTS[1], 2, voice="ryan")  # evicted: prefilled again
    assert counts(engine)[1] == before[1]
    assert got == direct(engine, TEXTS[1], 2, voice="ryan")


def test_no_bytes_keeps_nothing_and_still_equals_direct():
    engine = engine_for("qwen3_tts_base", voice_cache_bytes=0)
    clip = wav(0.3 * np.sin(2 * np.pi * 180 * np.arange(RATE) / RATE))
    voice = {"ref_audio": clip, "ref_text": REF_TEXT}
    for text, seed in zip(TEXTS, (1, 2), strict=True):
        got = speak(engine, text, seed, **voice)
        assert engine.model._icl_cache == {}  # mlx-audio's own key is never used either
        assert got == direct(engine, text, seed, **voice)
    queried, hit, evicted = counts(engine)
    assert len(engine.voice_cache) == 0 and queried > 0 and hit == evicted == 0


def test_requests_in_one_voice_started_together_miss_once_then_hit():
    engine = engine_for("qwen3_tts")
    requests = [submit(str(i), text=t, seed=i, voice="ryan") for i, t in enumerate(TEXTS)]
    audio = {
        rid: b"".join(d.audio for d in ds if d.audio) for rid, ds in run(engine, *requests).items()
    }
    queried, hit, _ = counts(engine)
    assert 0 < hit < queried and len(engine.voice_cache) == 1  # the second found the first's
    for i, text in enumerate(TEXTS):
        assert audio[str(i)] == direct(engine, text, i, voice="ryan")


def test_a_step_that_fails_leaves_no_stand_in_and_the_next_request_is_right(monkeypatch):
    engine = engine_for("qwen3_tts")
    talker_class = type(engine.model.talker)

    def broken(self, *args, **kwargs):
        raise RuntimeError("talker failed")

    with monkeypatch.context() as patch:
        patch.setattr(talker_class, "__call__", broken)
        deltas = run(engine, submit("r", text=TEXTS[0], seed=1, voice="ryan"))["r"]
    assert deltas[-1].finish_reason == "error"
    assert not set(STAND_INS) & set(vars(engine.model))
    assert speak(engine, TEXTS[0], 1, voice="ryan") == direct(engine, TEXTS[0], 1, voice="ryan")
