"""Clients that hang up mid-request, on a server with every engine loaded in one worker.

The worker runs a vision model (chat, completions, images) with `--speech-model` and
`--transcription-model` next to it, so each abort goes through a scheduler with three engines. A client
leaves during every operation kind, streamed (after the first event) and not (a read
timeout, as `curl -m 1` does); afterwards the worker is the same process, nothing is still
generating, and every kind of request is served again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx
import pytest

from tests.support.server import model_name
from tests.support.stt_audio import SENTENCES, concat_wavs, speech_wav
from tests.support.vision import openai_image_message, png
from worker.tiny_models import ensure_checkpoint

LONG_TEXT = " ".join(["The quick brown fox jumps over the lazy dog."] * 40)


@pytest.fixture(scope="module")
def paths() -> dict[str, str]:
    return {
        "vision": str(ensure_checkpoint("qwen2_vl")),
        "tts": str(ensure_checkpoint("qwen3_tts", "long")),  # speaks long enough to hang up on
        "asr": str(ensure_checkpoint("whisper")),
    }


@pytest.fixture(scope="module")
def everything(start_server, paths):
    return start_server(
        paths["vision"],
        "--speech-model",
        paths["tts"],
        "--transcription-model",
        paths["asr"],
        name="every-engine",
    )


@pytest.fixture(scope="module")
def long_audio(tmp_path_factory) -> bytes:
    folder = tmp_path_factory.mktemp("disconnect-audio")
    parts = [speech_wav(folder / f"{i}.wav", text, seed=i) for i, text in enumerate(SENTENCES)]
    return concat_wavs(folder / "long.wav", parts, repeat=10).read_bytes()


def _requests(paths: dict[str, str], audio: bytes) -> dict[str, dict]:
    """One long request of every operation kind: the JSON body, or the multipart form."""
    chat_model = model_name(paths["vision"])
    hello = [{"role": "user", "content": "Tell me everything."}]
    return {
        "chat": {"path": "/v1/chat/completions", "json": {"model": chat_model, "messages": hello}},
        "completion": {"path": "/v1/completions", "json": {"model": chat_model, "prompt": "Once"}},
        "vision": {
            "path": "/v1/chat/completions",
            "json": {"model": chat_model, "messages": [openai_image_message("What?", png(0))]},
        },
        "speech": {
            "path": "/v1/audio/speech",
            "json": {"model": model_name(paths["tts"]), "input": LONG_TEXT, "voice": "vivian"},
        },
        "transcription": {
            "path": "/v1/audio/transcriptions",
            "data": {"model": model_name(paths["asr"])},
            "files": {"file": ("long.wav", audio, "audio/wav")},
        },
    }


def _send(server, request: dict, stream: bool, short: bool = False, **client_args):
    body = dict(request.get("json") or {})
    data = dict(request.get("data") or {})
    generative = "messages" in body or "prompt" in body
    if generative:
        body["max_tokens"] = 4 if short else 2000
        body["temperature"] = 0  # greedy: a sampled end of text cannot end it before the hang-up
    if stream:
        (body if "json" in request else data)["stream"] = "true" if data else True
        if "input" in body:
            body["stream_format"] = "sse"
    return httpx.Client(**client_args).stream(
        "POST",
        server.url + request["path"],
        json=body or None,
        data=data or None,
        files=request.get("files"),
        headers=server.headers,
    )


def _idle(server, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = server.stats()
        if stats["active"] == 0 and stats["waiting"] == 0:
            return stats
        time.sleep(0.1)
    raise AssertionError(f"the worker is still busy: {server.stats()}")


KINDS = ("chat", "completion", "vision", "speech", "transcription")


@pytest.mark.parametrize("kind", KINDS)
def test_a_streamed_request_whose_client_leaves_is_aborted_and_the_worker_stays(
    everything, paths, long_audio, kind
):
    pid = everything.worker_pid()
    before = everything.stats()["requests_aborted"]
    request = _requests(paths, long_audio)[kind]
    with _send(everything, request, stream=True, timeout=120) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data:"):
                break  # leave after the first event
    _idle(everything)
    assert everything.stats()["requests_aborted"] > before
    assert everything.worker_pid() == pid


async def _post_for_at_most(server, request: dict, seconds: float) -> None:
    """Sends `request` (not streamed) and hangs up after `seconds`, as `curl -m` does."""
    async with httpx.AsyncClient(timeout=120) as client:
        body = dict(request.get("json") or {})
        if "messages" in body or "prompt" in body:
            body["max_tokens"] = 2000
            body["temperature"] = 0  # greedy, as in _send
        send = client.post(
            server.url + request["path"],
            json=body or None,
            data=request.get("data"),
            files=request.get("files"),
            headers=server.headers,
        )
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(send, seconds)


async def _hang_up_once_the_worker_has_it(
    server, request: dict, seconds: float, submitted: int
) -> None:
    """_post_for_at_most, hanging up after `seconds` but not before the worker's
    requests_total passed `submitted` (the request reached the worker)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    task = asyncio.ensure_future(_post_for_at_most(server, request, 120.0))
    while loop.time() - started < 60:
        await asyncio.sleep(0.1)
        if (await asyncio.to_thread(server.stats))["requests_total"] > submitted:
            break
    await asyncio.sleep(max(0.0, seconds - (loop.time() - started)))
    task.cancel()  # the client goes away: its connection closes
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("kind", KINDS)
def test_a_request_whose_client_times_out_is_aborted_and_the_worker_stays(
    everything, paths, long_audio, kind
):
    pid = everything.worker_pid()
    stats = _idle(everything)
    before, submitted = stats["requests_aborted"], stats["requests_total"]
    # Hang up once the worker has it (a request still in the gateway, its image or audio
    # being read, never reaches the worker to be aborted there), at least after 1 s.
    request = _requests(paths, long_audio)[kind]
    asyncio.run(_hang_up_once_the_worker_has_it(everything, request, 1.0, submitted))
    _idle(everything)
    assert everything.stats()["requests_aborted"] > before
    assert everything.worker_pid() == pid


def test_after_every_kind_of_hang_up_every_kind_of_request_is_served(everything, paths, long_audio):
    pid = everything.worker_pid()
    requests = _requests(paths, long_audio)
    # Hang up on all of them at once, so several engines abort in the same iteration.
    streams = [_send(everything, requests[k], stream=True, timeout=120) for k in KINDS]
    for context in streams:
        r = context.__enter__()
        assert r.status_code == 200
    for context in streams:
        context.__exit__(None, None, None)
    _idle(everything)
    for kind in KINDS:
        request = dict(requests[kind])
        if kind == "transcription":
            first = Path(speech_wav(Path(everything.log_path).parent / "one.wav", SENTENCES[0]))
            request["files"] = {"file": ("one.wav", first.read_bytes(), "audio/wav")}
        # This TTS model speaks for minutes: its first streamed audio will do.
        speech = kind == "speech"
        with _send(everything, request, stream=speech, short=True, timeout=120) as r:
            assert r.status_code == 200, (kind, r.read())
            assert next(r.iter_bytes()) if speech else r.read(), kind
    assert everything.worker_pid() == pid
