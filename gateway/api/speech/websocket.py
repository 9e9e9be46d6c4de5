"""`WS /v1/audio/speech/stream`: text in as it is written (an LLM's tokens), speech out phrase
by phrase as soon as each is complete; ending the input speaks the rest.

Messages, JSON text frames unless said otherwise (docs/speech.md, "Streaming text in"):

    client -> server
      {"type": "start", "model", "voice", "language"?, "instructions"?, "speed"?, "seed"?}
                      first, once: what every phrase is spoken with (the speech request's
                      fields but `input`; the voice as in /v1/audio/speech)
      {"type": "text", "text": "..."}   more text, any size (a token, a sentence)
      {"type": "flush"}                 speak what is pending now, complete or not
      {"type": "end"}                   no more text: speak the rest, then "done"
    server -> client
      {"type": "started", "model", "sample_rate", "format": "pcm16"}
      {"type": "phrase", "index": i, "text": "..."}   a phrase begins; binary frames follow:
      <binary>                          16-bit little-endian mono PCM at `sample_rate`
      {"type": "phrase_done", "index": i}
      {"type": "done", "phrases": n, "audio_seconds": s}   then the server closes (1000)
      {"type": "error", "error": {"message", "param", "code"}}   then it closes (1008 for bad
                      input, 1011 for a failure inside)

Phrases are cut as for audio out of chat (gateway/audio/speech/phrases.Phrases) and spoken in order,
one speech request each, while more text arrives. Bounded: a message of at most
`MAX_MESSAGE_CHARS`, a session of at most `MAX_SESSION_CHARS`. The client leaving aborts the
phrase being spoken.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from gateway.audio.speech.phrases import Phrases, PhraseSpeaker, Voice
from gateway.audio.speech.served import phrase_voice, speech_model
from gateway.http.errors import APIError, invalid, unknown_field
from gateway.http.json_body import BodyError, parse_json
from gateway.http.model_names import resolve_model
from gateway.http.model_routing import engine_for, first_model_of
from gateway.workers.errors import EngineUnavailable
from gateway.workers.served_models import SPEECH

MAX_MESSAGE_CHARS = 65536
MAX_SESSION_CHARS = 1 << 20
START_FIELDS = frozenset({"type", "model", "voice", "language", "instructions", "speed", "seed"})


async def speech_stream(websocket: WebSocket) -> None:
    await websocket.accept(subprotocol=_subprotocol(websocket))
    try:
        await _session(websocket)
    except WebSocketDisconnect:
        return
    except APIError as exc:
        await _fail(websocket, exc, 1008 if exc.status < 500 else 1011)
    except EngineUnavailable as exc:
        await _fail(websocket, APIError(503, exc.reason, code="engine_unavailable"), 1011)


def _subprotocol(websocket: WebSocket) -> str | None:
    """Echo a subprotocol the client offered (the SDKs' key-carrying ones need an answer)."""
    offered = websocket.scope.get("subprotocols") or []
    return offered[0] if offered else None


async def _fail(websocket: WebSocket, error: APIError, code: int) -> None:
    body = {"message": error.message, "param": error.param, "code": error.code}
    try:
        await websocket.send_text(json.dumps({"type": "error", "error": body}))
        await websocket.close(code)
    except (WebSocketDisconnect, RuntimeError):
        pass


async def _receive(websocket: WebSocket) -> dict[str, Any]:
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    text = message.get("text")
    if text is None:
        raise invalid(None, "send JSON text frames (binary frames are not taken)")
    if len(text) > MAX_MESSAGE_CHARS:
        raise invalid(None, f"a message may hold at most {MAX_MESSAGE_CHARS} characters")
    try:
        event = parse_json(text.encode())
    except BodyError as exc:
        raise invalid(exc.param, f"a message must be a JSON object: {exc}") from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise invalid("type", "a message must be a JSON object with a string `type`")
    return event


async def _voice(websocket: WebSocket, start: dict[str, Any]) -> tuple[Any, Voice]:
    """The TTS engine and what each phrase is spoken with, from the start message."""
    for key in start:
        if key not in START_FIELDS:
            raise unknown_field(key)
    name = start.get("model") or first_model_of(websocket, SPEECH)
    engine = await engine_for(websocket, name, SPEECH)  # a WebSocket is a connection too
    audio = speech_model(engine)
    if name is not None:
        resolve_model(websocket, name, SPEECH)  # 404 / 400 naming it
    fields = {k: v for k, v in start.items() if k != "type"}
    return engine, phrase_voice(websocket, audio, {**fields, "model": name or audio.model})


async def _session(websocket: WebSocket) -> None:
    start = await _receive(websocket)
    if start["type"] != "start":
        raise invalid("type", 'the first message must be {"type": "start", ...}')
    engine, voice = await _voice(websocket, start)
    await websocket.send_json(
        {"type": "started", "model": start.get("model"), "sample_rate": voice.sample_rate,
         "format": "pcm16"}
    )  # fmt: skip
    phrases: asyncio.Queue = asyncio.Queue()
    speaker = asyncio.ensure_future(_speak_all(websocket, engine, voice, phrases))
    try:
        await _read_text(websocket, phrases, speaker)
        await speaker
    finally:
        speaker.cancel()
        await asyncio.gather(speaker, return_exceptions=True)


async def _read_text(websocket: WebSocket, phrases: asyncio.Queue, speaker: Any) -> None:
    splitter = Phrases(websocket.app.state.config.first_phrase_words)
    total = 0
    while True:
        receiving = asyncio.ensure_future(_receive(websocket))
        done, _ = await asyncio.wait({receiving, speaker}, return_when=asyncio.FIRST_COMPLETED)
        if receiving not in done:  # the speaker failed: its error ends the session
            receiving.cancel()
            await asyncio.gather(receiving, return_exceptions=True)
            return
        event = receiving.result()
        kind = event["type"]
        if kind == "text":
            text = event.get("text")
            if not isinstance(text, str):
                raise invalid("text", "`text` must be a string")
            total += len(text)
            if total > MAX_SESSION_CHARS:
                raise invalid("text", f"a session may speak at most {MAX_SESSION_CHARS} chars")
            for phrase in splitter.feed(text):
                phrases.put_nowait(phrase)
        elif kind in ("flush", "end"):
            for phrase in splitter.flush():
                phrases.put_nowait(phrase)
            if kind == "end":
                phrases.put_nowait(None)
                return
        else:
            raise invalid("type", f"`type` must be text, flush or end, got {kind!r}")


async def _speak_all(
    websocket: WebSocket, engine: Any, voice: Voice, phrases: asyncio.Queue
) -> None:
    index, samples = 0, 0
    speaker = PhraseSpeaker(engine, voice)
    while (phrase := await phrases.get()) is not None:
        await websocket.send_json({"type": "phrase", "index": index, "text": phrase})
        async for delta in speaker.speak(phrase):
            samples += len(delta.audio) // 2
            await websocket.send_bytes(delta.audio)
        await websocket.send_json({"type": "phrase_done", "index": index})
        index += 1
    seconds = round(samples / voice.sample_rate, 3) if voice.sample_rate else 0.0
    await websocket.send_json({"type": "done", "phrases": index, "audio_seconds": seconds})
    await websocket.close(1000)
