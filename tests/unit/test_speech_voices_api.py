"""Reference audio uploads and saved voices over a scripted engine: multipart speech bodies,
`POST/GET/DELETE /v1/audio/voices`, saved voices used by name or id, and cloning refused on a
model that cannot clone."""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from gateway.audio.speech.voice_store import VoiceStore
from protocol.ready import Capability
from tests.support.fake_engine import FakeEngine, make_client, ready
from tests.support.fake_speech import AUDIO, BODY, speech_script

WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(64)
FORM = {"model": "tiny-tts", "input": "Hello there.", "response_format": "pcm"}


def make_engine(cloning: bool, ref_text: bool = True) -> FakeEngine:
    fake = FakeEngine(speech_script(b"\x01\x00" * 80))
    audio = replace(AUDIO, voices=[], cloning=cloning, ref_text=ref_text)
    fake.ready_info = ready(Capability.SPEECH, model="/models/tiny-tts", text=None, speech=audio)
    fake.model_name, fake.model_path = "tiny-tts", "/models/tiny-tts"
    return fake


@pytest.fixture
def engine() -> FakeEngine:
    return make_engine(cloning=True)


@pytest.fixture
def client(engine):
    with make_client(engine) as client:
        yield client


def save(client, name="narrator", audio=WAV, transcript="Hello there."):
    data = {"name": name} if transcript is None else {"name": name, "transcript": transcript}
    return client.post(
        "/v1/audio/voices", data=data, files={"audio_sample": ("v.wav", audio, "audio/wav")}
    )


def test_a_multipart_speech_body_sends_the_uploaded_file_as_ref_audio(engine, client):
    form = {**FORM, "ref_text": "Hi there.", "seed": "5", "stream": "false"}
    response = client.post(
        "/v1/audio/speech", data=form, files={"ref_audio": ("r.wav", WAV, "audio/wav")}
    )
    assert response.status_code == 200, response.text
    inputs = engine.last.inputs
    assert (inputs.ref_audio, inputs.ref_text, inputs.seed) == (WAV, "Hi there.", 5)


def test_voice_audio_is_the_same_file_part(engine, client):
    client.post("/v1/audio/speech", data=FORM, files={"voice_audio": ("r.wav", WAV, "audio/wav")})
    assert engine.last.inputs.ref_audio == WAV


@pytest.mark.parametrize(
    ("form", "param"),
    [({"seed": "x"}, "seed"), ({"speed": "fast"}, "speed"), ({"colour": "red"}, "colour")],
)
def test_bad_multipart_fields_are_400_naming_the_field(client, form, param):
    response = client.post("/v1/audio/speech", data={**FORM, **form}, files={"ref_audio": WAV})
    assert response.status_code == 400 and response.json()["error"]["param"] == param


def test_an_upload_past_the_body_limit_is_413_before_parsing(engine):
    with make_client(engine, max_body_bytes=1000) as client:
        response = client.post("/v1/audio/speech", data=FORM, files={"ref_audio": WAV * 40})
    assert response.status_code == 413


def test_a_saved_voice_is_listed_and_used_by_name_and_by_id(engine, client):
    voice = save(client).json()
    assert voice["object"] == "audio.voice" and voice["id"].startswith("voice_")
    listed = client.get("/v1/audio/voices").json()["voices"]
    assert [v["id"] for v in listed if v["type"] == "audio_sample"] == [voice["id"]]
    for named in ("narrator", {"id": voice["id"]}):
        assert client.post("/v1/audio/speech", json={**BODY, "voice": named}).status_code == 200
        inputs = engine.last.inputs
        assert (inputs.voice, inputs.ref_audio, inputs.ref_text) == (
            None,
            WAV,
            "Hello there.",
        )


def test_a_deleted_voice_is_gone(engine, client):
    voice_id = save(client).json()["id"]
    deleted = client.delete(f"/v1/audio/voices/{voice_id}").json()
    assert deleted == {"id": voice_id, "object": "audio.voice.deleted", "deleted": True}
    assert client.delete(f"/v1/audio/voices/{voice_id}").status_code == 404
    gone = client.post("/v1/audio/speech", json={**BODY, "voice": "narrator"})
    # now an unknown preset name: refused before the worker is asked
    assert gone.status_code == 400 and gone.json()["error"]["param"] == "voice"


def test_a_saved_voice_drops_its_transcript_for_a_model_that_clones_from_audio_alone():
    engine = make_engine(cloning=True, ref_text=False)
    with make_client(engine) as client:
        save(client)
        client.post("/v1/audio/speech", json={**BODY, "voice": "narrator"})
    assert engine.last.inputs.ref_text is None and engine.last.inputs.ref_audio == WAV


@pytest.mark.parametrize("how", ["saved", "upload", "base64"])
def test_cloning_on_a_model_that_cannot_is_400_naming_it(how):
    engine = make_engine(cloning=False)
    with make_client(engine) as client:
        if how == "saved":
            save(client)
            response = client.post("/v1/audio/speech", json={**BODY, "voice": "narrator"})
        elif how == "upload":
            response = client.post("/v1/audio/speech", data=FORM, files={"ref_audio": WAV})
        else:
            response = client.post("/v1/audio/speech", json={**BODY, "ref_audio": "UklGRg=="})
    error = response.json()["error"]
    assert response.status_code == 400 and "tiny-tts" in error["message"]
    assert error["code"] == "cloning_not_supported"
    assert len(engine.requests) == 0  # refused before the worker is asked


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        ({"audio": b"plain text, not audio"}, "audio_sample"),
        ({"audio": b""}, "audio_sample"),
        ({"name": " "}, "name"),
        ({"transcript": " "}, "transcript"),
    ],
)
def test_a_bad_voice_upload_is_400_naming_the_field(client, kwargs, param):
    response = save(client, **kwargs)
    assert response.status_code == 400 and response.json()["error"]["param"] == param


def test_a_duplicate_voice_name_is_400(client):
    save(client)
    assert save(client, name="NARRATOR").json()["error"]["param"] == "name"


def test_an_empty_ref_text_is_400(client):
    response = client.post(
        "/v1/audio/speech", json={**BODY, "ref_audio": "UklGRg==", "ref_text": ""}
    )
    assert response.json()["error"]["param"] == "ref_text"


def test_the_store_is_bounded_in_count_and_bytes():
    store = VoiceStore(max_voices=2, max_total_bytes=3 * len(WAV))
    store.add("a", WAV, None)
    store.add("b", WAV, None)
    with pytest.raises(Exception, match="at most 2"):
        store.add("c", WAV, None)
    store = VoiceStore(max_voices=5, max_total_bytes=len(WAV) + 10)
    store.add("a", WAV, None)
    with pytest.raises(Exception, match="bytes"):
        store.add("b", WAV, None)


def presets_engine(**changes) -> FakeEngine:
    fake = FakeEngine(speech_script(b"\x01\x00" * 80))
    audio = replace(AUDIO, **changes)
    fake.ready_info = ready(Capability.SPEECH, model="/models/tiny-tts", text=None, speech=audio)
    fake.model_name, fake.model_path = "tiny-tts", "/models/tiny-tts"
    return fake


def test_a_preset_named_in_another_case_reaches_the_worker_as_the_model_spells_it():
    engine = presets_engine()
    with make_client(engine) as client:
        assert client.post("/v1/audio/speech", json={**BODY, "voice": "VIVIAN"}).status_code == 200
        assert engine.last.inputs.voice == "vivian"
        unknown = client.post("/v1/audio/speech", json={**BODY, "voice": "nobody"})
    error = unknown.json()["error"]
    assert unknown.status_code == 400 and error["param"] == "voice"
    assert "ryan, vivian" in error["message"]


@pytest.mark.parametrize("instructions", [None, "   "])
def test_a_described_voice_only_model_needs_a_description(instructions):
    engine = presets_engine(voices=[], descriptions=True)
    body = {k: v for k, v in BODY.items() if k != "voice"}
    if instructions is not None:
        body["instructions"] = instructions
    with make_client(engine) as client:
        refused = client.post("/v1/audio/speech", json=body)
        described = client.post("/v1/audio/speech", json={**body, "instructions": "A calm voice"})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "instructions"
    assert described.status_code == 200
