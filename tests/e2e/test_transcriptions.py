"""Speech in end to end: the real `serve` with a Whisper checkpoint (alone, or next to a chat
model with `--transcription-model`), the openai SDK and plain HTTP.

The server's text must equal a direct mlx-audio transcription of the same file in this
process; every response format must parse; streamed deltas must join to the final text; every
bad upload must be a 4xx naming the problem while the worker stays up.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import httpx
import pytest

from tests.support.server import SAME_BLAS, openai_client
from tests.support.stt_audio import SENTENCES, concat_wavs, duration, encode, speech_wav
from tests.support.subtitles import parse_srt, parse_vtt
from worker.tiny_models import ensure_checkpoint


@pytest.fixture(scope="module")
def whisper_path() -> str:
    return str(ensure_checkpoint("whisper"))


@pytest.fixture(scope="module")
def asr(start_server, whisper_path):
    """A Whisper checkpoint served alone: the worker picks the speech-in engine."""
    return start_server(whisper_path, *SAME_BLAS, name="whisper")


@pytest.fixture(scope="module")
def model(whisper_path) -> str:
    return Path(whisper_path).name


@pytest.fixture(scope="module")
def audio(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("speech-in")
    short = speech_wav(root / "short.wav", SENTENCES[0], seed=1)
    other = speech_wav(root / "other.wav", SENTENCES[1], seed=2)
    parts = [short, other, speech_wav(root / "third.wav", SENTENCES[2], seed=3)]
    repeat = math.ceil(65 / sum(duration(p) for p in parts))
    return {
        "short": short,
        "other": other,
        "long": concat_wavs(root / "long.wav", parts, repeat),  # three 30 s windows
    }


@pytest.fixture(scope="module")
def direct(whisper_path):
    """Direct mlx-audio transcriptions in this process, cached by (file, options)."""
    import mlx_audio.stt

    whisper = mlx_audio.stt.load(whisper_path)
    results: dict = {}

    def transcribe(path: Path, **options):
        key = (str(path), tuple(sorted(options.items())))
        if key not in results:
            results[key] = whisper.generate(str(path), **options)
        return results[key]

    return transcribe


def post(server, path: Path, url: str = "/v1/audio/transcriptions", **fields) -> httpx.Response:
    files = {"file": (path.name, path.read_bytes())}
    return httpx.post(
        f"{server.url}{url}", data=fields, files=files, headers=server.headers, timeout=300
    )


def events(body: str) -> list[dict]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]


# WAV goes through miniaudio, M4A through ffmpeg (every format's decoding: unit tests).
@pytest.mark.parametrize(("suffix", "codec"), [(".wav", None), (".m4a", ("-c:a", "aac"))])
def test_transcription_equals_direct_mlx_audio(asr, model, audio, direct, tmp_path, suffix, codec):
    path = audio["short"]
    if codec is not None:
        path = encode(path, tmp_path / f"short{suffix}", *codec)
    r = post(asr, path, model=model, language="en")
    assert r.status_code == 200, r.text
    assert r.json()["text"] == direct(path, language="en").text.strip()


def test_detected_language_and_segments_equal_direct_mlx_audio(asr, model, audio, direct):
    r = post(asr, audio["other"], model=model, response_format="verbose_json")
    body, want = r.json(), direct(audio["other"])
    assert body["language"] == "english" and want.language == "en"
    assert [(s["start"], s["end"], s["text"]) for s in body["segments"]] == [
        (s["start"], s["end"], s["text"]) for s in want.segments
    ]


def test_streamed_deltas_join_to_the_final_text(asr, model, audio, direct):
    r = post(asr, audio["long"], model=model, language="en", stream="true")
    assert r.headers["content-type"].startswith("text/event-stream")
    got = events(r.text)
    deltas = [e["delta"] for e in got if e["type"] == "transcript.text.delta"]
    [done] = [e for e in got if e["type"] == "transcript.text.done"]
    assert len(deltas) >= 2  # window by window, not all at the end
    assert "".join(deltas) == done["text"] == direct(audio["long"], language="en").text.strip()
    assert done["usage"]["input_tokens"] == math.ceil(duration(audio["long"]))


def test_word_timestamps_in_verbose_json(asr, model, audio):
    # Equality with mlx-audio's word timings is a unit test (test_transcription_engine); here: the words
    # reach the response, in order, within the audio.
    r = post(
        asr,
        audio["short"],
        model=model,
        language="en",
        response_format="verbose_json",
        **{"timestamp_granularities[]": ["word", "segment"]},
    )
    words = r.json()["words"]
    assert words and all(w["word"] == w["word"].strip() for w in words)
    starts = [w["start"] for w in words]
    assert starts == sorted(starts) and words[-1]["end"] <= duration(audio["short"]) + 0.5


@pytest.mark.parametrize("fmt", ["json", "text", "srt", "vtt"])
def test_every_response_format_parses(asr, model, audio, direct, fmt):
    r = post(asr, audio["short"], model=model, language="en", response_format=fmt)
    assert r.status_code == 200, r.text
    text = direct(audio["short"], language="en").text.strip()
    if fmt == "json":
        assert r.json()["text"] == text
    elif fmt == "text":
        assert r.text == text + "\n"
    elif fmt == "srt":
        cues = parse_srt(r.text)
        assert " ".join(c[3] for c in cues) == " ".join(text.split())
    else:
        cues = parse_vtt(r.text)
        assert " ".join(c[2] for c in cues) == " ".join(text.split())


@pytest.mark.parametrize("fmt", ["verbose_json", "srt", "vtt"])
def test_a_sine_gives_valid_timed_formats_inside_the_clip(asr, model, tmp_path, fmt):
    """Random weights on a tone: statistics that are not numbers are null (a 500 before),
    cues in order and inside the clip."""
    import numpy as np

    from tests.support.stt_audio import write_wav

    seconds = 2.5
    t = np.arange(int(16000 * seconds)) / 16000
    sine = write_wav(tmp_path / "sine.wav", (0.3 * np.sin(2 * np.pi * 440 * t)).astype("float32"))
    words = {"timestamp_granularities": "word"} if fmt == "verbose_json" else {}
    r = post(asr, sine, model=model, response_format=fmt, **words)
    assert r.status_code == 200, r.text
    if fmt == "verbose_json":
        times = [(s["start"], s["end"]) for s in r.json()["segments"]]
    elif fmt == "srt":
        times = [(start, end) for _, start, end, _ in parse_srt(r.text)]
    else:
        times = [(start, end) for start, end, _ in parse_vtt(r.text)]
    starts = [start for start, _ in times]
    assert starts == sorted(starts)
    assert all(0 <= start <= end <= seconds for start, end in times), times


def test_openai_sdk_transcription_and_translation(asr, audio, direct):
    client = openai_client(asr)
    with open(audio["short"], "rb") as f:
        result = client.audio.transcriptions.create(model="whisper-1", file=f, language="en")
    assert result.text == direct(audio["short"], language="en").text.strip()
    with open(audio["short"], "rb") as f:
        translated = client.audio.translations.create(model="whisper-1", file=f)
    assert translated.text == direct(audio["short"], task="translate").text.strip()


def test_openai_sdk_stream(asr, audio, direct):
    client = openai_client(asr)
    with open(audio["short"], "rb") as f:
        stream = client.audio.transcriptions.create(
            model="whisper-1", file=f, language="en", stream=True
        )
        got = list(stream)
    deltas = "".join(e.delta for e in got if e.type == "transcript.text.delta")
    assert got[-1].type == "transcript.text.done"
    assert deltas == got[-1].text == direct(audio["short"], language="en").text.strip()


@pytest.mark.parametrize(
    ("name", "content", "fields", "status", "words"),
    [
        (None, None, {}, 400, "`file` is required"),
        ("empty.wav", b"", {}, 400, "empty"),
        ("broken.mp3", b"ID3" + b"\x00" * 64 + b"\x01\x02" * 200, {}, 400, "could not be decoded"),
        ("notes.txt", b"meeting notes, not a recording", {}, 400, "supported audio format"),
        ("a.wav", None, {"response_format": "docx"}, 400, "response_format"),
        ("a.wav", None, {"language": "klingon"}, 400, "`language`"),
    ],
)
def test_bad_uploads_are_4xx_naming_the_problem(
    asr, model, audio, name, content, fields, status, words
):
    pid = asr.worker_pid()
    files = {}
    if name is not None:
        files["file"] = (name, audio["short"].read_bytes() if content is None else content)
    else:
        files["model"] = (None, model)
    r = httpx.post(
        f"{asr.url}/v1/audio/transcriptions",
        data={"model": model, **fields} if name is not None else None,
        files=files,
        headers=asr.headers,
        timeout=120,
    )
    assert r.status_code == status, r.text
    assert words in r.json()["error"]["message"]
    assert asr.worker_pid() == pid and asr.health().status_code == 200


def test_client_gone_aborts_between_windows(asr, model, audio):
    before = asr.stats()["requests_aborted"]
    files = {"file": (audio["long"].name, audio["long"].read_bytes())}
    data = {"model": model, "language": "en", "stream": "true"}
    with httpx.stream(
        "POST",
        f"{asr.url}/v1/audio/transcriptions",
        data=data,
        files=files,
        headers=asr.headers,
        timeout=120,
    ) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and "transcript.text.delta" in line:
                break  # the first window is done; leave before the others
    for _ in range(600):
        stats = asr.stats()
        if stats["requests_aborted"] > before and stats["active"] == 0:
            break
        time.sleep(0.1)
    assert stats["requests_aborted"] == before + 1 and stats["active"] == 0


@pytest.fixture(scope="module")
def chat_and_asr(start_server, qwen3_path, whisper_path):
    """A chat model with Whisper next to it, and a small upload limit (0.5 MB)."""
    return start_server(
        qwen3_path,
        "--transcription-model",
        whisper_path,
        "--max-body-mb",
        "0.5",
        *SAME_BLAS,
        name="chat-and-asr",
    )


def test_asr_model_next_to_a_chat_model(chat_and_asr, qwen3_path, whisper_path, audio, direct):
    client = openai_client(chat_and_asr)
    chat = client.chat.completions.create(
        model=Path(qwen3_path).name, messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    assert chat.choices[0].message.content
    r = post(chat_and_asr, audio["short"], model=Path(whisper_path).name, language="en")
    assert r.json()["text"] == direct(audio["short"], language="en").text.strip()


def test_oversized_upload_is_a_413_and_the_server_stays_up(chat_and_asr):
    pid = chat_and_asr.worker_pid()
    r = httpx.post(
        f"{chat_and_asr.url}/v1/audio/transcriptions",
        data={"model": "whisper-1"},
        files={"file": ("big.wav", b"RIFF" + b"\0" * 1_000_000)},
        headers=chat_and_asr.headers,
        timeout=60,
    )
    assert r.status_code == 413 and r.json()["error"]["param"] == "file"
    assert chat_and_asr.worker_pid() == pid and chat_and_asr.health().status_code == 200
