"""The served speech model and its voices as a request sees them, shared by
`/v1/audio/speech`, its WebSocket, chat completions' audio out and the Realtime API:
`speech_model` (the worker's speech section), the app's saved voices (`voice_store`) and
OpenAI's voice names on the current model (`voice_aliases`), and `phrase_voice` (what every
phrase of a text spoken piece by piece is spoken with).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from gateway.audio.speech import voices as speech_voices
from gateway.audio.speech.phrases import Voice
from gateway.audio.speech.request import parse_speech
from gateway.audio.speech.voice_aliases import AliasCache, VoiceAlias
from gateway.audio.speech.voice_store import VoiceStore
from gateway.http.errors import APIError
from gateway.workers.errors import EngineUnavailable
from gateway.workers.protocol import EngineClient
from protocol.ready import SpeechInfo


def voice_store(request: Request) -> VoiceStore:
    """The app's saved voices, made on first use: they belong to the gateway process."""
    state = request.app.state
    store = getattr(state, "voice_store", None)
    if store is None:
        store = state.voice_store = VoiceStore()
    return store


def phrase_voice(request: Request, audio: SpeechInfo, fields: dict[str, Any]) -> Voice:
    """What every phrase of a text spoken piece by piece is spoken with (audio out of chat,
    WS /v1/audio/speech/stream): a speech request's `fields` but `input`, read and resolved
    by /v1/audio/speech's rules (presets, OpenAI's names, saved voices), with its 400s."""
    call = parse_speech({**fields, "input": "."}, audio.sample_rate)
    call = speech_voices.resolve(call, audio, voice_store(request), voice_aliases(request, audio))
    return Voice(call.inputs, audio.sample_rate)


def speech_model(engine: EngineClient) -> SpeechInfo:
    """The worker's speech section (Ready.speech); 503 while none is ready, 404 if it has none."""
    ready = engine.ready_info
    if ready is None or engine.state != "ready":
        raise EngineUnavailable(f"the engine is {engine.state}", 1.0)
    audio = ready.speech
    if audio is None:
        raise APIError(
            404,
            "This server has no speech model: start it with `serve MODEL --speech-model TTS` "
            "or serve a TTS checkpoint with `serve TTS --omni`",
            param="model",
            code="model_not_found",
        )
    return audio


def voice_aliases(request: Request, audio: SpeechInfo) -> dict[str, VoiceAlias]:
    """OpenAI's voice names and the `--voice-alias` overrides for the current speech model."""
    state = request.app.state
    cache = getattr(state, "voice_aliases", None)
    if cache is None:
        cache = state.voice_aliases = AliasCache(state.config.voice_aliases)
    return cache.table(audio)
