"""Voice cloning end to end: a tiny Qwen3-TTS Base checkpoint served alone (`serve X --omni`).

A cloned voice from the server equals mlx-audio's own `generate(ref_audio=<file>,
ref_text=..., ...)` in this process for the same seed, sample for sample, whether the reference
comes as base64 in JSON, as an uploaded file in a multipart body, or as a saved voice, and
when the voice is said again from the voice cache (counted on /metrics); bad reference audio is
a 400 naming it and the worker goes on; saved voices outlive the worker.
"""

from __future__ import annotations

import base64
import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.support.direct import direct_pcm
from tests.support.metrics import moved, scrape
from tests.support.server import SAME_BLAS
from tests.support.speech import TEXT, sine_wav
from worker.tiny_models import ensure_checkpoint

INTERVAL = 0.08  # the worker's default streamed chunk: 1 Qwen3-TTS codec frame
REF_TEXT = "Hello there."


@pytest.fixture(scope="module")
def base_path() -> str:
    return str(ensure_checkpoint("qwen3_tts_base"))


@pytest.fixture(scope="module")
def base(start_server, base_path):
    return start_server(base_path, "--omni", *SAME_BLAS, name="omni-qwen3-tts-base")


@pytest.fixture(scope="module")
def ref_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ref") / "ref.wav"
    path.write_bytes(sine_wav(1.2, 8000))
    return path


def speech(server, **kwargs) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/audio/speech", headers=server.headers, timeout=300, **kwargs
    )


def body(base_path: str, **fields) -> dict:
    return {"model": Path(base_path).name, "input": TEXT, "response_format": "pcm", **fields}


def direct(base_path: str, seed: int, ref_file: Path, ref_text: str | None) -> bytes:
    return direct_pcm(
        base_path,
        seed,
        ref_audio=str(ref_file),
        ref_text=ref_text,
        lang_code="auto",
        stream=True,
        streaming_interval=INTERVAL,
    )


def _restarted(server, old_pid: int, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        health = server.health()
        if health.status_code == 200 and health.json()["worker_pid"] != old_pid:
            return True
        time.sleep(0.2)
    return False


def test_voices_says_the_model_clones_with_a_transcript(base):
    listed = httpx.get(f"{base.url}/v1/audio/voices", headers=base.headers, timeout=30).json()
    assert (listed["cloning"], listed["ref_text"]) == (True, True)


def test_a_cloned_voice_equals_direct_mlx_audio_for_the_same_seed(base, base_path, ref_file):
    ref = base64.b64encode(ref_file.read_bytes()).decode()
    response = speech(base, json=body(base_path, ref_audio=ref, ref_text=REF_TEXT, seed=21))
    assert response.status_code == 200, response.text
    assert response.content == direct(base_path, 21, ref_file, REF_TEXT)


def test_a_voice_said_again_reuses_its_prefix_and_metrics_count_it(base, base_path, ref_file):
    # The voice cache (worker/speech/voice_cache.py): the clip's x-vector and codes and the
    # prefix's KV are kept, and the audio stays mlx-audio's own.
    ref = base64.b64encode(ref_file.read_bytes()).decode()
    fields = body(base_path, ref_audio=ref, ref_text=REF_TEXT, seed=22)
    speech(base, json=fields)
    before = scrape(base)
    again = speech(base, json={**fields, "input": "Another sentence in the same voice."})
    after = scrape(base)
    assert again.status_code == 200, again.text
    want = direct_pcm(
        base_path,
        22,
        text="Another sentence in the same voice.",
        ref_audio=str(ref_file),
        ref_text=REF_TEXT,
        lang_code="auto",
        stream=True,
        streaming_interval=INTERVAL,
    )
    assert again.content == want
    m = {"model_name": Path(base_path).name}
    hits = moved(before, after, "vomlx:voice_cache_hits_total", **m)
    # Queried: the whole prefill; hit: its voice prefix (the clip's frames come after the text)
    assert 0 < hits < moved(before, after, "vomlx:voice_cache_queries_total", **m)


def test_a_clone_from_the_audio_alone_equals_direct_mlx_audio(base, base_path, ref_file):
    ref = base64.b64encode(ref_file.read_bytes()).decode()
    response = speech(base, json=body(base_path, ref_audio=ref, seed=4))
    assert response.content == direct(base_path, 4, ref_file, None)


def test_an_uploaded_reference_file_clones_the_same_voice(base, base_path, ref_file):
    form = {k: str(v) for k, v in body(base_path, ref_text=REF_TEXT, seed=21).items()}
    files = {"ref_audio": ("ref.wav", ref_file.read_bytes(), "audio/wav")}
    response = speech(base, data=form, files=files)
    assert response.status_code == 200, response.text
    assert response.content == direct(base_path, 21, ref_file, REF_TEXT)


def test_a_saved_voice_clones_the_same_voice_and_outlives_the_worker(base, base_path, ref_file):
    created = httpx.post(
        f"{base.url}/v1/audio/voices",
        headers=base.headers,
        data={"name": "narrator", "transcript": REF_TEXT},
        files={"audio_sample": ("ref.wav", ref_file.read_bytes(), "audio/wav")},
        timeout=30,
    )
    assert created.status_code == 200, created.text
    voice_id = created.json()["id"]
    want = direct(base_path, 21, ref_file, REF_TEXT)
    assert speech(base, json=body(base_path, voice="narrator", seed=21)).content == want
    pid = base.worker_pid()
    os.kill(pid, signal.SIGKILL)
    assert _restarted(base, pid)  # the gateway restarts the worker
    again = speech(base, json=body(base_path, voice={"id": voice_id}, seed=21))
    assert again.status_code == 200, again.text
    assert again.content == want


@pytest.mark.parametrize(
    ("ref", "ref_text", "words"),
    [
        (b"this is not audio", REF_TEXT, "could not be decoded"),
        (sine_wav(61.0, 8000), REF_TEXT, "longer than 60 s"),
        (sine_wav(0.1, 8000), REF_TEXT, "at least 0.5 s"),
    ],
)
def test_bad_reference_audio_is_400_naming_it_and_the_worker_stays_up(
    base, base_path, ref, ref_text, words
):
    pid = base.worker_pid()
    files = {"ref_audio": ("ref.wav", ref, "audio/wav")}
    form = {k: str(v) for k, v in body(base_path, ref_text=ref_text).items()}
    response = speech(base, data=form, files=files)
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "ref_audio" in message and words in message
    assert base.worker_pid() == pid
    assert speech(base, json=body(base_path, seed=1)).status_code == 200


def test_an_empty_transcript_is_400_naming_ref_text(base, base_path, ref_file):
    ref = base64.b64encode(ref_file.read_bytes()).decode()
    response = speech(base, json=body(base_path, ref_audio=ref, ref_text=" "))
    assert response.status_code == 400 and response.json()["error"]["param"] == "ref_text"
