"""The speech engine on tiny random-weight VoxCPM2 and MOSS-TTS-Nano checkpoints, loaded through
mlx-audio's own loader: seeded output equals direct mlx-audio generation sample for sample
(zero-shot, voice design, cloned voice), audio sent in pieces joins to the whole, interleaved
requests do not disturb each other, and what a family cannot do is refused by name.

"Direct" is what mlx-audio's own `generate_audio` (its CLI) does: reference audio read with
`load_audio(path, sample_rate=model.sample_rate)`, then `mx.random.seed(S)` and
`model.generate(**kwargs)`.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
import soundfile

from tests.support.speech import TEXT, direct_mono_pcm, run, sine_wav, submit
from worker.speech.audio import to_pcm16
from worker.speech.engine import TtsEngine, load_tts_engine
from worker.tiny_models import ensure_checkpoint
from worker.tiny_models.tts_families import MOSS_TTS_NANO_SIZES, VOXCPM2_SIZES

VOX_PATCHES = VOXCPM2_SIZES["tiny"].max_new_tokens
MOSS_FRAMES = MOSS_TTS_NANO_SIZES["tiny"].max_new_tokens


@pytest.fixture(scope="module")
def voxcpm2() -> TtsEngine:
    return load_tts_engine(str(ensure_checkpoint("voxcpm2")))


@pytest.fixture(scope="module")
def moss() -> TtsEngine:
    return load_tts_engine(str(ensure_checkpoint("moss_tts_nano")))


@pytest.fixture(scope="module")
def ref_wav(tmp_path_factory) -> Path:
    """A 1.2 s 22.05 kHz clip: neither model's rate, so the reference is resampled."""
    path = tmp_path_factory.mktemp("ref") / "ref.wav"
    path.write_bytes(sine_wav(1.2, 22050))
    return path


def pcm(deltas: list) -> bytes:
    assert deltas[-1].finish_reason == "stop", deltas[-1].error
    return b"".join(d.audio for d in deltas if d.audio)


# -- VoxCPM2 -------------------------------------------------------------------------------


def test_voxcpm2_reports_no_presets_and_clones_or_designs_a_voice(voxcpm2):
    info = voxcpm2.ready_info()
    assert info.family == "voxcpm2" and info.voices == []
    assert (info.cloning, info.ref_text, info.descriptions) == (True, False, True)
    assert info.sample_rate == 16000


def test_seeded_voxcpm2_equals_direct_mlx_audio_sample_for_sample(voxcpm2):
    got = pcm(run(voxcpm2, submit("a", seed=3))["a"])
    want = direct_mono_pcm(voxcpm2.model, 3, max_tokens=VOX_PATCHES)
    assert len(got) > 0 and got == want


def test_voxcpm2_voice_design_equals_direct_instruct(voxcpm2):
    described = "A calm, low voice"
    got = pcm(run(voxcpm2, submit("a", seed=5, instructions=described))["a"])
    want = direct_mono_pcm(voxcpm2.model, 5, max_tokens=VOX_PATCHES, instruct=described)
    assert got == want
    assert got != pcm(run(voxcpm2, submit("b", seed=5))["b"])  # the description is used


def test_voxcpm2_cloned_voice_equals_direct_mlx_audio(voxcpm2, ref_wav):
    got = pcm(run(voxcpm2, submit("a", seed=4, ref_audio=ref_wav.read_bytes()))["a"])
    assert got == direct_mono_pcm(voxcpm2.model, 4, ref_wav, max_tokens=VOX_PATCHES)


def test_voxcpm2_length_is_capped_by_max_new_tokens(voxcpm2):
    samples = len(pcm(run(voxcpm2, submit("a", seed=1))["a"])) // 2
    per_patch = 2 * voxcpm2.model.audio_vae.decode_chunk_size  # patch_size x decoder hop
    assert VOX_PATCHES * per_patch <= samples < (VOX_PATCHES + 1) * per_patch


def test_voxcpm2_audio_sent_in_pieces_joins_to_the_whole(voxcpm2, monkeypatch):
    whole = pcm(run(voxcpm2, submit("a", seed=2))["a"])
    monkeypatch.setattr(voxcpm2, "_max_delta_samples", 500)
    deltas = run(voxcpm2, submit("a", seed=2))["a"]
    assert len([d for d in deltas if d.audio]) >= 3
    assert pcm(deltas) == whole


def test_voxcpm2_interleaved_requests_each_get_the_audio_they_get_alone(voxcpm2, ref_wav):
    ref = ref_wav.read_bytes()
    alone = {
        "a": pcm(run(voxcpm2, submit("a", seed=1))["a"]),
        "b": pcm(run(voxcpm2, submit("b", seed=2, ref_audio=ref))["b"]),
    }
    together = run(voxcpm2, submit("a", seed=1), submit("b", seed=2, ref_audio=ref))
    assert {rid: pcm(d) for rid, d in together.items()} == alone


def test_voxcpm2_refuses_a_transcript_it_would_ignore(voxcpm2, ref_wav):
    refused = voxcpm2.admit(submit("a", ref_audio=ref_wav.read_bytes(), ref_text="hi"))
    assert refused.error.code == "bad_request" and "ref_text" in refused.error.message


def test_voxcpm2_refuses_preset_voices_and_speed(voxcpm2):
    assert "unknown voice" in voxcpm2.admit(submit("a", voice="alloy")).error.message
    assert "speed" in voxcpm2.admit(submit("a", speed=1.5)).error.message


# -- MOSS-TTS-Nano -------------------------------------------------------------------------


def test_moss_tts_nano_reports_cloning_only(moss):
    info = moss.ready_info()
    assert info.family == "moss_tts_nano" and info.voices == []
    assert (info.cloning, info.ref_text, info.instructions) == (True, False, False)
    assert info.sample_rate == 8000


def test_moss_tts_nano_loads_its_audio_tokenizer_at_start(moss):
    assert moss.model.audio_tokenizer is not None


def test_moss_tts_nano_first_seeded_request_equals_later_ones(ref_wav):
    # Built lazily, the codec would draw from the random generator inside the first request.
    engine = load_tts_engine(str(ensure_checkpoint("moss_tts_nano")))
    ref = ref_wav.read_bytes()
    first, second = (pcm(run(engine, submit(r, seed=3, ref_audio=ref))[r]) for r in "ab")
    assert first == second


def test_seeded_moss_tts_nano_equals_direct_mlx_audio_sample_for_sample(moss, ref_wav):
    got = pcm(run(moss, submit("a", seed=6, ref_audio=ref_wav.read_bytes()))["a"])
    want = direct_mono_pcm(moss.model, 6, ref_wav, max_tokens=MOSS_FRAMES)
    assert len(got) > 0 and got == want


def test_moss_tts_nano_stereo_is_sent_as_its_channel_average(moss, ref_wav):
    from mlx_audio.utils import load_audio

    mx.random.seed(6)
    ref = load_audio(str(ref_wav), sample_rate=moss.model.sample_rate)
    (result,) = moss.model.generate(text=TEXT, ref_audio=ref, max_tokens=MOSS_FRAMES)
    stereo = np.asarray(result.audio)
    assert stereo.shape == (MOSS_FRAMES * 640, 2)  # 640 samples a 12.5 Hz frame at 8 kHz
    assert not np.array_equal(stereo[:, 0], stereo[:, 1])
    got = pcm(run(moss, submit("a", seed=6, ref_audio=ref_wav.read_bytes()))["a"])
    assert got == to_pcm16(stereo.mean(axis=1))


def test_moss_tts_nano_usage_counts_generated_frames(moss, ref_wav):
    terminal = run(moss, submit("a", seed=1, ref_audio=ref_wav.read_bytes()))["a"][-1]
    assert terminal.usage.completion_tokens == MOSS_FRAMES


def test_moss_tts_nano_audio_sent_in_pieces_joins_to_the_whole(moss, ref_wav, monkeypatch):
    ref = ref_wav.read_bytes()
    whole = pcm(run(moss, submit("a", seed=2, ref_audio=ref))["a"])
    monkeypatch.setattr(moss, "_max_delta_samples", 1000)
    deltas = run(moss, submit("a", seed=2, ref_audio=ref))["a"]
    assert len([d for d in deltas if d.audio]) >= 3
    assert pcm(deltas) == whole


def test_moss_tts_nano_needs_a_reference_voice(moss):
    refused = moss.admit(submit("a", seed=1))
    assert refused.error.code == "bad_request" and "ref_audio" in refused.error.message


def test_moss_tts_nano_refuses_instructions_and_transcripts(moss, ref_wav):
    ref = ref_wav.read_bytes()
    assert "instructions" in moss.admit(submit("a", ref_audio=ref, instructions="x")).error.message
    assert "ref_text" in moss.admit(submit("a", ref_audio=ref, ref_text="hi")).error.message


def test_moss_tts_nano_without_its_audio_tokenizer_fails_at_load(tmp_path, monkeypatch):
    checkpoint = tmp_path / "moss"
    shutil.copytree(ensure_checkpoint("moss_tts_nano"), checkpoint)
    shutil.rmtree(checkpoint / "audio_tokenizer")
    # The fallback is a hub download: make it fail at once, as it does without network.
    import mlx_audio.codec.models.moss_audio_tokenizer.moss_audio_tokenizer as codec

    def no_hub(source):
        raise OSError(f"cannot download {source}")

    monkeypatch.setattr(codec, "_resolve_audio_tokenizer_dir", no_hub)
    with pytest.raises(ValueError, match="MOSS-TTS-Nano could not load"):
        load_tts_engine(str(checkpoint))


def test_reference_bytes_in_any_container_decode(moss):
    buffer = io.BytesIO()
    soundfile.write(buffer, np.zeros(16000, np.float32), 16000, format="FLAC")
    deltas = run(moss, submit("a", seed=1, ref_audio=buffer.getvalue()))["a"]
    assert deltas[-1].finish_reason == "stop"
