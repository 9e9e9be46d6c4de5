"""Admin routes: swap the served model (one worker) or load, unload and pin a models file's
models (a pool), behind the admin key (gateway/http/auth.py); read the workers' stats."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from gateway.http.errors import SERVER_ERROR, APIError, invalid
from gateway.http.json_request import read_json
from gateway.http.model_names import unknown_model
from gateway.http.model_routing import engine_of
from gateway.schema import field as s
from gateway.schema import readers as f
from gateway.schema.request import RequestSchema
from gateway.workers.checkpoints import (
    ModelDownloadFailed,
    ModelNotFound,
    checkpoint_problem,
    locate_checkpoint,
)
from gateway.workers.errors import EngineUnavailable, SwapFailed

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
    pool = request.app.state.pool
    if pool is not None:
        return await _pool_load(request, pool, model, body)
    served_name = f.string(body, "served_model_name")
    root = request.app.state.config.model_root
    if root is not None and not under_root(model, root):
        raise _not_loadable(model)
    try:
        # A hub download can take minutes; keep the event loop serving meanwhile.
        resolved = await asyncio.to_thread(locate_checkpoint, model)
    except ModelNotFound:
        raise _not_loadable(model) from None
    except ModelDownloadFailed as exc:
        raise APIError(
            502, str(exc), type=SERVER_ERROR, param="model", code="download_failed"
        ) from None
    # Checked before the serving worker is drained: a directory that cannot load is a 400
    # at once, with the same words as a missing one (they would tell which paths exist).
    if checkpoint_problem(resolved.path) is not None or (
        root is not None and not under_root(resolved.path, root)
    ):
        raise _not_loadable(model)
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


def _not_loadable(model: str) -> APIError:
    return invalid(
        "model",
        f"`{model[:200]}` is not a model checkpoint this server can load (a directory with a "
        "config.json and *.safetensors weights, or a hub repo id)",
        code="model_not_found",
    )


def under_root(model: str, root: str) -> bool:
    """Whether `model`, as a path, lies inside `root` (symlinks resolved)."""
    path = os.path.realpath(os.path.expanduser(model))
    return os.path.commonpath([path, root]) == root


async def stats(request: Request) -> JSONResponse:
    """`GET /v1/admin/stats`: the worker's own counters (a models file: each loaded model's)."""
    pool = request.app.state.pool
    if pool is None:
        return JSONResponse(await engine_of(request).worker_stats())
    models: dict[str, Any] = {}
    for entry in pool.entries.values():
        models[entry.id] = pool.card(entry)
        if entry.engine is not None and entry.engine.state == "ready":
            try:
                models[entry.id]["worker"] = await entry.engine.worker_stats()
            except EngineUnavailable:
                pass  # it went away meanwhile: its state says so
    return JSONResponse({"models": models})


MODEL_ONLY = RequestSchema(
    {"model": s.string("A models-file model's id or alias.", minLength=1)}, required=("model",)
)
PIN = RequestSchema(
    {
        "model": s.string("A models-file model's id or alias.", minLength=1),
        "pinned": s.boolean("true (default): never evicted; false: evictable again."),
    },
    required=("model",),
)


async def _pool_load(request: Request, pool: Any, model: str, body: dict) -> JSONResponse:
    if body.get("served_model_name") is not None:
        raise invalid("served_model_name", "a models file names its models: send only `model`")
    entry = _entry(request, model)
    started = time.monotonic()
    await pool.load(entry)
    seconds = round(time.monotonic() - started, 3)
    card = {"seconds": seconds, **pool.card(entry)}
    return JSONResponse({"ok": True, "id": entry.id, "path": entry.config.model, "result": card})


async def unload_model(request: Request) -> JSONResponse:
    """`POST /v1/admin/models/unload {"model"}`: stop a models-file model's worker now (409
    while requests hold it)."""
    body = await read_json(request)
    MODEL_ONLY.check(body)
    entry = _entry(request, body["model"])
    if not await request.app.state.pool.unload(entry):
        raise APIError(
            409,
            f"The model `{entry.id}` is serving {entry.leases} requests; retry when they end",
            param="model",
            code="model_busy",
        )
    return JSONResponse({"ok": True, "id": entry.id, **request.app.state.pool.card(entry)})


async def pin_model(request: Request) -> JSONResponse:
    """`POST /v1/admin/models/pin {"model", "pinned"?}`: keep a models-file model loaded
    (never evicted), or let it go again; pinning does not load it."""
    body = await read_json(request)
    PIN.check(body)
    entry = _entry(request, body["model"])
    pinned = body.get("pinned")
    request.app.state.pool.pin(entry, True if pinned is None else pinned)
    return JSONResponse({"ok": True, "id": entry.id, **request.app.state.pool.card(entry)})


def _entry(request: Request, name: str) -> Any:
    pool = request.app.state.pool
    if pool is None:
        raise invalid("model", "only a server started with --models FILE has models to manage")
    entry = pool.find(name)
    if entry is None:
        raise unknown_model(name, pool.served_models())
    return entry
