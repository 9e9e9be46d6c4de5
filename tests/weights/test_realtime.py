"""`/v1/realtime` driven by the official openai SDK's realtime client against the real
processes: espeak-ng speech sent as PCM16 at real-time pace, the server VAD's events, the
real Whisper's transcript (equal to /v1/audio/transcriptions on the same audio), a spoken
response (its transcript deltas, its audio deltas), a function call round trip, barge-in
cancelling a response, the beta interface, and bad events answered with `error` events.

The server: the scripted Qwen3 (worker/tiny_models/scripted.py: it ends its turns, it calls a
tool when one is required, it answers after a tool result) as the chat model, Whisper tiny.en
(real weights, float32) as the speech recognizer and the tiny Qwen3-TTS that speaks 3.2 s a
phrase (so a response lasts long enough to be interrupted).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
from pathlib import Path

import httpx
import pytest
import websockets
from openai import AsyncOpenAI

from gateway.api.realtime.transcription import speech_cut_ms
from gateway.api.realtime.vad import WINDOW_MS
from tests.support.server import API_KEY
from tests.support.spoken import loud_span_ms, pcm24k, word_error_rate
from tests.weights.conftest import start_server
from worker.tiny_models import ensure_checkpoint
from worker.tiny_models.scripted import ANSWER, TOOL_NAME

pytestmark = pytest.mark.real_weights

QUESTION = "Please send me the report before the meeting on Friday morning."
INTERRUPTION = "Wait, stop talking please."
CHUNK_MS = 100
MAX_SESSIONS = 3


@pytest.fixture(scope="module")
def voice_server(tiny_en, tmp_path_factory):
    args = [
        str(ensure_checkpoint("qwen3_scripted")),
        "--speech-model", str(ensure_checkpoint("qwen3_tts", "bench")),
        "--transcription-model", tiny_en,
        "--dtype", "float32",
        "--max-realtime-sessions", str(MAX_SESSIONS),
    ]  # fmt: skip
    server = start_server(args, tmp_path_factory.mktemp("logs") / "realtime.log")
    yield server
    server.stop()


async def send_paced(conn, pcm: bytes) -> None:
    """The audio in 100 ms appends, one every 100 ms: a microphone's pace."""
    step = 48 * CHUNK_MS
    for at in range(0, len(pcm), step):
        await conn.input_audio_buffer.append(audio=base64.b64encode(pcm[at : at + step]).decode())
        await asyncio.sleep(CHUNK_MS / 1000)


async def events_until(conn, done, timeout: float = 120) -> list:
    events = []

    async def read():
        async for event in conn:
            events.append(event)
            if event.type == "error":
                raise AssertionError(f"error event: {event.error}")
            if done(event, events):
                return

    await asyncio.wait_for(read(), timeout)
    return events


def client(server) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{server.url}/v1", api_key=API_KEY)


def model(server) -> str:
    return httpx.get(f"{server.url}/v1/models", headers=server.headers).json()["data"][0]["id"]


def of(events, kind: str) -> list:
    return [e for e in events if e.type == kind]


def test_a_spoken_question_gets_vad_events_its_transcript_and_a_spoken_answer(voice_server):
    pcm = pcm24k(QUESTION)

    async def talk():
        async with client(voice_server).realtime.connect(model=model(voice_server)) as conn:
            await conn.session.update(session={
                "type": "realtime", "instructions": "Answer briefly.",
                "audio": {"input": {"transcription": {"model": "whisper-1", "language": "en"}}},
            })  # fmt: skip
            sender = asyncio.ensure_future(send_paced(conn, pcm))
            events = await events_until(conn, lambda e, _: e.type == "response.done")
            await sender
            return events

    events = asyncio.run(talk())
    kinds = [e.type for e in events]
    order = ["session.created", "input_audio_buffer.speech_started",
             "input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
             "conversation.item.input_audio_transcription.completed", "response.created",
             "response.output_audio_transcript.delta", "response.output_audio.delta",
             "response.output_audio.done", "response.done"]  # fmt: skip
    positions = [kinds.index(kind) for kind in order]
    assert positions == sorted(positions), kinds

    started = of(events, "input_audio_buffer.speech_started")
    stopped = of(events, "input_audio_buffer.speech_stopped")
    assert len(started) == len(stopped) == 1
    assert started[0].item_id == stopped[0].item_id
    # The start is moved back by the 300 ms prefix padding; the end is after 500 ms of silence.
    begins_ms, ends_ms = loud_span_ms(pcm)
    assert begins_ms - 400 <= started[0].audio_start_ms <= begins_ms - 200
    assert ends_ms + 400 <= stopped[0].audio_end_ms <= ends_ms + 800

    completed = of(events, "conversation.item.input_audio_transcription.completed")[0]
    transcript = completed.transcript
    assert word_error_rate([(QUESTION, transcript)]) <= 0.2, transcript
    # usage: the committed turn's duration (it was always 0.0: read after the audio was freed)
    turn_seconds = (stopped[0].audio_end_ms - started[0].audio_start_ms) / 1000
    assert completed.usage.seconds == pytest.approx(turn_seconds, abs=0.05)
    # The turn up to 200 ms into its closing silence (the VAD counts the 500 ms of it in 32 ms
    # windows) through /v1/audio/transcriptions: the same words. It was recognized while that
    # silence went on (gateway/api/realtime/transcription.py).
    silence_start_ms = stopped[0].audio_end_ms - math.ceil(500 / WINDOW_MS) * WINDOW_MS
    cut_ms = speech_cut_ms(silence_start_ms, 500)
    speech = pcm[started[0].audio_start_ms * 48 : cut_ms * 48]
    assert transcript == _transcribe(voice_server, speech)

    deltas = "".join(e.delta for e in of(events, "response.output_audio_transcript.delta"))
    done = of(events, "response.output_audio_transcript.done")[0].transcript
    assert deltas == done == ANSWER
    audio = b"".join(base64.b64decode(e.delta) for e in of(events, "response.output_audio.delta"))
    assert len(audio) % 2 == 0 and 0.5 <= len(audio) / 48000 <= 30
    response = of(events, "response.done")[0].response
    assert response.status == "completed" and response.usage.output_tokens > 0
    assert response.output[0].content[0].transcript == ANSWER


def _transcribe(server, pcm: bytes) -> str:
    from gateway.api.realtime.pcm import wav_file

    r = httpx.post(
        f"{server.url}/v1/audio/transcriptions",
        data={"model": "whisper-1", "language": "en"},
        files={"file": ("turn.wav", wav_file(pcm))},
        headers=server.headers,
        timeout=120,
    )
    assert r.status_code == 200, r.text
    return r.json()["text"].strip()


def test_a_function_call_round_trip(voice_server):
    async def talk():
        async with client(voice_server).realtime.connect(model=model(voice_server)) as conn:
            await conn.session.update(session={
                "type": "realtime", "output_modalities": ["text"],
                "audio": {"input": {"turn_detection": None}},
                "tools": [{"type": "function", "name": TOOL_NAME, "description": "The time.",
                           "parameters": {"type": "object", "properties": {}}}],
                "tool_choice": "required",
            })  # fmt: skip
            await conn.conversation.item.create(item={
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "What time is it?"}],
            })  # fmt: skip
            await conn.response.create()
            called = await events_until(conn, lambda e, _: e.type == "response.done")
            call = of(called, "response.function_call_arguments.done")[0]
            await conn.conversation.item.create(item={
                "type": "function_call_output", "call_id": call.call_id, "output": "12:00",
            })  # fmt: skip
            await conn.response.create(response={"tool_choice": "auto"})
            answered = await events_until(conn, lambda e, _: e.type == "response.done")
            return called, answered

    called, answered = asyncio.run(talk())
    call = of(called, "response.function_call_arguments.done")[0]
    assert call.name == TOOL_NAME and json.loads(call.arguments) == {}
    pieces = "".join(e.delta for e in of(called, "response.function_call_arguments.delta"))
    assert pieces == call.arguments
    output = of(called, "response.done")[0].response.output
    assert [item.type for item in output] == ["function_call"]
    assert output[0].call_id == call.call_id
    text = "".join(e.delta for e in of(answered, "response.output_text.delta"))
    assert text == of(answered, "response.output_text.done")[0].text == ANSWER
    assert of(answered, "response.done")[0].response.status == "completed"


def test_speech_during_a_response_cancels_it_and_cuts_it_to_what_was_sent(voice_server):
    first, second = pcm24k(QUESTION), pcm24k(INTERRUPTION, lead_s=0.1)

    async def talk():
        async with client(voice_server).realtime.connect(model=model(voice_server)) as conn:
            sender = asyncio.ensure_future(send_paced(conn, first))
            events = await events_until(conn, lambda e, _: e.type == "response.output_audio.delta")
            await sender
            interrupter = asyncio.ensure_future(send_paced(conn, second))
            dones = lambda e, seen: len(of(seen, "response.done")) == 2  # noqa: E731
            events += await events_until(conn, dones)
            await interrupter
            return events

    events = asyncio.run(talk())
    kinds = [e.type for e in events]
    cancelled, completed = of(events, "response.done")
    assert cancelled.response.status == "cancelled"
    assert cancelled.response.status_details.reason == "turn_detected"
    second_start = [i for i, k in enumerate(kinds) if k == "input_audio_buffer.speech_started"][1]
    assert second_start < kinds.index("response.done")  # the user spoke during the response
    item = cancelled.response.output[0]
    assert item.status == "incomplete"
    # Cut to what was sent: the phrase whose audio had started (the whole answer is one).
    assert item.content[0].transcript in ("", ANSWER)
    assert completed.response.status == "completed"
    assert completed.response.output[0].content[0].transcript == ANSWER


def _ws_url(server) -> str:
    return server.url.replace("http://", "ws://") + f"/v1/realtime?model={model(server)}"


async def _next(ws, kind: str) -> dict:
    while True:
        event = json.loads(await asyncio.wait_for(ws.recv(), 120))
        if event["type"] == kind:
            return event
        if event["type"] == "error" and kind != "error":
            raise AssertionError(event)


def test_the_beta_interface_names_its_events_as_the_beta_did(voice_server):
    headers = {**voice_server.headers, "OpenAI-Beta": "realtime=v1"}

    async def talk():
        async with websockets.connect(_ws_url(voice_server), additional_headers=headers) as ws:
            created = await _next(ws, "session.created")
            await ws.send(json.dumps({"type": "session.update", "session": {
                "modalities": ["text", "audio"], "voice": "alloy", "turn_detection": None,
                "input_audio_format": "pcm16", "temperature": 0.7,
            }}))  # fmt: skip
            updated = await _next(ws, "session.updated")
            await ws.send(json.dumps({"type": "conversation.item.create", "item": {
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "Hello?"}],
            }}))  # fmt: skip
            item = await _next(ws, "conversation.item.created")
            await ws.send(json.dumps({"type": "response.create"}))
            seen = []
            while (event := json.loads(await asyncio.wait_for(ws.recv(), 120)))[
                "type"
            ] != "response.done":
                seen.append(event["type"])
            return created, updated, item, seen, event

    created, updated, item, seen, done = asyncio.run(talk())
    assert created["session"]["modalities"] == ["text", "audio"]
    assert updated["session"]["turn_detection"] is None
    assert updated["session"]["temperature"] == 0.7
    assert item["item"]["content"] == [{"type": "input_text", "text": "Hello?"}]
    assert "response.audio_transcript.delta" in seen and "response.audio.delta" in seen
    assert "response.output_audio.delta" not in seen
    assert done["response"]["output"][0]["content"][0] == {"type": "audio", "transcript": ANSWER}


BAD_EVENTS = [
    ("not json", "invalid_json", None),
    (json.dumps({"type": "session.dance"}), "invalid_event", "type"),
    (json.dumps({"type": "session.update", "session": {"audio": {"input": {
        "turn_detection": {"type": "semantic_vad"}}}}}),
     "unsupported_turn_detection", "session.audio.input.turn_detection.type"),
    (json.dumps({"type": "session.update", "session": {"audio": {"input": {
        "format": {"type": "audio/pcmu"}}}}}),
     "unsupported_audio_format", "session.audio.input.format"),
    (json.dumps({"type": "session.update", "session": {"tools": [{"type": "mcp"}]}}),
     "unsupported_tool", "session.tools[0].type"),
    (json.dumps({"type": "session.update", "session": {"instrucshuns": "x"}}),
     "unknown_parameter", "session.instrucshuns"),
    (json.dumps({"type": "input_audio_buffer.append", "audio": "%%%"}), "invalid_audio", "audio"),
    (json.dumps({"type": "input_audio_buffer.append", "audio": "AA=="}), "invalid_audio", "audio"),
    (json.dumps({"type": "input_audio_buffer.commit"}), "input_audio_buffer_commit_empty", None),
    (json.dumps({"type": "response.cancel"}), "response_cancel_not_active", "response_id"),
    (json.dumps({"type": "conversation.item.truncate", "item_id": "nope", "content_index": 0,
                 "audio_end_ms": 0}), "item_not_found", "item_id"),
    (json.dumps({"type": "conversation.item.create", "item": {"type": "message",
                 "role": "robot", "content": []}}), "invalid_value", "item.role"),
    (json.dumps({"type": "response.create", "response": {"max_output_tokens": 0}}),
     "invalid_value", "response.max_output_tokens"),
]  # fmt: skip


def test_bad_events_get_error_events_naming_them_and_the_session_goes_on(voice_server):
    async def talk():
        async with websockets.connect(_ws_url(voice_server),
                                      additional_headers=voice_server.headers) as ws:  # fmt: skip
            await _next(ws, "session.created")
            errors = []
            for i, (frame, _, _) in enumerate(BAD_EVENTS):
                if frame.startswith("{"):
                    frame = json.dumps({**json.loads(frame), "event_id": f"evt_{i}"})
                await ws.send(frame)
                errors.append(await _next(ws, "error"))
            await ws.send(json.dumps({"type": "session.update", "session": {
                "output_modalities": ["text"]}}))  # fmt: skip
            await _next(ws, "session.updated")
            await ws.send(json.dumps({"type": "conversation.item.create", "item": {
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "Hello?"}]}}))  # fmt: skip
            await ws.send(json.dumps({"type": "response.create"}))
            return errors, await _next(ws, "response.done")

    errors, done = asyncio.run(talk())
    for i, ((frame, code, param), event) in enumerate(zip(BAD_EVENTS, errors, strict=True)):
        error = event["error"]
        assert (error["code"], error["param"]) == (code, param), (frame, error)
        assert error["type"] == "invalid_request_error" and error["message"]
        assert error["event_id"] == (f"evt_{i}" if frame.startswith("{") else None)
    assert done["response"]["status"] == "completed"
    assert done["response"]["output"][0]["content"][0]["text"] == ANSWER


def test_the_key_is_needed_and_sessions_are_bounded(voice_server):
    async def talk():
        with pytest.raises(websockets.InvalidStatus):
            async with websockets.connect(_ws_url(voice_server)):
                pass
        browser = [f"openai-insecure-api-key.{API_KEY}", "realtime"]
        sockets = [await websockets.connect(_ws_url(voice_server), subprotocols=browser)
                   for _ in range(MAX_SESSIONS)]  # fmt: skip
        try:
            for ws in sockets:
                assert ws.subprotocol == "realtime"
                await _next(ws, "session.created")
            async with websockets.connect(_ws_url(voice_server), subprotocols=browser) as extra:
                refused = await _next(extra, "error")
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    await extra.recv()
            return refused, closed.value.rcvd.code
        finally:
            for ws in sockets:
                await ws.close()

    refused, code = asyncio.run(talk())
    assert refused["error"]["code"] == "session_limit_reached" and code == 1013


def test_a_turn_committed_by_hand_is_transcribed_and_answered(voice_server, tmp_path: Path):
    pcm = pcm24k(QUESTION, lead_s=0.2, tail_s=0.2)

    async def talk():
        async with client(voice_server).realtime.connect(model=model(voice_server)) as conn:
            await conn.session.update(session={
                "type": "realtime", "output_modalities": ["text"],
                "audio": {"input": {"turn_detection": None,
                                    "transcription": {"model": "whisper-1", "language": "en"}}},
            })  # fmt: skip
            await conn.input_audio_buffer.append(audio=base64.b64encode(pcm).decode())
            await conn.input_audio_buffer.commit()
            await conn.response.create()
            return await events_until(conn, lambda e, _: e.type == "response.done")

    events = asyncio.run(talk())
    assert not of(events, "input_audio_buffer.speech_started")  # no VAD
    transcript = of(events, "conversation.item.input_audio_transcription.completed")[0].transcript
    assert transcript == _transcribe(voice_server, pcm)
    kinds = [e.type for e in events]
    assert kinds.index("conversation.item.input_audio_transcription.completed") < kinds.index(
        "response.created"
    )  # the response heard the transcript
    assert "".join(e.delta for e in of(events, "response.output_text.delta")) == ANSWER


def test_an_audio_item_a_cancel_and_a_truncate(voice_server):
    pcm = pcm24k(QUESTION, lead_s=0.2, tail_s=0.2)

    async def talk():
        async with client(voice_server).realtime.connect(model=model(voice_server)) as conn:
            await conn.session.update(session={
                "type": "realtime",
                "audio": {"input": {"turn_detection": None,
                                    "transcription": {"model": "whisper-1", "language": "en"}}},
            })  # fmt: skip
            await conn.conversation.item.create(item={
                "type": "message", "role": "user",
                "content": [{"type": "input_audio", "audio": base64.b64encode(pcm).decode()}],
            })  # fmt: skip
            heard = await events_until(
                conn,
                lambda e, _: e.type == "conversation.item.input_audio_transcription.completed",
            )
            await conn.response.create()
            spoken = await events_until(conn, lambda e, _: e.type == "response.output_audio.delta")
            await conn.response.cancel()
            spoken += await events_until(conn, lambda e, _: e.type == "response.done")
            item_id = of(spoken, "response.done")[0].response.output[0].id
            await conn.conversation.item.truncate(item_id=item_id, content_index=0, audio_end_ms=0)
            truncated = await events_until(
                conn, lambda e, _: e.type == "conversation.item.truncated"
            )
            await conn.conversation.item.retrieve(item_id=item_id)
            retrieved = await events_until(
                conn, lambda e, _: e.type == "conversation.item.retrieved"
            )
            return heard, spoken, truncated, retrieved

    heard, spoken, truncated, retrieved = asyncio.run(talk())
    transcript = of(heard, "conversation.item.input_audio_transcription.completed")[0].transcript
    assert transcript == _transcribe(voice_server, pcm)
    done = of(spoken, "response.done")[0].response
    assert done.status == "cancelled" and done.status_details.reason == "client_cancelled"
    assert of(truncated, "conversation.item.truncated")[0].audio_end_ms == 0
    item = of(retrieved, "conversation.item.retrieved")[0].item
    assert item.content[0].transcript == ""  # nothing was heard: nothing stays in the context
