"""`POST /v1/audio/transcriptions` and `POST /v1/audio/translations`: OpenAI speech in.

The upload (multipart) is read under `--max-body-mb` (413 before any parsing), parsed by
`transcription_request`, and its bytes go to the worker's speech-in engine unchanged: decoding
and resampling happen in the worker. Which model: the worker's Ready message says whether it
can transcribe (`capabilities` holds "transcribe", and "translate" for multilingual Whisper)
and which checkpoint does it (`transcription.model_path`). A request's `model` may be its
served name (the checkpoint directory's name, or the server's `--served-model-name` when the
ASR model is the served model), the checkpoint path, or `whisper-1`, OpenAI's model id,
which this server takes as "the speech-recognition model it serves" so that clients written
for OpenAI work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.audio.transcription import stream as transcription_stream
from gateway.audio.transcription.formats import MEDIA_TYPES, render
from gateway.audio.transcription.request import (
    TASK_TRANSCRIBE,
    TASK_TRANSLATE,
    TranscriptionRequest,
    parse_transcription_form,
)
from gateway.engine.errors import EngineUnavailable
from gateway.engine.protocol import EngineClient
from gateway.http.errors import APIError, model_not_found
from gateway.http.multipart import read_form
from gateway.routes.common import engine_of

OPENAI_ALIAS = "whisper-1"


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
    engine = engine_of(request)
    model = _speech_model(engine, req.model)
    if req.model not in (model.name, model.path, OPENAI_ALIAS):
        raise model_not_found(req.model)
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


def _speech_model(engine: EngineClient, requested: str) -> SpeechModel:
    """The speech-recognition model the worker serves; 503 while no worker is ready."""
    ready = engine.ready_info
    if ready is None or engine.state != "ready":
        raise EngineUnavailable(f"the engine is {engine.state}: {engine.reason}", 1.0)
    if "transcribe" not in ready.capabilities:
        if requested in (engine.model_name, engine.model_path):
            raise APIError(
                400,
                f"The model `{engine.model_name}` does not transcribe audio (serve a "
                "speech-recognition model, or add one with --asr-model)",
                param="model",
                code="model_not_supported",
            )
        raise model_not_found(requested)
    info = ready.transcription
    path = info.model_path if info is not None else engine.model_path
    same = path.rstrip("/") == str(engine.model_path).rstrip("/")
    name = engine.model_name if same else Path(path.rstrip("/")).name
    return SpeechModel(name, path, "translate" in ready.capabilities)


def _response(req: TranscriptionRequest, body: str | dict[str, Any]) -> Response:
    if isinstance(body, dict):
        return JSONResponse(body)
    return Response(body, media_type=MEDIA_TYPES[req.response_format])
