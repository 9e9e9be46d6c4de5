"""`/v1/audio/transcriptions` and `/v1/audio/translations` over the real app and a scripted
engine: forms, formats, streaming events, the model check and every 4xx."""

from __future__ import annotations

import json

import pytest

from protocol.inputs import TranscribeInputs
from protocol.messages import Delta, ErrorInfo, Segment, Usage
from protocol.ready import Capability, TranscriptionInfo
from tests.support.fake_engine import FakeEngine, accepted, make_client, ready

URL = "/v1/audio/transcriptions"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt fake bytes the worker would decode"
SEGMENTS = [Segment(0, 0.0, 1.5, " Hello", [[" Hello", 0.0, 1.5]]), Segment(1, 1.5, 3.0, " world.")]


def finished(language: str = "en") -> list[Delta]:
    return [
        Delta(
            "r",
            finish_reason="stop",
            usage=Usage(3, 4),
            segments=[Segment(s.id, s.start, s.end, s.text, list(s.words)) for s in SEGMENTS],
            language=language,
        )
    ]


def speech_engine(
    capabilities=(Capability.TRANSCRIBE, Capability.TRANSLATE), path="/models/whisper-tiny"
) -> FakeEngine:
    engine = FakeEngine([accepted(), [Delta("r", text="Hello")], [Delta("r", text=" world.")]])
    engine.script.append(finished())
    engine.model_name, engine.model_path = "whisper-tiny", "/models/whisper-tiny"
    asr = TranscriptionInfo(path, "whisper", 16000, True)
    engine.ready_info = ready(*capabilities, model=engine.model_path, text=None, transcription=asr)
    return engine


def post(client, fields=None, file=("speech.wav", WAV, "audio/wav"), url=URL, **kw):
    data = {"model": "whisper-tiny", **(fields or {})}
    return client.post(url, data=data, files={"file": file}, **kw)


def sse_events(body: str) -> list[dict]:
    return [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]


@pytest.fixture
def engine() -> FakeEngine:
    return speech_engine()


@pytest.fixture
def client(engine):
    with make_client(engine) as c:
        yield c


def test_json_response_has_the_joined_text_and_usage(client):
    r = post(client)
    assert r.status_code == 200, r.text
    assert r.json()["text"] == "Hello world."
    assert r.json()["usage"]["input_tokens"] == 3 and r.json()["usage"]["output_tokens"] == 4


def test_upload_and_fields_reach_the_worker_unchanged(client, engine):
    fields = {"language": "de", "prompt": "Ada", "temperature": "0.4"}
    post(client, fields)
    assert engine.last.op == "transcribe" and engine.last.stream is False
    assert engine.last.inputs == TranscribeInputs(
        audio=WAV,
        filename="speech.wav",
        language="de",
        prompt="Ada",
        temperature=0.4,
        task="transcribe",
        timestamps=["segment"],
    )


def test_text_format_is_plain_text(client):
    r = post(client, {"response_format": "text"})
    assert r.text == "Hello world.\n" and r.headers["content-type"].startswith("text/plain")


def test_verbose_json_carries_language_segments_and_words(client, engine):
    fields = {"response_format": "verbose_json", "timestamp_granularities[]": ["word", "segment"]}
    body = post(client, fields).json()
    assert engine.last.inputs.timestamps == ["word", "segment"]
    assert body["language"] == "english" and body["text"] == "Hello world."
    assert [s["text"] for s in body["segments"]] == [" Hello", " world."]
    assert body["words"] == [{"word": "Hello", "start": 0.0, "end": 1.5}]


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_subtitle_formats_have_one_cue_per_segment(client, fmt):
    r = post(client, {"response_format": fmt})
    assert r.status_code == 200
    assert r.text.count("-->") == 2 and "Hello" in r.text
    assert r.text.startswith("WEBVTT\n\n" if fmt == "vtt" else "1\n00:00:00,000 --> 00:00:01,500")


def test_stream_sends_text_deltas_then_done_with_the_joined_text_and_usage(client, engine):
    r = post(client, {"stream": "true"})
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r.text)
    deltas = [e["delta"] for e in events if e["type"] == "transcript.text.delta"]
    [done] = [e for e in events if e["type"] == "transcript.text.done"]
    assert "".join(deltas) == done["text"] == "Hello world."
    assert done["usage"]["type"] == "tokens" and done["usage"]["total_tokens"] == 7
    assert engine.last.stream is True


def test_translation_asks_the_worker_to_translate(client, engine):
    r = post(client, url="/v1/audio/translations")
    assert r.status_code == 200 and engine.last.inputs.task == "translate"


@pytest.mark.parametrize("model", ["whisper-1", "/models/whisper-tiny"])
def test_openai_model_id_and_checkpoint_path_address_the_speech_model(client, model):
    assert post(client, {"model": model}).status_code == 200


def test_speech_model_added_next_to_a_chat_model_is_named_by_its_directory():
    engine = speech_engine(path="/ckpt/whisper-small")
    engine.model_name, engine.model_path = "qwen3", "/ckpt/qwen3"
    caps = (Capability.CHAT, Capability.TRANSCRIBE)
    asr = engine.ready_info.transcription
    engine.ready_info = ready(*caps, model="/ckpt/qwen3", transcription=asr)
    with make_client(engine) as client:
        assert post(client, {"model": "whisper-small"}).status_code == 200
        # The chat model's id names a model that does not transcribe: a 400 naming the one
        # that does.
        r = post(client, {"model": "qwen3"})
        assert_error(r, 400, "model", "`whisper-small`")


def assert_error(r, status: int, param: str | None, words: str) -> None:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["param"] == param and words in error["message"], error


def test_missing_file_is_a_400_naming_it(client, engine):
    # A multipart body with only the model field (a part without a filename).
    r = client.post(URL, files={"model": (None, "whisper-tiny")})
    assert_error(r, 400, "file", "required")
    assert engine.requests == []


def test_empty_file_is_a_400(client):
    assert_error(post(client, file=("a.wav", b"", "audio/wav")), 400, "file", "empty")


def test_file_sent_as_a_text_field_is_a_400(client):
    r = client.post(
        URL, data={"model": "whisper-tiny", "file": "speech.wav"}, files={"x": ("x", b"1")}
    )
    assert r.status_code == 400


def test_missing_model_is_a_400(client):
    r = client.post(URL, files={"file": ("a.wav", WAV)})
    assert_error(r, 400, "model", "required")


@pytest.mark.parametrize(
    ("fields", "param", "words"),
    [
        ({"response_format": "docx"}, "response_format", "must be one of"),
        ({"temperature": "hot"}, "temperature", "number"),
        ({"temperature": "1.5"}, "temperature", "between 0 and 1"),
        ({"timestamp_granularities[]": "word"}, "timestamp_granularities", "verbose_json"),
        (
            {"timestamp_granularities[]": "char", "response_format": "verbose_json"},
            "timestamp_granularities",
            "char",
        ),
        ({"stream": "true", "response_format": "srt"}, "stream", "json or text"),
        ({"stream": "maybe"}, "stream", "true or false"),
        ({"include[]": "logprobs"}, "include", "not supported"),
        ({"chunking_strategy": "server_vad"}, "chunking_strategy", "not supported"),
        ({"known_speaker_names[]": "Ada"}, "known_speaker_names", "not supported"),
        ({"diarize": "true"}, "diarize", "Unknown field"),
    ],
)
def test_invalid_fields_are_400s_naming_them(client, engine, fields, param, words):
    assert_error(post(client, fields), 400, param, words)
    assert engine.requests == []


def test_language_is_not_a_translation_field(client):
    r = post(client, {"language": "de"}, url="/v1/audio/translations")
    assert_error(r, 400, "language", "not supported")


def test_json_body_is_a_400_asking_for_multipart(client):
    r = client.post(URL, json={"model": "whisper-tiny", "file": "x"})
    assert_error(r, 400, "file", "multipart/form-data")


def test_upload_past_the_limit_is_a_413_before_parsing():
    engine = speech_engine()
    with make_client(engine, max_body_bytes=4096) as client:
        r = post(client, file=("big.wav", WAV + b"\0" * 8192, "audio/wav"))
        assert_error(r, 413, "file", "exceeds 4096 bytes")
        assert engine.requests == []


def test_upload_past_the_limit_without_content_length_is_a_413():
    engine = speech_engine()
    body = b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
    body += b"\0" * 8192 + b"\r\n--b--\r\n"

    def chunks():
        for i in range(0, len(body), 1024):
            yield body[i : i + 1024]

    with make_client(engine, max_body_bytes=4096) as client:
        r = client.post(
            URL, content=chunks(), headers={"content-type": "multipart/form-data; boundary=b"}
        )
        assert r.status_code == 413 and engine.requests == []


def test_unknown_model_is_a_404(client):
    assert_error(post(client, {"model": "whisper-2"}), 404, "model", "does not exist")


@pytest.mark.parametrize("model", ["gpt-4o-transcribe", "gpt-4o-mini-transcribe"])
def test_openai_transcribe_model_ids_address_the_speech_model(client, model):
    assert post(client, {"model": model}).status_code == 200


def test_the_diarizing_model_is_a_400_saying_why(client):
    assert_error(post(client, {"model": "gpt-4o-transcribe-diarize"}), 400, "model", "diariz")


def test_translation_by_a_model_that_cannot_is_a_400():
    with make_client(speech_engine(capabilities=(Capability.TRANSCRIBE,))) as client:
        r = post(client, url="/v1/audio/translations")
        assert_error(r, 400, "model", "cannot translate")


def test_chat_model_without_speech_recognition_is_a_400_with_a_hint():
    engine = FakeEngine()
    with make_client(engine) as client:
        r = post(client, {"model": "tiny"})
        assert_error(r, 400, "model", "--transcription-model")


def test_worker_rejection_is_a_400_with_its_message():
    engine = speech_engine()
    error = ErrorInfo("bad_request", "`file` is not in a supported audio format")
    engine.script = [[Delta("r", finish_reason="error", usage=Usage(0, 0), error=error)]]
    with make_client(engine) as client:
        for fields in ({}, {"stream": "true"}):
            r = post(client, fields)
            assert r.status_code == 400 and "supported audio format" in r.json()["error"]["message"]


def test_engine_not_ready_is_a_503_with_retry_after():
    engine = speech_engine()
    engine.state, engine.ready_info = "starting", None
    with make_client(engine) as client:
        r = post(client)
        assert r.status_code == 503 and r.headers["retry-after"] == "1"


def test_uploads_without_python_multipart_are_a_501_naming_the_extra(monkeypatch):
    from starlette import formparsers

    from tests.support.fake_engine import make_client

    monkeypatch.setattr(formparsers, "multipart", None)
    with make_client() as client:
        response = client.post(
            "/v1/audio/transcriptions", files={"file": ("a.wav", b"RIFF")}, data={"model": "m"}
        )
    assert response.status_code == 501
    error = response.json()["error"]
    assert error["code"] == "missing_dependency" and "[audio]" in error["message"]
