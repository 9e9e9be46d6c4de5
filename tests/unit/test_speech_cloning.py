"""Voice cloning in the speech engine on a tiny random-weight Qwen3-TTS Base checkpoint (speaker
encoder + the codec's encoder): a seeded clone equals mlx-audio's own `generate(ref_audio=file,
ref_text=...)` sample for sample, in context and from the audio alone; bad reference audio is
refused by name and the engine goes on serving."""

from __future__ import annotations

import io
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
import soundfile

from protocol.inputs import SpeechInputs
from protocol.messages import Submit
from tests.support.speech import generated_audio
from worker.speech.audio import to_pcm16
from worker.speech.engine import TtsEngine, load_tts_engine
from worker.speech.families import MOSS_TTS_NANO, SpeechRequest
from worker.tiny_models import ensure_checkpoint

TEXT = "Good morning."
REF_TEXT = "Hello there."
RATE = 8000  # the tiny checkpoint's rate


def wav(seconds: float, rate: int = RATE) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    buffer = io.BytesIO()
    soundfile.write(buffer, 0.3 * np.sin(2 * np.pi * 220 * t), rate, format="WAV")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def base() -> TtsEngine:
    return load_tts_engine(str(ensure_checkpoint("qwen3_tts_base")))


@pytest.fixture(scope="module")
def ref_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ref") / "ref.wav"
    path.write_bytes(wav(1.0))
    return path


def submit(rid: str, **inputs) -> Submit:
    return Submit(rid, SpeechInputs(TEXT, **inputs), True)


def run(engine: TtsEngine, s: Submit) -> list:
    deltas = [engine.admit(s)]
    while engine.active_ids():
        deltas.extend(engine.step())
    return deltas


def direct(model, seed: int, **kwargs) -> bytes:
    mx.random.seed(seed)
    chunks = generated_audio(model, text=TEXT, stream=True, streaming_interval=0.08, **kwargs)
    return b"".join(to_pcm16(a) for a in chunks)


def test_base_reports_cloning_with_a_transcript_and_no_presets(base):
    info = base.ready_info()
    assert (info.cloning, info.ref_text, info.voices) == (True, True, [])
    assert info.instructions is False


def test_in_context_clone_equals_direct_mlx_audio_with_the_same_file(base, ref_file):
    deltas = run(base, submit("a", ref_audio=ref_file.read_bytes(), ref_text=REF_TEXT, seed=7))
    assert deltas[-1].finish_reason == "stop", deltas[-1].error
    got = b"".join(d.audio for d in deltas if d.audio)
    assert got and got == direct(base.model, 7, ref_audio=str(ref_file), ref_text=REF_TEXT)


def test_a_clone_of_several_lines_equals_direct_mlx_audio_line_by_line(base, ref_file):
    # mlx-audio speaks each line as a segment of its own codec stream: the engine decodes a
    # line's last frames at its end and starts the chunk schedule again for the next.
    text = "Good morning.\nHow are you?\nFine."
    submitted = Submit("a", SpeechInputs(text, ref_audio=ref_file.read_bytes(), seed=5), True)
    deltas = run(base, submitted)
    assert deltas[-1].finish_reason == "stop", deltas[-1].error
    got = b"".join(d.audio for d in deltas if d.audio)
    mx.random.seed(5)
    chunks = generated_audio(base.model, text=text, ref_audio=str(ref_file), lang_code="auto",
                             stream=True, streaming_interval=0.08)  # fmt: skip
    assert got and got == b"".join(to_pcm16(a) for a in chunks)


def test_clone_from_the_audio_alone_equals_direct_mlx_audio(base, ref_file):
    deltas = run(base, submit("a", ref_audio=ref_file.read_bytes(), seed=3))
    got = b"".join(d.audio for d in deltas if d.audio)
    assert got and got == direct(base.model, 3, ref_audio=str(ref_file))


def test_the_transcript_changes_the_cloned_voice(base, ref_file):
    data = ref_file.read_bytes()
    with_text = run(base, submit("a", ref_audio=data, ref_text=REF_TEXT, seed=1))
    without = run(base, submit("b", ref_audio=data, seed=1))
    assert b"".join(d.audio for d in with_text if d.audio) != b"".join(
        d.audio for d in without if d.audio
    )


@pytest.mark.parametrize(
    ("ref_audio", "ref_text", "words"),
    [
        (b"not audio at all", REF_TEXT, "could not be decoded"),
        (wav(61.5), REF_TEXT, "longer than 60 s"),
        (wav(0.1), REF_TEXT, "at least 0.5 s"),
        (wav(1.0), "   ", "ref_text is empty"),
        (b"", None, "empty"),
    ],
)
def test_bad_reference_audio_is_refused_by_name_and_the_engine_goes_on(
    base, ref_file, ref_audio, ref_text, words
):
    refused = base.admit(submit("bad", ref_audio=ref_audio, ref_text=ref_text))
    assert refused.error.code == "bad_request" and words in refused.error.message
    assert "ref_" in refused.error.message
    assert base.active_ids() == []
    assert run(base, submit("good", ref_audio=ref_file.read_bytes(), seed=2))[-1].error is None


def test_a_preset_voice_on_base_is_refused_listing_none(base):
    refused = base.admit(submit("a", voice="vivian"))
    assert "unknown voice" in refused.error.message


def test_families_that_clone_from_audio_alone_refuse_a_transcript():
    assert MOSS_TTS_NANO.takes_ref_text(object()) is False
    kwargs = MOSS_TTS_NANO.kwargs(object(), SpeechRequest(TEXT, ref_audio="x"), {})
    assert "ref_text" not in kwargs
