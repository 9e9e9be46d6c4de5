"""`GET /v1/models` and `GET /v1/models/{id}`: every served model (the main model, the TTS
model, the speech-recognition model), each with its own capabilities and the engine's state.

`GET /v1/models/{id}` takes every name a request's `model` may be (an id, a checkpoint path,
OpenAI's `tts-1` / `whisper-1` names, a `--model-alias` match) and answers the card of the
model it reaches (gateway/workers/served_models.py).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from gateway.http.model_names import models_of, unknown_model
from gateway.http.model_routing import engine_of
from gateway.workers.served_models import ServedModel, UnsupportedName, lookup

OWNED_BY = "vllm-omni-mlx"


def model_card(request: Request, model: ServedModel) -> dict[str, Any]:
    pool = request.app.state.pool
    entry = pool.find(model.id) if pool is not None else None
    if entry is not None:
        return _pool_card(request, model, pool.card(entry))
    engine = engine_of(request)
    card: dict[str, Any] = {
        "id": model.id,
        "object": "model",
        "created": request.app.state.model_created,
        "owned_by": OWNED_BY,
        "root": model.path,
        "parent": model.parent,  # vLLM's: a LoRA adapter's base model, else null
        # Not an OpenAI field: tells clients the model is loading or being swapped.
        "state": engine.state,
    }
    if engine.ready_info is not None:
        # Not OpenAI fields: what the model is for ("chat", "speech", "transcription",
        # "embedding", "rerank"), so a UI can leave the non-chat ones out of its chat list,
        # and what it does ("chat", "speech", "transcribe", ...).
        card["task"] = model.kinds[0] if model.kinds else None
        card["capabilities"] = list(model.capabilities)
    if model.max_context:
        card["max_model_len"] = model.max_context
    # Not OpenAI fields: the other names that reach this model.
    if model.aliases:
        card["aliases"] = list(model.aliases)
    if model.alias_patterns:
        card["alias_patterns"] = list(model.alias_patterns)
    return card


def _pool_card(request: Request, model: ServedModel, info: dict[str, Any]) -> dict[str, Any]:
    """A models-file model: OpenAI's fields, then its state (unloaded, loading, ready,
    restarting, failed), kind, capabilities once loaded, aliases, pin and memory."""
    card: dict[str, Any] = {
        "id": model.id,
        "object": "model",
        "created": request.app.state.model_created,
        "owned_by": OWNED_BY,
        "root": model.path,
        **info,
    }
    if model.kinds:
        card["task"] = model.kinds[0]
    if model.capabilities:
        card["capabilities"] = list(model.capabilities)
    if model.max_context:
        card["max_model_len"] = model.max_context
    card["aliases"] = list(model.aliases)
    return card


async def list_models(request: Request) -> JSONResponse:
    cards = [model_card(request, m) for m in models_of(request)]
    return JSONResponse({"object": "list", "data": cards})


async def get_model(request: Request) -> JSONResponse:
    name = request.path_params["model_id"]
    models = models_of(request)
    try:
        model = lookup(models, name, None)
    except UnsupportedName:
        model = None
    if model is None:
        raise unknown_model(name, models)
    return JSONResponse(model_card(request, model))
