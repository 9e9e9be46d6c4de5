"""Speech out end to end: the real `serve` with a TTS model in its worker (`--speech-model` next to
a chat model, or a TTS checkpoint alone with `--omni`), the openai SDK and plain HTTP.

The audio must equal what mlx-audio produces directly in this process for the same seed,
sample for sample; streamed chunks joined must equal the buffered response; every format must
decode back to the model's rate and length.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
from pathlib import Path

import av
import httpx
import numpy as np
import pytest
import soundfile
import websockets

from tests.support.direct import direct_pcm, direct_tts_model
from tests.support.server import SAME_BLAS, openai_client
from tests.support.speech import TEXT, direct_phrases_pcm
from worker.tiny_models import ensure_checkpoint

INTERVAL = 0.08  # the worker's default streamed chunk: 1 Qwen3-TTS codec frame
LOSSY_SLACK = 2560  # samples a lossy codec may add (encoder delay, padding to whole frames)


@pytest.fixture(scope="module")
def qwen3_tts_path() -> str:
    return str(ensure_checkpoint("qwen3_tts"))


@pytest.fixture(scope="module")
def soprano_path() -> str:
    return str(ensure_checkpoint("soprano"))


@pytest.fixture(scope="module")
def chat_and_speech(start_server, qwen3_path, qwen3_tts_path):
    """A chat model with a Qwen3-TTS CustomVoice model in the same worker."""
    return start_server(
        qwen3_path, "--speech-model", qwen3_tts_path, *SAME_BLAS, name="chat-and-speech"
    )


@pytest.fixture(scope="module")
def omni(start_server, soprano_path):
    """A Soprano checkpoint served alone."""
    return start_server(soprano_path, "--omni", *SAME_BLAS, name="omni-soprano")


def post(server, **body) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/audio/speech", json=body, headers=server.headers, timeout=300
    )


def pcm_of(server, model: str, **body) -> bytes:
    response = post(server, model=model, input=TEXT, response_format="pcm", **body)
    assert response.status_code == 200, response.text
    return response.content


def decode(data: bytes) -> tuple[np.ndarray, int]:
    if data.startswith(b"OggS"):  # libsndfile decodes Opus at its own rate, FFmpeg at 48 kHz
        return soundfile.read(io.BytesIO(data), dtype="int16")
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        frames = [f.to_ndarray().reshape(-1) for f in container.decode(stream)]
        return np.concatenate(frames), stream.codec_context.sample_rate


def test_voices_lists_the_tts_models_presets(chat_and_speech, qwen3_tts_path):
    body = httpx.get(
        f"{chat_and_speech.url}/v1/audio/voices", headers=chat_and_speech.headers, timeout=30
    ).json()
    assert body["model"] == Path(qwen3_tts_path).name
    assert {v["name"] for v in body["voices"]} == {"vivian", "ryan", "eric"}
    assert body["cloning"] is False and body["descriptions"] is False


def test_chat_still_works_next_to_the_tts_model(chat_and_speech, qwen3_path):
    client = openai_client(chat_and_speech)
    reply = client.chat.completions.create(
        model=Path(qwen3_path).name, messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert reply.choices[0].finish_reason == "length"


def test_qwen3_tts_audio_equals_direct_mlx_audio_for_the_same_seed(chat_and_speech, qwen3_tts_path):
    got = pcm_of(chat_and_speech, Path(qwen3_tts_path).name, voice="vivian", seed=11)
    want = direct_pcm(
        qwen3_tts_path,
        11,
        voice="vivian",
        lang_code="auto",
        stream=True,
        streaming_interval=INTERVAL,
    )
    assert got == want


def test_soprano_audio_equals_direct_mlx_audio_for_the_same_seed(omni, soprano_path):
    got = pcm_of(omni, Path(soprano_path).name, seed=5)
    assert got == direct_pcm(soprano_path, 5, max_tokens=10)


def test_the_same_seed_gives_the_same_audio(omni, soprano_path):
    model = Path(soprano_path).name
    assert pcm_of(omni, model, seed=9) == pcm_of(omni, model, seed=9)


def test_streamed_chunks_joined_equal_the_buffered_response(chat_and_speech, qwen3_tts_path):
    body = {
        "model": Path(qwen3_tts_path).name,
        "input": TEXT,
        "voice": "ryan",
        "seed": 4,
        "response_format": "pcm",
    }
    chunks = []
    url = f"{chat_and_speech.url}/v1/audio/speech"
    with httpx.stream(
        "POST", url, json={**body, "stream": True}, headers=chat_and_speech.headers, timeout=300
    ) as response:
        assert response.status_code == 200
        chunks = [c for c in response.iter_raw() if c]
    assert len(chunks) >= 2  # audio arrived in pieces, as it was produced
    assert b"".join(chunks) == post(chat_and_speech, **body).content


def test_sse_deltas_joined_equal_the_buffered_response_and_end_with_usage(omni, soprano_path):
    body = {"model": Path(soprano_path).name, "input": TEXT, "seed": 2, "response_format": "pcm"}
    events = [
        json.loads(line[6:])
        for line in post(omni, **body, stream_format="sse").text.splitlines()
        if line.startswith("data: ")
    ]
    audio = b"".join(base64.b64decode(e["audio"]) for e in events[:-1])
    assert audio == post(omni, **body).content
    assert events[-1]["type"] == "speech.audio.done"
    assert events[-1]["usage"]["input_tokens"] == len(TEXT)


@pytest.mark.parametrize("fmt", ["wav", "flac", "mp3", "aac"])
def test_every_format_decodes_to_the_models_rate_and_length(omni, soprano_path, fmt):
    model = Path(soprano_path).name
    samples = len(pcm_of(omni, model, seed=1)) // 2
    response = post(omni, model=model, input=TEXT, seed=1, response_format=fmt)
    decoded, rate = decode(response.content)
    assert rate == 32000
    slack = 0 if fmt in ("wav", "flac") else LOSSY_SLACK
    assert 0 <= len(decoded) - samples <= slack


def test_opus_decodes_to_the_models_rate_and_length(chat_and_speech, qwen3_tts_path):
    model = Path(qwen3_tts_path).name
    samples = len(pcm_of(chat_and_speech, model, voice="ryan", seed=1)) // 2
    data = post(
        chat_and_speech, model=model, input=TEXT, voice="ryan", seed=1, response_format="opus"
    ).content
    decoded, rate = decode(data)
    assert rate == 8000 and 0 <= len(decoded) - samples <= LOSSY_SLACK


def test_a_format_the_model_cannot_carry_is_400(omni, soprano_path):
    response = post(omni, model=Path(soprano_path).name, input=TEXT, response_format="opus")
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "response_format"


def test_openai_sdk_speech_create_returns_the_file(omni, soprano_path):
    client = openai_client(omni)
    result = client.audio.speech.create(
        model=Path(soprano_path).name, voice="default", input=TEXT, response_format="wav"
    )
    samples, rate = soundfile.read(io.BytesIO(result.content), dtype="int16")
    assert rate == 32000 and len(samples) > 0


def test_openai_sdk_streaming_response_yields_the_same_file(omni, soprano_path):
    client = openai_client(omni)
    kwargs = dict(
        model=Path(soprano_path).name,
        voice="default",
        input=TEXT,
        response_format="pcm",
        extra_body={"seed": 8},
    )
    with client.audio.speech.with_streaming_response.create(**kwargs) as response:
        streamed = b"".join(response.iter_bytes())
    assert streamed == client.audio.speech.create(**kwargs).content


def test_an_unknown_voice_is_400_listing_the_voices(chat_and_speech, qwen3_tts_path):
    response = post(chat_and_speech, model=Path(qwen3_tts_path).name, input=TEXT, voice="nobody")
    assert response.status_code == 400
    assert all(v in response.json()["error"]["message"] for v in ("vivian", "ryan", "eric"))


@pytest.mark.parametrize("text", ["", "x" * 4097])
def test_empty_or_over_long_input_is_400(omni, soprano_path, text):
    response = post(omni, model=Path(soprano_path).name, input=text)
    assert response.status_code == 400 and response.json()["error"]["param"] == "input"


def test_reference_audio_that_is_not_base64_is_400(omni, soprano_path):
    response = post(omni, model=Path(soprano_path).name, input=TEXT, ref_audio="%%%")
    assert response.status_code == 400 and response.json()["error"]["param"] == "ref_audio"


def test_reference_audio_for_a_model_that_cannot_clone_is_400(omni, soprano_path):
    ref = base64.b64encode(b"RIFF....WAVE").decode()
    response = post(omni, model=Path(soprano_path).name, input=TEXT, ref_audio=ref)
    assert response.status_code == 400 and "clone" in response.json()["error"]["message"]


def test_a_saved_voice_on_a_model_that_cannot_clone_is_400_naming_the_model(omni, soprano_path):
    wav = io.BytesIO()
    soundfile.write(wav, np.zeros(8000, dtype=np.float32), 8000, format="WAV")
    created = httpx.post(
        f"{omni.url}/v1/audio/voices",
        headers=omni.headers,
        data={"name": "someone"},
        files={"audio_sample": ("someone.wav", wav.getvalue(), "audio/wav")},
        timeout=30,
    ).json()
    response = post(omni, model=Path(soprano_path).name, input=TEXT, voice={"id": created["id"]})
    error = response.json()["error"]
    assert response.status_code == 400 and Path(soprano_path).name in error["message"]
    assert error["code"] == "cloning_not_supported"


def test_streamed_text_is_spoken_each_phrase_going_on_from_the_one_before(
    chat_and_speech, qwen3_tts_path
):
    """WS /v1/audio/speech/stream, three phrases, seeded: each phrase's audio is mlx-audio's for its text continued from
    the phrase before (its text and frames), as the worker hands each phrase's context back
    and the gateway passes it on."""
    text = "The sea was calm, and the boats went out early. Nobody spoke on the pier."

    async def run() -> list[bytes]:
        phrases: list[bytes] = []
        async with websockets.connect(
            chat_and_speech.url.replace("http://", "ws://") + "/v1/audio/speech/stream",
            additional_headers=chat_and_speech.headers,
        ) as ws:
            await ws.send(json.dumps({"type": "start", "model": Path(qwen3_tts_path).name,
                                      "voice": "vivian", "seed": 7}))  # fmt: skip
            await ws.recv()
            await ws.send(json.dumps({"type": "text", "text": text}))
            await ws.send(json.dumps({"type": "end"}))
            async for frame in ws:
                if isinstance(frame, bytes):
                    phrases[-1] += frame
                elif json.loads(frame)["type"] == "phrase":
                    phrases.append(b"")
                elif json.loads(frame)["type"] in ("done", "error"):
                    break
        return phrases

    got = asyncio.run(asyncio.wait_for(run(), 300))
    spoken = ["The sea was calm,", "and the boats went out early.", "Nobody spoke on the pier."]
    model = direct_tts_model(qwen3_tts_path)
    want = direct_phrases_pcm(model, 7, spoken, voice="vivian", lang_code="auto")
    assert len(got) == 3 and all(got) and got == want
