"""Admin routes (behind the API key): swap the served model, read the worker's stats."""

from __future__ import annotations

import asyncio
import time

from starlette.requests import Request
from starlette.responses import JSONResponse

from gateway.engine.errors import SwapFailed
from gateway.engine.model_resolver import ModelDownloadFailed, ModelNotFound, resolve_model
from gateway.http.errors import SERVER_ERROR, APIError, invalid
from gateway.openai import fields as f
from gateway.routes.common import engine_of, read_json
from gateway.schema import field as s
from gateway.schema.request import RequestSchema

LOAD = RequestSchema(
    {
        "model": s.string("A local checkpoint directory or a hub repo id.", minLength=1),
        "served_model_name": s.string("The id clients send (default: the directory name)."),
    },
    required=("model",),
)


async def load_model(request: Request) -> JSONResponse:
    """`POST /v1/admin/models/load {"model", "served_model_name"?}`: resolve, then swap."""
    body = await read_json(request)
    LOAD.check(body)
    model = f.string(body, "model")
    assert model is not None  # required by the table
    served_name = f.string(body, "served_model_name")
    try:
        # A hub download can take minutes; keep the event loop serving meanwhile.
        resolved = await asyncio.to_thread(resolve_model, model)
    except ModelNotFound as exc:
        raise invalid("model", str(exc), code="model_not_found") from None
    except ModelDownloadFailed as exc:
        raise APIError(
            502, str(exc), type=SERVER_ERROR, param="model", code="download_failed"
        ) from None
    engine = engine_of(request)
    try:
        result = await engine.swap(resolved.path, served_name or resolved.name)
    except SwapFailed as exc:
        raise APIError(
            502,
            f"Loading {model} failed: {exc.message}",
            type=SERVER_ERROR,
            param="model",
            code="model_load_failed",
        ) from None
    request.app.state.model_created = int(time.time())
    return JSONResponse(
        {"ok": True, "id": engine.model_name, "path": engine.model_path, "result": result}
    )


async def stats(request: Request) -> JSONResponse:
    """`GET /v1/admin/stats`: the worker's own counters."""
    return JSONResponse(await engine_of(request).worker_stats())
