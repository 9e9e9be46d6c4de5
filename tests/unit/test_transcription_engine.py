"""The speech-in engine on the tiny random-weight Whisper, against direct mlx-audio runs.

Each transcription runs once per module (fixtures); the tests assert one property each. The
direct reference is `mlx_audio.stt.load(path).generate(FILE, ...)` on the same file path, so
equal text also means the engine decoded and resampled the upload exactly as mlx-audio does.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from protocol.inputs import TranscribeInputs
from protocol.messages import ErrorCode, FinishReason, Submit
from tests.support.stt_audio import SENTENCES, concat_wavs, duration, speech_wav
from worker.tiny_models import ensure_checkpoint

mlx_audio_stt = pytest.importorskip("mlx_audio.stt")

from worker.transcription.engine import SttEngine, load_stt_engine  # noqa: E402
from worker.transcription.family import UnsupportedSpeechModel  # noqa: E402


@pytest.fixture(scope="module")
def whisper_path() -> str:
    return str(ensure_checkpoint("whisper"))


@pytest.fixture(scope="module")
def model(whisper_path):
    return mlx_audio_stt.load(whisper_path)


@pytest.fixture(scope="module")
def engine(model, whisper_path) -> SttEngine:
    return SttEngine(model, whisper_path, "whisper")


@pytest.fixture(scope="module")
def audio(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("stt-audio")
    short = speech_wav(root / "short.wav", SENTENCES[0], seed=1)
    other = speech_wav(root / "other.wav", SENTENCES[1], seed=2)
    third = speech_wav(root / "third.wav", SENTENCES[2], seed=3)
    # Over 30 s, so Whisper decodes it in two windows.
    parts = [short, other, third]
    repeat = math.ceil(34 / sum(duration(p) for p in parts))
    long = concat_wavs(root / "long.wav", parts, repeat)
    return {"short": short, "other": other, "long": long}


def submit(path: Path | None, request_id: str = "r", **inputs) -> Submit:
    if path is not None:
        inputs = {"audio": path.read_bytes(), "filename": path.name, **inputs}
    return Submit(request_id, TranscribeInputs(**inputs), stream=True)


def run(engine: SttEngine, sub: Submit) -> list:
    deltas = [engine.admit(sub)]
    while deltas[-1].finish_reason is None:
        deltas.extend(d for d in engine.step() if d.request_id == sub.request_id)
    return deltas


def timed(segments) -> list[tuple[float, float, str]]:
    return [(s.start, s.end, s.text) for s in segments]


def direct_timed(result) -> list[tuple[float, float, str]]:
    return [(s["start"], s["end"], s["text"]) for s in result.segments]


@pytest.fixture(scope="module")
def detected(engine, model, audio):
    """The short file with the language left to detect: (engine deltas, direct result)."""
    return run(engine, submit(audio["short"])), model.generate(str(audio["short"]))


@pytest.fixture(scope="module")
def long(engine, model, audio):
    deltas = run(engine, submit(audio["long"], language="en"))
    return deltas, model.generate(str(audio["long"]), language="en")


@pytest.fixture(scope="module")
def words(engine, model, audio):
    deltas = run(engine, submit(audio["other"], language="en", timestamps=["word", "segment"]))
    return deltas, model.generate(str(audio["other"]), language="en", word_timestamps=True)


def test_transcript_equals_direct_mlx_audio(detected):
    deltas, direct = detected
    assert deltas[-1].finish_reason == FinishReason.STOP
    assert "".join(d.text for d in deltas) == direct.text.strip()


def test_segments_equal_direct_mlx_audio(detected):
    deltas, direct = detected
    assert timed(deltas[-1].segments) == direct_timed(direct)


def test_detected_language_is_reported(detected):
    deltas, direct = detected
    assert deltas[-1].language == direct.language


def test_first_delta_is_the_empty_accepted_delta(detected):
    deltas, _ = detected
    assert deltas[0].finish_reason is None and deltas[0].text == ""


def test_usage_counts_audio_seconds_and_text_tokens(detected, audio):
    deltas, direct = detected
    usage = deltas[-1].usage
    assert usage.prompt_tokens == math.ceil(duration(audio["short"]))
    text_tokens = sum(len(s["tokens"]) for s in direct.segments)
    assert usage.completion_tokens == text_tokens > 0


def test_completed_transcriptions_count_their_audio_seconds(model, whisper_path, audio):
    from worker.runtime.stats import WorkerStats

    stats = WorkerStats(model="whisper")
    engine = SttEngine(model, whisper_path, "whisper")
    engine.bind_stats(stats)
    run(engine, submit(audio["short"], language="en"))
    engine.admit(submit(audio["other"], "aborted", language="en"))
    engine.abort(["aborted"])  # not transcribed: not counted
    seconds = stats.snapshot().transcribed_seconds
    assert seconds == pytest.approx(duration(audio["short"]), abs=1e-3)


def test_long_audio_transcript_equals_direct_mlx_audio(long):
    deltas, direct = long
    assert "".join(d.text for d in deltas) == direct.text.strip()


def test_long_audio_segments_are_stitched_with_file_timestamps(long, audio):
    deltas, direct = long
    segments = deltas[-1].segments
    assert timed(segments) == direct_timed(direct)
    assert max(s.end for s in segments) > 30.0
    assert [s.id for s in segments] == list(range(len(segments)))


def test_long_audio_streams_text_window_by_window(long):
    deltas, _ = long
    texts = [d.text for d in deltas[1:-1] if d.text]
    assert len(texts) >= 1  # the first window's text arrives before the last window ends


def test_word_timestamps_equal_direct_mlx_audio(words):
    deltas, direct = words
    got = [w for s in deltas[-1].segments for w in s.words]
    want = [[w["word"], w["start"], w["end"]] for s in direct.segments for w in s["words"]]
    assert got == want and got


def test_translation_with_prompt_equals_direct_mlx_audio(engine, model, audio):
    options = {"language": "de", "task": "translate", "prompt": "Names: Ada, Grace."}
    deltas = run(engine, submit(audio["short"], **options))
    direct = model.generate(
        str(audio["short"]), language="de", task="translate", initial_prompt="Names: Ada, Grace."
    )
    assert "".join(d.text for d in deltas) == direct.text.strip()


def test_abort_between_windows_ends_the_request(engine, audio):
    sub = submit(audio["long"], request_id="aborted", language="en")
    assert engine.admit(sub).finish_reason is None
    engine.step()  # the first 30 s window
    [ended] = engine.abort(["aborted"])
    assert ended.finish_reason == FinishReason.ABORT
    assert ended.usage.prompt_tokens == math.ceil(duration(audio["long"]))
    assert engine.active_ids() == [] and engine.step() == []


def test_abort_ignores_unknown_requests(engine):
    assert engine.abort(["nobody"]) == []


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ({"audio": b""}, "`file`"),
        ({"audio": b"this is text, not sound", "filename": "notes.txt"}, "not in a supported"),
        ({"audio": b"RIFF....WAVEjunk", "filename": "x.wav", "language": "xx"}, "`language`"),
        ({"audio": b"x", "temperature": 1.5}, "`temperature`"),
        ({"audio": b"x", "task": "summarize"}, "`task`"),
        ({"audio": b"x", "timestamps": ["char"]}, "`timestamp_granularities`"),
    ],
)
def test_bad_input_fails_the_request_naming_the_problem(engine, inputs, named):
    delta = engine.admit(submit(None, **inputs))
    assert delta.finish_reason == FinishReason.ERROR
    assert delta.error.code == ErrorCode.BAD_REQUEST
    assert named in delta.error.message
    assert engine.active_ids() == []


def test_capabilities_include_translation_for_multilingual_whisper(engine):
    assert engine.capabilities() == ["transcribe", "translate"]


def test_ready_info_names_the_speech_model(engine, whisper_path):
    info = engine.ready_info()
    assert info.model_path == whisper_path and info.family == "whisper"
    assert info.sample_rate == 16000


def test_load_stt_engine_refuses_a_text_model_naming_supported_families():
    with pytest.raises(UnsupportedSpeechModel) as caught:
        load_stt_engine(str(ensure_checkpoint("qwen3")))
    assert "whisper" in str(caught.value) and "qwen3_asr" in str(caught.value)


def test_nothing_imports_the_audio_device_library(detected):
    # mlx-audio's players need PortAudio (sounddevice); a server has no sound card.
    assert "sounddevice" not in sys.modules
