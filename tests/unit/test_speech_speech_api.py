"""/v1/audio/speech and /v1/audio/voices over a scripted engine: field checks, formats,
buffered vs streamed vs SSE responses, errors before and after a stream started, and a
reader that stops reading."""

from __future__ import annotations

import asyncio
import base64
import io
import json
from contextlib import AsyncExitStack

import pytest
import soundfile
from msgspec.structs import replace

from gateway.api.speech.stream import speech_response
from gateway.audio.speech.encoding import wav_header
from gateway.audio.speech.request import SpeechCall
from gateway.http.disconnect import DisconnectWatcher
from gateway.http.streaming import Opened
from protocol.messages import Delta, ErrorInfo, Usage
from protocol.ready import Capability
from tests.support.fake_engine import FakeEngine, accepted, make_client, ready
from tests.support.fake_speech import AUDIO, BODY, PCM, RATE, speech_script


@pytest.fixture
def engine() -> FakeEngine:
    fake = FakeEngine(speech_script(*PCM))
    fake.model_name = "chat-model"
    # a copy: tests change what the model can do (cloning, sample rate) on their engine only
    speech = replace(AUDIO)
    fake.ready_info = ready(Capability.CHAT, Capability.SPEECH, model="/models/chat", speech=speech)
    return fake


@pytest.fixture
def client(engine):
    with make_client(engine) as client:
        yield client


def error_of(response) -> dict:
    return response.json()["error"]


def test_voices_lists_the_presets_and_what_the_model_can_do(client):
    body = client.get("/v1/audio/voices").json()
    assert [v["name"] for v in body["voices"]] == ["ryan", "vivian"]
    assert (body["cloning"], body["descriptions"], body["sample_rate"]) == (False, False, RATE)
    assert "wav" in body["response_formats"]


def test_speech_without_a_speech_model_is_404(engine, client):
    engine.ready_info = ready(Capability.CHAT, model="/models/chat")
    response = client.post("/v1/audio/speech", json=BODY)
    assert response.status_code == 404 and "--speech-model" in error_of(response)["message"]


def test_buffered_wav_holds_the_samples_the_worker_sent(client):
    response = client.post("/v1/audio/speech", json=BODY)
    samples, rate = soundfile.read(io.BytesIO(response.content), dtype="int16")
    assert response.headers["content-type"] == "audio/wav"
    assert rate == RATE and samples.tobytes() == b"".join(PCM)


def test_buffered_response_reports_usage_in_headers(client):
    response = client.post("/v1/audio/speech", json=BODY)
    assert response.headers["x-usage-input-tokens"] == "12"
    assert response.headers["x-usage-output-tokens"] == "6"


def test_the_request_reaches_the_worker_as_a_speech_submit(engine, client):
    engine.ready_info.speech.cloning = True
    ref = base64.b64encode(b"RIFF-ish bytes").decode()
    body = {**BODY, "voice": None, "ref_audio": f"data:audio/wav;base64,{ref}", "ref_text": "hi"}
    client.post("/v1/audio/speech", json={**body, "seed": 5, "language": "english"})
    request = engine.last
    assert request.op == "speech"
    assert request.inputs.ref_audio == b"RIFF-ish bytes"
    assert (request.inputs.seed, request.inputs.language) == (5, "english")
    assert request.inputs.sample_format == "int16"


def test_a_voice_object_is_read_by_its_id(engine, client):
    client.post("/v1/audio/speech", json={**BODY, "voice": {"id": "vivian"}})
    assert engine.last.inputs.voice == "vivian"


def test_streamed_wav_is_a_header_then_the_samples_as_they_come(client):
    response = client.post("/v1/audio/speech", json={**BODY, "stream": True})
    assert response.content == wav_header(RATE, 0xFFFFFFFF) + b"".join(PCM)


def test_streamed_pcm_joined_equals_the_buffered_pcm(client):
    body = {**BODY, "response_format": "pcm"}
    streamed = client.post("/v1/audio/speech", json={**body, "stream": True}).content
    assert streamed == client.post("/v1/audio/speech", json=body).content


def sse_events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_sse_carries_base64_audio_then_a_done_event_with_usage(client):
    body = {**BODY, "response_format": "pcm", "stream_format": "sse"}
    response = client.post("/v1/audio/speech", json=body)
    events = sse_events(response.text)
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert b"".join(base64.b64decode(e["audio"]) for e in deltas) == b"".join(PCM)
    assert events[-1] == {
        "type": "speech.audio.done",
        "usage": {"input_tokens": 12, "output_tokens": 6, "total_tokens": 18},
    }


def test_a_refusal_before_the_stream_starts_is_a_400(engine, client):
    refusal = ErrorInfo("bad_request", "unknown voice 'nobody'; this model's voices: ryan, vivian")
    engine.script = [[Delta("r", finish_reason="error", usage=Usage(5, 0), error=refusal)]]
    response = client.post("/v1/audio/speech", json={**BODY, "voice": "nobody", "stream": True})
    assert response.status_code == 400 and "ryan, vivian" in error_of(response)["message"]


def test_a_failure_after_an_sse_stream_started_is_an_error_event(engine, client):
    boom = ErrorInfo("internal", "boom")
    engine.script = [accepted(), [Delta("r", audio=PCM[0], sample_rate=RATE)]]
    engine.script.append([Delta("r", finish_reason="error", usage=Usage(5, 0), error=boom)])
    response = client.post("/v1/audio/speech", json={**BODY, "stream_format": "sse"})
    assert sse_events(response.text)[-1]["type"] == "error"


def test_an_unsupported_format_for_the_model_is_400_naming_response_format(engine, client):
    engine.ready_info.speech.sample_rate = 32000
    response = client.post("/v1/audio/speech", json={**BODY, "response_format": "opus"})
    assert response.status_code == 400 and error_of(response)["param"] == "response_format"


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"input": ""}, "input"),
        ({"input": "x" * 4097}, "input"),
        ({"ref_audio": "not base64!"}, "ref_audio"),
        ({"ref_text": "a transcript alone"}, "ref_text"),
        ({"speed": 9}, "speed"),
        ({"stream_format": "chunks"}, "stream_format"),
        ({"response_format": "ogg"}, "response_format"),
        ({"voice": 3}, "voice"),
        ({"temperature": 0.5}, "temperature"),
    ],
)
def test_bad_fields_are_400_naming_the_field(client, change, param):
    response = client.post("/v1/audio/speech", json={**BODY, **change})
    assert response.status_code == 400 and error_of(response)["param"] == param


def test_an_unknown_model_is_404_naming_the_served_models(client):
    response = client.post("/v1/audio/speech", json={**BODY, "model": "tts-2"})
    assert response.status_code == 404
    message = error_of(response)["message"]
    assert "`tts-2`" in message and "`chat-model`" in message and "`tiny-tts`" in message


@pytest.mark.parametrize("model", ["tts-1", "tts-1-hd", "gpt-4o-mini-tts", "/models/tiny-tts"])
def test_openai_tts_names_and_the_path_reach_the_tts_model(client, model):
    assert client.post("/v1/audio/speech", json={**BODY, "model": model}).status_code == 200


def test_the_chat_model_does_not_answer_for_speech(client):
    response = client.post("/v1/audio/speech", json={**BODY, "model": "chat-model"})
    assert response.status_code == 400
    error = error_of(response)
    assert (error["param"], error["code"]) == ("model", "model_not_supported")
    assert "`tiny-tts`" in error["message"]


def test_a_speech_only_server_answers_to_its_own_model_name(engine, client):
    engine.ready_info = ready(Capability.SPEECH, model="/models/tiny-tts", text=None, speech=AUDIO)
    response = client.post("/v1/audio/speech", json={**BODY, "model": "chat-model"})
    assert response.status_code == 200


# -- the streaming response on its own, at the ASGI level ----------------------------------


class Closed:
    """Stands in for the engine request context: records that it was left (= aborted)."""

    def __init__(self) -> None:
        self.exited = False

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        self.exited = True


async def never_disconnects() -> dict:
    await asyncio.Event().wait()
    return {}


async def run_stream(batches: list[list[Delta]], send, stall_timeout: float = 5.0) -> Closed:
    closed = Closed()
    stack = AsyncExitStack()
    await stack.enter_async_context(closed)

    async def more():
        for batch in batches:
            yield batch

    call = SpeechCall("tiny-tts", "pcm", "audio", {})
    opened = Opened(stack, DisconnectWatcher(never_disconnects), more(), accepted())
    response = speech_response(opened, call, RATE, stall_timeout)
    await asyncio.wait_for(response({}, never_disconnects, send), 10)
    return closed


def test_a_failure_after_a_raw_stream_started_leaves_it_unfinished():
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    boom = [Delta("r", finish_reason="error", usage=Usage(1, 0), error=ErrorInfo("internal", "x"))]
    asyncio.run(run_stream([[Delta("r", audio=PCM[0], sample_rate=RATE)], boom], send))
    assert sent[0]["type"] == "http.response.start"
    assert all(m.get("more_body", True) for m in sent)  # no final chunk: a truncated transfer


def test_a_reader_that_stops_reading_is_cut_off_and_its_request_aborted():
    async def scenario() -> Closed:
        async def send(message: dict) -> None:
            if message["type"] == "http.response.body":
                await asyncio.Event().wait()  # the client's socket never drains

        audio = [[Delta("r", audio=c, sample_rate=RATE)] for c in PCM]
        return await run_stream(audio, send, stall_timeout=0.2)

    assert asyncio.run(scenario()).exited
