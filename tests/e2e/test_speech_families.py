"""Speech out end to end for more mlx-audio families: tiny VoxCPM2, MOSS-TTS-Nano and Qwen3-TTS
VoiceDesign checkpoints each served alone (`serve X --omni`), driven by the openai SDK and plain HTTP.

The audio must equal mlx-audio's own output in this process for the same seed, sample for
sample, as its CLI makes it on the model prepared as the worker prepares it (tests/support/
direct.py; reference audio read at the model's rate with `load_audio`;
MOSS-TTS-Nano's stereo averaged to mono, as the server documents); streamed bytes joined must
equal the buffered response; GET /v1/audio/voices must describe what each family can do.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import httpx
import pytest
import soundfile

from tests.support.direct import direct_tts_model
from tests.support.server import SAME_BLAS, openai_client
from tests.support.speech import TEXT, direct_mono_pcm, sine_wav
from worker.tiny_models import ensure_checkpoint
from worker.tiny_models.tts_families import MOSS_TTS_NANO_SIZES, VOXCPM2_SIZES

DESCRIPTION = "A calm, low voice"


REF = sine_wav(1.2, 22050)


@pytest.fixture(scope="module")
def voxcpm2_path() -> str:
    return str(ensure_checkpoint("voxcpm2"))


@pytest.fixture(scope="module")
def moss_path() -> str:
    return str(ensure_checkpoint("moss_tts_nano"))


@pytest.fixture(scope="module")
def design_path() -> str:
    return str(ensure_checkpoint("qwen3_tts_voice_design"))


@pytest.fixture(scope="module")
def design(start_server, design_path):
    return start_server(design_path, "--omni", *SAME_BLAS, name="omni-qwen3-tts-design")


@pytest.fixture(scope="module")
def voxcpm2(start_server, voxcpm2_path):
    return start_server(voxcpm2_path, "--omni", *SAME_BLAS, name="omni-voxcpm2")


@pytest.fixture(scope="module")
def moss(start_server, moss_path):
    return start_server(moss_path, "--omni", *SAME_BLAS, name="omni-moss-tts-nano")


@pytest.fixture(scope="module")
def ref_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ref") / "ref.wav"
    path.write_bytes(REF)
    return path


def direct_pcm(path: str, seed: int, ref_file: Path | None = None, **kwargs) -> bytes:
    """mlx-audio in this process, as its CLI calls it, as int16 PCM (channels averaged)."""
    return direct_mono_pcm(direct_tts_model(path), seed, ref_file, **kwargs)


def speech(client, model: str, **kwargs) -> bytes:
    """`client.audio.speech.create` as PCM; voice "" means the model's own (none named)."""
    extra = {key: kwargs.pop(key) for key in ("seed", "ref_audio") if key in kwargs}
    return client.audio.speech.create(
        model=model,
        voice=kwargs.pop("voice", ""),
        input=TEXT,
        response_format="pcm",
        extra_body=extra,
        **kwargs,
    ).content


def streamed(client, model: str, **kwargs) -> bytes:
    """The SDK's streaming response of a PCM speech request (`stream` asked for), joined."""
    extra = {
        "stream": True,
        **{key: kwargs.pop(key) for key in ("seed", "ref_audio") if key in kwargs},
    }
    kwargs = dict(
        model=model, voice="", input=TEXT, response_format="pcm", extra_body=extra, **kwargs
    )
    with client.audio.speech.with_streaming_response.create(**kwargs) as response:
        return b"".join(response.iter_bytes())


def voices(server) -> dict:
    response = httpx.get(f"{server.url}/v1/audio/voices", headers=server.headers, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


# -- VoxCPM2 -------------------------------------------------------------------------------


def test_voxcpm2_voices_show_cloning_and_voice_design(voxcpm2, voxcpm2_path):
    body = voices(voxcpm2)
    assert body["model"] == Path(voxcpm2_path).name
    assert [v for v in body["voices"] if v.get("type") == "preset"] == []
    assert (body["cloning"], body["ref_text"], body["descriptions"]) == (True, False, True)
    assert body["instructions"] is True and body["sample_rate"] == 16000


def test_voxcpm2_speech_equals_direct_mlx_audio_for_the_same_seed(voxcpm2, voxcpm2_path):
    got = speech(openai_client(voxcpm2), Path(voxcpm2_path).name, seed=11)
    max_tokens = VOXCPM2_SIZES["tiny"].max_new_tokens
    assert got and got == direct_pcm(voxcpm2_path, 11, max_tokens=max_tokens)


def test_voxcpm2_designed_voice_equals_direct_instruct(voxcpm2, voxcpm2_path):
    client = openai_client(voxcpm2)
    got = speech(client, Path(voxcpm2_path).name, seed=3, instructions=DESCRIPTION)
    max_tokens = VOXCPM2_SIZES["tiny"].max_new_tokens
    assert got == direct_pcm(voxcpm2_path, 3, max_tokens=max_tokens, instruct=DESCRIPTION)


def test_voxcpm2_cloned_voice_equals_direct_mlx_audio(voxcpm2, voxcpm2_path, ref_file):
    client = openai_client(voxcpm2)
    ref = base64.b64encode(REF).decode()
    got = speech(client, Path(voxcpm2_path).name, seed=5, ref_audio=ref)
    max_tokens = VOXCPM2_SIZES["tiny"].max_new_tokens
    assert got == direct_pcm(voxcpm2_path, 5, ref_file, max_tokens=max_tokens)


def test_voxcpm2_streamed_bytes_join_to_the_buffered_response(voxcpm2, voxcpm2_path):
    client = openai_client(voxcpm2)
    kwargs = dict(
        model=Path(voxcpm2_path).name,
        voice="",
        input=TEXT,
        response_format="wav",
        extra_body={"seed": 8, "stream": True},
    )
    with client.audio.speech.with_streaming_response.create(**kwargs) as response:
        streamed = b"".join(response.iter_bytes())
    buffered = speech(client, Path(voxcpm2_path).name, seed=8)
    samples, rate = soundfile.read(io.BytesIO(streamed), dtype="int16")
    assert rate == 16000 and samples.tobytes() == buffered


def test_voxcpm2_transcript_with_reference_is_400(voxcpm2, voxcpm2_path):
    response = httpx.post(
        f"{voxcpm2.url}/v1/audio/speech",
        headers=voxcpm2.headers,
        json={
            "model": Path(voxcpm2_path).name,
            "input": TEXT,
            "ref_audio": base64.b64encode(REF).decode(),
            "ref_text": "hello",
        },
        timeout=60,
    )
    assert response.status_code == 400 and "ref_text" in response.json()["error"]["message"]


# -- MOSS-TTS-Nano -------------------------------------------------------------------------


def test_moss_voices_show_cloning_only(moss, moss_path):
    body = voices(moss)
    assert body["model"] == Path(moss_path).name
    assert [v for v in body["voices"] if v.get("type") == "preset"] == []
    assert (body["cloning"], body["ref_text"], body["instructions"]) == (True, False, False)
    assert body["sample_rate"] == 8000


def test_moss_cloned_voice_equals_direct_mlx_audio(moss, moss_path, ref_file):
    ref = base64.b64encode(REF).decode()
    got = speech(openai_client(moss), Path(moss_path).name, seed=6, ref_audio=ref)
    frames = MOSS_TTS_NANO_SIZES["tiny"].max_new_tokens
    assert got and got == direct_pcm(moss_path, 6, ref_file, max_tokens=frames)


def test_moss_saved_voice_speaks_like_its_reference(moss, moss_path):
    created = httpx.post(
        f"{moss.url}/v1/audio/voices",
        headers=moss.headers,
        data={"name": "narrator"},
        files={"audio_sample": ("narrator.wav", REF, "audio/wav")},
        timeout=30,
    )
    assert created.status_code == 200, created.text
    client = openai_client(moss)
    model = Path(moss_path).name
    by_name = speech(client, model, voice="narrator", seed=2)
    assert by_name == speech(client, model, seed=2, ref_audio=base64.b64encode(REF).decode())
    assert "narrator" in {v["name"] for v in voices(moss)["voices"]}


def test_moss_streamed_bytes_join_to_the_buffered_response(moss, moss_path):
    client = openai_client(moss)
    ref = base64.b64encode(REF).decode()
    got = streamed(client, Path(moss_path).name, seed=9, ref_audio=ref)
    assert got and got == speech(client, Path(moss_path).name, seed=9, ref_audio=ref)


def test_moss_without_a_reference_voice_is_400(moss, moss_path):
    response = httpx.post(
        f"{moss.url}/v1/audio/speech",
        headers=moss.headers,
        json={"model": Path(moss_path).name, "input": TEXT},
        timeout=60,
    )
    assert response.status_code == 400 and "ref_audio" in response.json()["error"]["message"]


# -- Qwen3-TTS VoiceDesign: a voice described by `instructions` -------------------------------

INTERVAL = 0.08  # the worker's default streamed chunk: 1 Qwen3-TTS codec frame


def test_voice_design_voices_show_descriptions_and_no_presets(design, design_path):
    body = voices(design)
    assert body["model"] == Path(design_path).name
    assert [v for v in body["voices"] if v.get("type") == "preset"] == []
    assert (body["descriptions"], body["instructions"], body["cloning"]) == (True, True, False)


def test_a_designed_voice_equals_direct_mlx_audio_for_the_same_seed(design, design_path):
    client = openai_client(design)
    got = speech(client, Path(design_path).name, seed=4, instructions=DESCRIPTION)
    want = direct_pcm(
        design_path,
        4,
        instruct=DESCRIPTION,
        lang_code="auto",
        stream=True,
        streaming_interval=INTERVAL,
    )
    assert got and got == want
    # Another description is another voice.
    other = speech(client, Path(design_path).name, seed=4, instructions="A bright, fast voice")
    assert other != got


def test_a_designed_voice_streamed_joins_to_the_buffered_response(design, design_path):
    client = openai_client(design)
    model = Path(design_path).name
    got = streamed(client, model, seed=6, instructions=DESCRIPTION)
    assert got and got == speech(client, model, seed=6, instructions=DESCRIPTION)


@pytest.mark.parametrize(
    "extra, param",
    [({}, "instructions"), ({"voice": "vivian", "instructions": DESCRIPTION}, "voice")],
)
def test_voice_design_without_a_description_or_with_a_preset_is_400(
    design, design_path, extra, param
):
    response = httpx.post(
        f"{design.url}/v1/audio/speech",
        headers=design.headers,
        json={"model": Path(design_path).name, "input": TEXT, **extra},
        timeout=60,
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
