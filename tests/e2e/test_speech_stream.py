"""`WS /v1/audio/speech/stream` against the real processes: text in as it is written, speech
out phrase by phrase, the first audio before the input has ended; the key, and bad input."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from tests.support.server import model_name

WORDS = ("The sea was calm that morning. The boats went out early, and the gulls followed "
         "them far from the shore. Nobody spoke on the pier.").split(" ")  # fmt: skip


def _url(server) -> str:
    return server.url.replace("http://", "ws://") + "/v1/audio/speech/stream"


async def _talk(server, tts: str) -> dict:
    seen: list[str] = []
    audio = 0
    async with websockets.connect(_url(server), additional_headers=server.headers) as ws:
        await ws.send(json.dumps({"type": "start", "model": tts, "voice": "vivian"}))
        started = json.loads(await ws.recv())
        audio_before_end = False

        async def read() -> dict:
            nonlocal audio
            async for frame in ws:
                if isinstance(frame, bytes):
                    audio += len(frame)
                    seen.append("audio")
                    continue
                event = json.loads(frame)
                seen.append(event["type"])
                if event["type"] in ("done", "error"):
                    return event
            return {}

        reader = asyncio.ensure_future(read())
        for word in WORDS:
            await ws.send(json.dumps({"type": "text", "text": word + " "}))
            await asyncio.sleep(0.05)
        for _ in range(200):  # the input goes on until the first phrase was heard
            if "audio" in seen:
                audio_before_end = True
                break
            await asyncio.sleep(0.05)
        await ws.send(json.dumps({"type": "end"}))
        done = await asyncio.wait_for(reader, 120)
    return {"started": started, "done": done, "seen": seen, "audio": audio,
            "audio_before_end": audio_before_end}  # fmt: skip


def test_text_streamed_in_is_spoken_phrase_by_phrase_before_the_input_ends(
    full_server, speech_paths
):
    result = asyncio.run(_talk(full_server, model_name(speech_paths["tts"])))
    assert result["started"]["format"] == "pcm16" and result["started"]["sample_rate"] > 0
    assert result["done"]["type"] == "done" and result["done"]["phrases"] == 3
    assert result["audio_before_end"]
    assert result["audio"] > 0 and result["audio"] % 2 == 0
    assert result["done"]["audio_seconds"] == pytest.approx(
        result["audio"] / 2 / result["started"]["sample_rate"], abs=0.01
    )
    phrases = [e for e in result["seen"] if e == "phrase"]
    assert len(phrases) == 3


def test_a_websocket_without_the_key_is_refused(full_server):
    async def connect() -> None:
        async with websockets.connect(_url(full_server)):
            pass

    with pytest.raises(websockets.exceptions.InvalidStatus) as caught:
        asyncio.run(connect())
    assert caught.value.response.status_code == 403


def test_the_key_may_come_as_the_sdks_subprotocol(full_server, speech_paths):
    async def start() -> dict:
        protocol = f"openai-insecure-api-key.{full_server.api_key}"
        async with websockets.connect(_url(full_server), subprotocols=[protocol]) as ws:
            await ws.send(json.dumps({"type": "start", "model": model_name(speech_paths["tts"]),
                                      "voice": "vivian"}))  # fmt: skip
            return json.loads(await ws.recv())

    assert asyncio.run(start())["type"] == "started"


@pytest.mark.parametrize(
    ("first", "param"),
    [
        ({"type": "text", "text": "hi"}, "type"),
        ({"type": "start", "model": "nobody", "voice": "vivian"}, "model"),
        ({"type": "start", "voice": "vivian", "colour": "blue"}, "colour"),
    ],
)
def test_a_bad_session_gets_an_error_event_naming_the_field(full_server, first, param):
    async def run() -> tuple[dict, int]:
        async with websockets.connect(
            _url(full_server), additional_headers=full_server.headers
        ) as ws:
            await ws.send(json.dumps(first))
            event = json.loads(await ws.recv())
            await ws.wait_closed()
            return event, ws.close_code

    event, code = asyncio.run(run())
    assert event["type"] == "error" and event["error"]["param"] == param and code == 1008
