"""Real Whisper through the real server: transcripts of espeak-ng speech equal direct
mlx-audio's, with their word error rate reported; a two-minute recording; language detection.

The combination, measured with `python -m tests.weights.measure_wer` (docs/speech.md): Whisper
tiny.en in float32 on espeak-ng's `en-us` voice at 130 words a minute. Over the ten sentences
tiny.en's WER was 0.105 there, against 0.133 at espeak-ng's default rate (175), 0.19 for its
default voice (`en`, British) at 175, 0.17-0.24 for `en+m3`; `en+f3` at 130 was within two
words (0.086) but worse on an earlier set of sentences (0.128 against 0.101). Base did better
(0.067 with `en-us`) at twice the time a window, and the shared server serves tiny.en.
Float32 rather than mlx-audio's float16: ~6x faster a window on this CPU (float16 matmuls do
not use BLAS), with the same WER on these sentences.

Every transcript is compared with direct mlx-audio (tests/support/direct_process.py: the
converted checkpoint loaded as mlx-audio's loader does, in float32, `generate(file,
fp16=False, language=...)`), so a WER bound failing means the model or the voice changed, not
the server. Whisper base's language detection runs on a server of its own (`--dtype float32`),
started for two clips of ~5 s (French, German) and stopped: one window each, ~7 s in float32
(~50 s in float16; a clip whose language comes out wrong costs ~40-60 s more, as Whisper
retries the window at every temperature of its fallback ladder).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.spoken import (
    MORE_SENTENCES,
    SENTENCES,
    concatenate,
    seconds,
    speak,
    word_error_rate,
    words,
)

pytestmark = pytest.mark.real_weights

# Measured 0.105 (ten sentences) and 0.059 (the two-minute recording); bounds a bit above.
SENTENCE_WER_BOUND = 0.15
RECORDING_WER_BOUND = 0.08
# Words of MORE_SENTENCES and SENTENCES the recording's transcript must contain.
KEY_WORDS = {
    "piano", "football", "coffee", "library", "umbrella", "museum", "tomatoes", "pilot",
    "boat", "beach", "stars", "snow", "concert", "sunrise",
}  # fmt: skip
GAP_S = 1.25  # silence between the recording's sentences: 22 sentences, about 120 s

# espeak-ng voice -> (text, Whisper's name of the language). Base's language detection on
# espeak-ng's voices is fragile: most French sentences tried came out Thai, Malay, Romanian or
# Japanese (probability of French 0.1-0.4), and the rate matters. These two were picked for
# coming out right at every rate from 120 to 150 (French 0.44-0.72, German 0.95-0.98, at 130
# 0.72 and 0.95); each is ~4.5-5 s spoken at 130.
LANGUAGE_CLIPS = {
    "fr": ("Bonjour madame, je voudrais du pain et du fromage, s'il vous plaît.", "french"),
    "de": ("Guten Morgen, ich möchte ein Brot und einen Kaffee, bitte.", "german"),
}


def transcribe(server, model: str, path: Path, **fields) -> httpx.Response:
    files = {"file": (path.name, path.read_bytes())}
    r = httpx.post(
        f"{server.url}/v1/audio/transcriptions",
        data={"model": model, **fields},
        files=files,
        headers=server.headers,
        timeout=300,
    )
    assert r.status_code == 200, r.text
    return r


@pytest.fixture(scope="module")
def sentences(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("sentences")
    return [speak(root / f"{i}.wav", text) for i, text in enumerate(SENTENCES + MORE_SENTENCES)]


def test_transcripts_equal_direct_mlx_audio_and_their_wer_is_reported(
    real_server, tiny_en, direct, sentences, report
):
    files = sentences[: len(SENTENCES)]
    with ThreadPoolExecutor(1) as pool:  # the direct runs overlap the server's
        futures = [
            pool.submit(direct.transcribe, tiny_en, f, "float32", language="en") for f in files
        ]
        served = [
            transcribe(real_server, Path(tiny_en).name, f, language="en").json()["text"]
            for f in files
        ]
        expected = [f.result()["text"] for f in futures]

    server_wer = word_error_rate(zip(SENTENCES, served, strict=True))
    direct_wer = word_error_rate(zip(SENTENCES, expected, strict=True))
    report(
        f"tiny.en float32, espeak-ng -v en-us -s 130, {len(files)} sentences: "
        f"WER server {server_wer:.3f}, direct mlx-audio {direct_wer:.3f}"
    )
    assert served == expected
    assert server_wer <= SENTENCE_WER_BOUND


def test_two_minute_recording_has_monotonic_segments_and_the_right_text(
    real_server, tiny_en, direct, sentences, report, tmp_path
):
    recording = concatenate(tmp_path / "two-minutes.wav", sentences, gap=GAP_S)
    duration = seconds(recording)
    assert 115 <= duration <= 130

    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(direct.transcribe, tiny_en, recording, "float32", language="en")
        body = transcribe(
            real_server,
            Path(tiny_en).name,
            recording,
            language="en",
            response_format="verbose_json",
        ).json()
        want = future.result()

    segments = [(s["start"], s["end"], s["text"]) for s in body["segments"]]
    wer = word_error_rate([(" ".join(SENTENCES + MORE_SENTENCES), body["text"])])
    direct_wer = word_error_rate([(" ".join(SENTENCES + MORE_SENTENCES), want["text"])])
    report(
        f"tiny.en float32, a {duration:.0f} s recording of {len(sentences)} sentences: "
        f"WER server {wer:.3f}, direct mlx-audio {direct_wer:.3f}, {len(segments)} segments"
    )
    assert segments == [tuple(s) for s in want["segments"]]
    assert body["text"] == want["text"]
    assert len(segments) >= 10  # one per sentence, or close to it
    bounds = [t for start, end, _ in segments for t in (start, end)]
    assert bounds == sorted(bounds) and all(s < e for s, e, _ in segments)
    assert bounds[0] >= 0 and duration - 10 <= bounds[-1] <= duration + 0.5
    assert abs(body["duration"] - duration) <= 1  # the server gives whole seconds
    assert KEY_WORDS <= set(words(body["text"])), KEY_WORDS - set(words(body["text"]))
    assert wer <= RECORDING_WER_BOUND


@pytest.mark.parametrize("code", list(LANGUAGE_CLIPS))
def test_whisper_base_detects_the_language(base_server, whisper_base, tmp_path, code):
    text, language = LANGUAGE_CLIPS[code]
    clip = speak(tmp_path / f"{code}.wav", text, voice=code, rate=130)
    assert 3 <= seconds(clip) <= 5.5
    body = transcribe(
        base_server, Path(whisper_base).name, clip, response_format="verbose_json"
    ).json()
    assert body["language"] == language, body
