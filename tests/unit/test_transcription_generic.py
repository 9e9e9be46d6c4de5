"""Non-Whisper families (Qwen3-ASR, Parakeet, ...): chunking, stitching and argument mapping,
with stand-in models that record how the engine calls their `generate`."""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest

from protocol.inputs import TranscribeInputs
from protocol.messages import ErrorCode, FinishReason, Submit

pytest.importorskip("mlx_audio.stt")

from worker.transcription.engine import SttEngine  # noqa: E402
from worker.transcription.generic import split_at_quiet_points  # noqa: E402

RATE = 16000


def wav_bytes(seconds: float, quiet_at: float | None = None) -> bytes:
    """A 16 kHz tone with an optional 0.2 s silence at `quiet_at` seconds."""
    t = np.arange(int(seconds * RATE)) / RATE
    samples = 0.4 * np.sin(2 * np.pi * 220 * t)
    if quiet_at is not None:
        samples[int(quiet_at * RATE) : int((quiet_at + 0.2) * RATE)] = 0.0
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(RATE)
        out.writeframes((samples * 32767).astype("<i2").tobytes())
    return buf.getvalue()


@dataclass
class FakeQwenAsr:
    """Shaped like mlx-audio's Qwen3-ASR: STTOutput with chunk-level segments."""

    sample_rate: int = RATE
    calls: list[dict] = field(default_factory=list)

    def generate(self, audio, *, language=None, system_prompt=None, temperature=0.0, verbose=False):
        seconds = audio.shape[0] / RATE
        self.calls.append(
            {"seconds": seconds, "language": language, "system_prompt": system_prompt}
        )
        text = f"chunk{len(self.calls)}"
        segment = {"text": text, "start": 0.0, "end": seconds, "language": "English"}
        return SimpleNamespace(
            text=text, segments=[segment], language="English", generation_tokens=3
        )


@dataclass
class FakeParakeet:
    """Shaped like Parakeet: AlignedResult with timed sentences; no language argument."""

    sample_rate: int = RATE

    def generate(self, audio, *, dtype=None, chunk_duration=None):
        sentence = SimpleNamespace(start=0.5, end=1.5, text="hi there", tokens=[1, 2, 3])
        return SimpleNamespace(text="hi there", sentences=[sentence])


def transcribe(engine: SttEngine, **inputs) -> list:
    sub = Submit("r", TranscribeInputs(**inputs), stream=True)
    deltas = [engine.admit(sub)]
    while deltas[-1].finish_reason is None:
        deltas.extend(engine.step())
    return deltas


def test_audio_within_one_chunk_is_one_generate_call_on_all_of_it():
    model = FakeQwenAsr()
    deltas = transcribe(SttEngine(model, "/m/qwen3-asr", "qwen3_asr"), audio=wav_bytes(5.0))
    assert [round(c["seconds"], 3) for c in model.calls] == [5.0]
    assert "".join(d.text for d in deltas) == "chunk1"


def test_long_audio_is_chunked_with_segment_offsets_from_the_file_start():
    model = FakeQwenAsr()
    deltas = transcribe(SttEngine(model, "/m/qwen3-asr", "qwen3_asr"), audio=wav_bytes(70.0))
    assert len(model.calls) == 3 and all(c["seconds"] <= 30.0 for c in model.calls)
    segments = deltas[-1].segments
    assert segments[0].start == 0.0 and segments[-1].end == pytest.approx(70.0)
    assert all(
        a.end == pytest.approx(b.start) for a, b in zip(segments[:-1], segments[1:], strict=True)
    )
    assert "".join(d.text for d in deltas) == "chunk1 chunk2 chunk3"


def test_each_chunk_is_one_step():
    engine = SttEngine(FakeQwenAsr(), "/m/qwen3-asr", "qwen3_asr")
    sub = Submit("r", TranscribeInputs(wav_bytes(70.0)), True)
    engine.admit(sub)
    first = engine.step()
    assert first[0].finish_reason is None and first[0].text == "chunk1"
    assert engine.abort(["r"])[0].finish_reason == FinishReason.ABORT


def test_language_code_reaches_qwen3_asr_as_its_name_and_prompt_as_system_prompt():
    model = FakeQwenAsr()
    engine = SttEngine(model, "/m/qwen3-asr", "qwen3_asr")
    transcribe(engine, audio=wav_bytes(2.0), language="de", prompt="Names: Ada")
    assert model.calls[0]["language"] == "German"
    assert model.calls[0]["system_prompt"] == "Names: Ada"


def test_detected_language_is_reported():
    deltas = transcribe(SttEngine(FakeQwenAsr(), "/m/q", "qwen3_asr"), audio=wav_bytes(2.0))
    assert deltas[-1].language == "English"


def test_parakeet_sentences_become_segments_and_usage_counts_their_tokens():
    deltas = transcribe(SttEngine(FakeParakeet(), "/m/parakeet", "parakeet"), audio=wav_bytes(2.0))
    [segment] = deltas[-1].segments
    assert (segment.start, segment.end, segment.text) == (0.5, 1.5, "hi there")
    assert deltas[-1].usage.completion_tokens == 3 and deltas[-1].usage.prompt_tokens == 2


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ({"language": "en"}, "`language`"),
        ({"prompt": "context"}, "`prompt`"),
        ({"temperature": 0.5}, "`temperature`"),
        ({"task": "translate"}, "cannot translate"),
        ({"timestamps": ["word", "segment"]}, "word timestamps"),
    ],
)
def test_options_a_family_cannot_honour_are_refused(inputs, named):
    engine = SttEngine(FakeParakeet(), "/m/parakeet", "parakeet")
    delta = engine.admit(Submit("r", TranscribeInputs(wav_bytes(1.0), **inputs), True))
    assert delta.finish_reason == FinishReason.ERROR
    assert delta.error.code == ErrorCode.BAD_REQUEST and named in delta.error.message


def test_non_whisper_models_only_transcribe():
    assert SttEngine(FakeParakeet(), "/m/p", "parakeet").capabilities() == ["transcribe"]


def test_chunks_are_cut_at_the_quiet_point_before_the_limit():
    audio = np.frombuffer(wav_bytes(50.0, quiet_at=29.0)[44:], dtype="<i2") / 32768.0
    ranges = split_at_quiet_points(audio, RATE, 30.0)
    assert len(ranges) == 2
    assert 29.0 <= ranges[0][1] / RATE <= 29.2
    assert ranges[1] == (ranges[0][1], len(audio))


def test_short_audio_is_one_chunk():
    assert split_at_quiet_points(np.zeros(RATE * 10), RATE, 30.0) == [(0, RATE * 10)]
