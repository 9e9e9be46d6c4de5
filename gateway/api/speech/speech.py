"""`POST /v1/audio/speech` (text -> speech, OpenAI shape) and the voices routes:
`GET /v1/audio/voices` (presets, abilities, saved voices), `POST /v1/audio/voices` (save a
voice to clone) and `DELETE /v1/audio/voices/{voice_id}`.

Speech and the listing need a speech model in the worker: its Ready message's `speech` section
(voices, what it can do, sample rate, served name) is what these routes read; OpenAI's voice
names map onto its voices (gateway/audio/speech/voice_aliases.py), and the listing shows how.
Saved voices live in the gateway (gateway/audio/speech/voice_store.py) and need no worker.
See gateway/audio/speech/request.py for the fields, form.py for multipart bodies,
gateway/audio/speech/voices.py for saved voices and aliases in requests, stream.py for buffered
vs streamed responses and gateway/audio/speech/encoding.py for the formats.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.api.speech import stream as speech_stream
from gateway.api.speech.form import is_form, speech_body, voice_upload
from gateway.audio.speech import voices as speech_voices
from gateway.audio.speech.encoding import CONTENT_TYPES, available_formats, encode
from gateway.audio.speech.request import parse_speech
from gateway.audio.speech.served import speech_model, voice_aliases, voice_store
from gateway.http.errors import APIError
from gateway.http.json_request import read_json
from gateway.http.model_names import resolve_model
from gateway.http.model_routing import engine_for, engine_of, first_model_of
from gateway.http.multipart import read_form
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import SPEECH


async def _speech_engine(request: Request) -> EngineClient:
    """The TTS model's engine for routes without a body `model`: the one worker's, or (a
    models file) the `model` query parameter's, by default the file's first TTS model."""
    if request.app.state.pool is None:
        return engine_of(request)
    name = request.query_params.get("model") or first_model_of(request, SPEECH)
    if name is None:
        raise APIError(
            404, "The models file has no TTS model", param="model", code="model_not_found"
        )
    return await engine_for(request, name, SPEECH)


async def speech(request: Request) -> Response:
    uploaded = None
    if is_form(request.headers.get("content-type", "")):
        form = await read_form(request, request.app.state.config.max_body_bytes)
        body, uploaded = speech_body(form)
    else:
        body = await read_json(request)
    engine = await engine_for(request, body.get("model"), SPEECH)
    audio = speech_model(engine)
    call = parse_speech(body, audio.sample_rate, uploaded)
    # Its id or path, OpenAI's tts-1 / tts-1-hd / gpt-4o-mini-tts; on a speech-only server
    # (--omni) also the server's model name, the same model (gateway/workers/served_models.py).
    resolve_model(request, call.model, SPEECH)
    aliases = voice_aliases(request, audio)
    call = speech_voices.resolve(call, audio, voice_store(request), aliases)
    if call.mode != "file":
        return await speech_stream.stream(request, engine, call, audio.sample_rate)
    result = await speech_stream.collect(request, engine, call)
    rate = result.sample_rate or audio.sample_rate
    # Encoders are CPU work (FFmpeg, numpy): off the event loop.
    data = await run_in_threadpool(encode, call.response_format, result.pcm, rate)
    usage = result.usage
    headers = {
        "x-usage-input-tokens": str(usage.prompt_tokens),
        "x-usage-output-tokens": str(usage.completion_tokens),
    }
    return Response(data, media_type=CONTENT_TYPES[call.response_format], headers=headers)


async def voices(request: Request) -> Response:
    audio = speech_model(await _speech_engine(request))
    presets = [{"name": v.name, "language": v.language, "type": "preset"} for v in audio.voices]
    saved = [v.public() for v in voice_store(request).list()]
    aliases = [a.public() for a in voice_aliases(request, audio).values()]
    return JSONResponse(
        {
            "object": "list",
            "model": audio.model,
            "voices": presets + saved,
            "aliases": aliases,
            "cloning": audio.cloning,
            "ref_text": audio.ref_text,
            "descriptions": audio.descriptions,
            "instructions": audio.instructions,
            "languages": audio.languages,
            "speed": audio.speed,
            "sample_rate": audio.sample_rate,
            "response_formats": available_formats(audio.sample_rate),
        }
    )


async def create_voice(request: Request) -> Response:
    form = await read_form(request, request.app.state.config.max_body_bytes)
    upload = voice_upload(form)
    voice = voice_store(request).add(upload.name, upload.audio, upload.transcript)
    return JSONResponse(voice.public())


async def delete_voice(request: Request) -> Response:
    voice = voice_store(request).delete(request.path_params["voice_id"])
    return JSONResponse({"id": voice.id, "object": "audio.voice.deleted", "deleted": True})
