"""`GET /v1/models` and `GET /v1/models/{id}`: the one served model, with the engine's state."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from gateway.http.errors import model_not_found
from gateway.routes.common import engine_of

OWNED_BY = "vllm-omni-mlx"


def model_card(request: Request) -> dict[str, Any]:
    engine = engine_of(request)
    card: dict[str, Any] = {
        "id": engine.model_name,
        "object": "model",
        "created": request.app.state.model_created,
        "owned_by": OWNED_BY,
        "root": engine.model_path,
        # Not an OpenAI field: tells clients the model is loading or being swapped.
        "state": engine.state,
    }
    ready = engine.ready_info
    if ready is not None:
        # Not an OpenAI field: what the model does ("chat", "image_in", "audio_in", ...).
        card["capabilities"] = [str(c) for c in ready.capabilities]
        if ready.text is not None and ready.text.max_context:
            card["max_model_len"] = ready.text.max_context
    return card


async def list_models(request: Request) -> JSONResponse:
    return JSONResponse({"object": "list", "data": [model_card(request)]})


async def get_model(request: Request) -> JSONResponse:
    model_id = request.path_params["model_id"]
    engine = engine_of(request)
    if model_id not in (engine.model_name, engine.model_path):
        raise model_not_found(model_id)
    return JSONResponse(model_card(request))
