"""The speech engine on tiny random-weight checkpoints of two mlx-audio families (Qwen3-TTS
CustomVoice, Soprano), loaded through mlx-audio's own loader: seeded output equals direct
mlx-audio generation sample for sample, interleaving does not change any request's audio,
audio arrives before the generation ends, a Qwen3-TTS step is short (one chunk of frames or one
stage of their codec decoding), and what a model cannot do is refused by name."""

from __future__ import annotations

import io
import sys

import mlx.core as mx
import numpy as np
import pytest
import soundfile

from protocol.ready import Voice
from tests.support.speech import TEXT, direct_qwen3_pcm, generated_audio, run, submit
from worker.runtime.errors import RequestError
from worker.speech.audio import decode_reference, to_pcm16
from worker.speech.engine import TtsEngine, load_tts_engine
from worker.tiny_models import ensure_checkpoint

INTERVAL = 0.08  # the worker's Qwen3-TTS yield: 1 codec frame


@pytest.fixture(scope="module")
def qwen3() -> TtsEngine:
    return load_tts_engine(str(ensure_checkpoint("qwen3_tts")))


@pytest.fixture(scope="module")
def soprano() -> TtsEngine:
    return load_tts_engine(str(ensure_checkpoint("soprano")))


def pcm(deltas: list) -> bytes:
    return b"".join(d.audio for d in deltas)


def direct(model, seed: int, **kwargs) -> bytes:
    """mlx-audio on its own: seed the global generator, generate, join the chunks."""
    mx.random.seed(seed)
    return b"".join(to_pcm16(audio) for audio in generated_audio(model, **kwargs))


def test_qwen3_tts_reports_its_preset_voices_and_abilities(qwen3):
    info = qwen3.ready_info()
    assert {v.name for v in info.voices} == {"vivian", "ryan", "eric"}
    assert (info.cloning, info.descriptions, info.instructions) == (False, False, True)
    assert info.sample_rate == 8000 and "english" in info.languages


def test_seeded_qwen3_tts_equals_direct_mlx_audio_sample_for_sample(qwen3):
    got = pcm(run(qwen3, submit("a", voice="vivian", seed=7))["a"])
    want = direct_qwen3_pcm(qwen3.model, 7, voice="vivian", lang_code="auto")
    assert got and got == want


def test_qwen3_tts_streams_audio_before_the_generation_ends(qwen3):
    deltas = run(qwen3, submit("a", voice="ryan", seed=1))["a"]
    audio = [d for d in deltas if d.audio]
    assert len(audio) >= 2 and deltas[-1].finish_reason == "stop"
    assert all(d.sample_rate == 8000 for d in audio)


def test_the_first_audio_is_one_codec_frame_and_a_seeded_stream_repeats_bit_for_bit(qwen3):
    first = run(qwen3, submit("a", voice="ryan", seed=4))["a"]
    again = run(qwen3, submit("a", voice="ryan", seed=4))["a"]
    audio = [d.audio for d in first if d.audio]
    frame_samples = qwen3.sample_rate * 2 // 25  # 12.5 frames a second
    assert len(audio[0]) == 2 * frame_samples  # int16: the first chunk is one frame
    assert audio == [d.audio for d in again if d.audio]


def test_chunks_grow_as_scheduled_and_the_last_holds_what_is_left(qwen3):
    from worker.speech.staged import CHUNK_FRAMES

    assert CHUNK_FRAMES[:3] == (1, 2, 4)
    deltas = run(qwen3, submit("a", voice="ryan", seed=1))["a"]
    frame_bytes = 2 * qwen3.sample_rate * 2 // 25  # int16, 12.5 frames a second
    sizes = [len(d.audio) / frame_bytes for d in deltas if d.audio]
    assert sizes == [1, 2, 3] and deltas[-1].usage.completion_tokens == 6


def test_interleaved_requests_each_get_the_audio_they_get_alone(qwen3):
    alone = {
        rid: pcm(run(qwen3, submit(rid, voice="ryan", seed=s))[rid])
        for rid, s in (("a", 1), ("b", 2))
    }
    together = run(qwen3, submit("a", voice="ryan", seed=1), submit("b", voice="ryan", seed=2))
    assert {rid: pcm(d) for rid, d in together.items()} == alone


def test_an_abort_ends_the_request_between_chunks(qwen3):
    qwen3.admit(submit("a", voice="ryan", seed=1))
    qwen3.step()
    (ended,) = qwen3.abort(["a"])
    assert ended.finish_reason == "abort" and ended.usage.prompt_tokens == len(TEXT)
    assert qwen3.active_ids() == [] and qwen3.step() == []


def test_an_unknown_voice_is_refused_listing_the_voices(qwen3):
    refused = qwen3.admit(submit("a", voice="alloy"))
    assert refused.error.code == "bad_request"
    assert all(name in refused.error.message for name in ("vivian", "ryan", "eric"))


def test_an_unknown_language_is_refused_listing_the_languages(qwen3):
    refused = qwen3.admit(submit("a", voice="ryan", language="klingon"))
    assert "english" in refused.error.message


def test_speed_is_refused_by_a_model_that_cannot_change_it(qwen3):
    assert "speed" in qwen3.admit(submit("a", voice="ryan", speed=1.5)).error.message


def test_reference_audio_is_refused_by_a_model_that_cannot_clone(qwen3):
    refused = qwen3.admit(submit("a", ref_audio=b"RIFF", ref_text="hi"))
    assert "clone" in refused.error.message


def test_empty_input_is_refused(qwen3):
    assert qwen3.admit(submit("a", text="  ")).error.code == "bad_request"


def test_seeded_soprano_equals_direct_mlx_audio_sample_for_sample(soprano):
    got = pcm(run(soprano, submit("a", seed=3))["a"])
    assert got and got == direct(soprano.model, 3, text=TEXT, max_tokens=10)


def test_usage_counts_input_characters_and_generated_tokens(soprano):
    terminal = run(soprano, submit("a", seed=3))["a"][-1]
    assert terminal.usage.prompt_tokens == len(TEXT)
    assert terminal.usage.completion_tokens > 0


def test_seconds_of_speech_sent_are_counted(soprano):
    from worker.runtime.stats import WorkerStats

    stats = WorkerStats(model="soprano")
    soprano.bind_stats(stats)
    try:
        deltas = run(soprano, submit("a", seed=3))["a"]
    finally:
        soprano.bind_stats(None)
    seconds = len(pcm(deltas)) / 2 / soprano.sample_rate
    assert seconds > 0 and stats.snapshot().speech_seconds == pytest.approx(seconds)


def test_soprano_has_one_default_voice_and_takes_no_instructions(soprano):
    assert soprano.ready_info().voices == [Voice("default")]
    assert "instructions" in soprano.admit(submit("a", instructions="whisper")).error.message


def test_an_unsupported_family_fails_at_load_naming_the_supported_ones(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "bark"}')
    with pytest.raises(ValueError, match="qwen3_tts.*soprano"):
        load_tts_engine(str(tmp_path))


def test_loading_never_imports_the_audio_player(qwen3, soprano):
    assert "sounddevice" not in sys.modules


def test_reference_audio_that_is_not_audio_is_a_bad_request():
    with pytest.raises(RequestError, match="ref_audio could not be decoded"):
        decode_reference(b"this is not a sound file", 8000)


def test_reference_audio_is_decoded_mono_at_the_models_rate():
    buffer = io.BytesIO()
    soundfile.write(buffer, np.zeros((16000, 2), dtype=np.float32), 16000, format="WAV")
    assert decode_reference(buffer.getvalue(), 8000).shape == (8000,)


# -- short steps: Qwen3-TTS's codec decoding staged over several steps (worker/speech/staged.py)


class _Counting:
    """Stands in for a callable (a module or a bound method), counting its calls."""

    def __init__(self, real, counts: list[int], index: int) -> None:
        self._real, self._counts, self._index = real, counts, index

    def __call__(self, *args, **kwargs):
        self._counts[self._index] += 1
        return self._real(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._real, name)


@pytest.fixture
def work_counts(qwen3):
    """[talker forward passes, codec decoder stages] done so far: the talker (one pass a
    codec frame) and every upsampling block's upsample and residual units (the decoder's
    costly layers) counted through instance attributes, removed afterwards."""
    from mlx_audio.tts.models.qwen3_tts.speech_tokenizer import (
        DecoderBlockUpsample,
        DecoderResidualUnit,
    )

    counts = [0, 0]
    decoder = qwen3._staging._decoder
    layers = [
        m
        for _, m in decoder.named_modules()
        if isinstance(m, (DecoderBlockUpsample, DecoderResidualUnit))
    ]
    object.__setattr__(qwen3.model, "talker", _Counting(qwen3.model.talker, counts, 0))
    for layer in layers:
        object.__setattr__(layer, "step", _Counting(layer.step, counts, 1))
    try:
        yield counts
    finally:
        object.__delattr__(qwen3.model, "talker")
        for layer in layers:
            object.__delattr__(layer, "step")


def test_a_qwen3_tts_step_makes_one_chunk_of_frames_or_one_codec_stage(qwen3, work_counts):
    assert qwen3._staging is not None, "the tiny checkpoint's decoder is the one staged"
    qwen3.admit(submit("a", voice="ryan", seed=1))
    per_step = []
    while qwen3.active_ids():
        before = list(work_counts)
        qwen3.step()
        per_step.append((work_counts[0] - before[0], work_counts[1] - before[1]))
    frames = [t for t, _ in per_step if t]
    stages = [c for _, c in per_step if c]
    assert all(t == 0 or c == 0 for t, c in per_step), "frames and decoding in separate steps"
    # A yield: one streamed chunk; the first also prefills, in two passes (the voice's prefix,
    # then the text: worker/speech/voice_cache.py) unless the voice's prefix is kept.
    assert frames and frames[0] <= 2 and max(frames[1:]) <= round(INTERVAL * 12.5)
    assert stages and max(stages) == 1, "one decoder stage a step"
    # The 6 frames of the tiny checkpoint: chunks of 1, 2 and 3 (the schedule's 4 cut short by
    # the end), each decoded over several steps.
    assert len(stages) == 3 * 2 * 4  # chunks x upsampling blocks x (upsample + 3 units)


def test_an_abort_in_the_middle_of_a_chunks_decoding_leaves_the_model_as_it_was(qwen3):
    qwen3.admit(submit("a", voice="ryan", seed=1))
    qwen3.step()  # the first chunk's frames
    qwen3.step()  # its first decoder stage
    qwen3.abort(["a"])
    assert type(qwen3.model.speech_tokenizer.decoder).__name__ == "_gc_func"
    got = pcm(run(qwen3, submit("b", voice="vivian", seed=7))["b"])
    want = direct_qwen3_pcm(qwen3.model, 7, voice="vivian", lang_code="auto")
    assert got == want


def test_another_mlx_audio_decoder_is_not_staged_and_still_equals_direct(
    qwen3, monkeypatch, caplog
):
    from worker.speech import staged

    name = "Qwen3TTSSpeechTokenizerDecoder.streaming_step"
    monkeypatch.setitem(staged.KNOWN_SOURCES, name, "a different version")
    with caplog.at_level("WARNING", logger="worker.speech.staged"):
        engine = TtsEngine(qwen3.model, qwen3.family, qwen3.path, "tiny")
    assert engine._staging is None and name in caplog.text
    got = pcm(run(engine, submit("a", voice="vivian", seed=7))["a"])
    want = direct(
        qwen3.model,
        7,
        text=TEXT,
        voice="vivian",
        lang_code="auto",
        stream=True,
        streaming_interval=INTERVAL,
    )
    assert got == want


def test_families_that_yield_whole_segments_are_not_staged(soprano):
    assert soprano._staging is None


def test_a_generator_that_reworks_the_decoders_audio_fails_instead_of_sending_other_audio(qwen3):
    import dataclasses

    generate = qwen3.model.generate

    def reworked(**kwargs):  # what a later mlx-audio might do: fade, trim, mix the chunks
        for result in generate(**kwargs):
            yield dataclasses.replace(result, audio=result.audio + 0.5)

    object.__setattr__(qwen3.model, "generate", reworked)
    try:
        deltas = run(qwen3, submit("a", voice="ryan", seed=1))["a"]
    finally:
        object.__delattr__(qwen3.model, "generate")
    assert not any(d.audio for d in deltas)
    assert deltas[-1].finish_reason == "error" and deltas[-1].error.code == "internal"
