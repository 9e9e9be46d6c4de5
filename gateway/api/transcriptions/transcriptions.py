"""`POST /v1/audio/transcriptions` and `POST /v1/audio/translations`: OpenAI speech in.

The upload (multipart) is read under `--max-body-mb` (413 before any parsing), parsed by
`transcription_request`, and its bytes go to the worker's speech-in engine unchanged: decoding
and resampling happen in the worker. Which model: the worker's Ready message says whether it
can transcribe (`capabilities` holds "transcribe", and "translate" for multilingual Whisper)
and which checkpoint does it (`transcription.model_path`). A request's `model` may be its
served name (the checkpoint directory's name, or the server's `--served-model-name` when the
ASR model is the served model), the checkpoint path, or one of OpenAI's model ids
(`whisper-1`, `gpt-4o-transcribe`, `gpt-4o-mini-transcribe`), which this server takes as "the
speech-recognition model it serves" so that clients written for OpenAI work unchanged
(gateway/workers/served_models.py; `gpt-4o-transcribe-diarize` is a 400: no diarization).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.api.transcriptions import stream as transcription_stream
from gateway.api.transcriptions.request import (
    TASK_TRANSCRIBE,
    TASK_TRANSLATE,
    TranscriptionRequest,
    parse_transcription_form,
)
from gateway.audio.transcription.formats import MEDIA_TYPES, render
from gateway.http.errors import APIError
from gateway.http.model_names import resolve_model
from gateway.http.model_routing import engine_for
from gateway.http.multipart import read_form
from gateway.workers.errors import EngineUnavailable
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import TRANSCRIPTION


@dataclass(frozen=True, slots=True)
class SpeechModel:
    name: str
    path: str
    can_translate: bool


async def transcriptions(request: Request) -> Response:
    return await _handle(request, TASK_TRANSCRIBE)


async def translations(request: Request) -> Response:
    return await _handle(request, TASK_TRANSLATE)


async def _handle(request: Request, task: str) -> Response:
    form = await read_form(request, request.app.state.config.max_body_bytes)
    req = parse_transcription_form(form, task)
    engine = await engine_for(request, req.model, TRANSCRIPTION)
    model = _speech_model(request, engine, req.model)
    if task == TASK_TRANSLATE and not model.can_translate:
        raise APIError(
            400,
            f"The model `{model.name}` cannot translate (translation needs a multilingual "
            "Whisper model)",
            param="model",
            code="model_not_supported",
        )
    if req.stream:
        return await transcription_stream.stream(request, engine, req)
    transcript = await transcription_stream.collect(request, engine, req)
    return _response(req, render(req.response_format, transcript, req.words))


def _speech_model(request: Request, engine: EngineClient, requested: str) -> SpeechModel:
    """The speech-recognition model `requested` reaches; 503 while no worker is ready, 404 /
    400 naming the model otherwise (gateway/http/model_names.py)."""
    ready = engine.ready_info
    if ready is None or engine.state != "ready":
        raise EngineUnavailable(f"the engine is {engine.state}: {engine.reason}", 1.0)
    model = resolve_model(request, requested, TRANSCRIPTION)
    return SpeechModel(model.id, model.path, "translate" in model.capabilities)


def _response(req: TranscriptionRequest, body: str | dict[str, Any]) -> Response:
    if isinstance(body, dict):
        return JSONResponse(body)
    return Response(body, media_type=MEDIA_TYPES[req.response_format])
