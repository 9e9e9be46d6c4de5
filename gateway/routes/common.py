"""Helpers every route shares: the app's state, the JSON body under a size limit, model checks."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from gateway.engine.protocol import EngineClient
from gateway.engine.served_models import CHAT
from gateway.http.errors import APIError, invalid
from gateway.http.json_body import BodyError, parse_json
from gateway.routes.model_names import resolve_model


def engine_of(request: Request) -> EngineClient:
    """The engine serving this request: the one worker's, or (a models file) the engine of
    the model `engine_for` picked."""
    return getattr(request.state, "engine", None) or request.app.state.engine


async def engine_for(request: Request, name: Any, kind: str) -> EngineClient:
    """The engine of the model `name` names, for a request of `kind`. One worker: its engine
    (the model is checked by the route). A models file: that model's engine, loaded if it was
    not, leased until the response ends (gateway/pool/leases.py); 404 / 400 naming the model
    when no model answers to `name` or it does not serve `kind`."""
    pool = request.app.state.pool
    if pool is None:
        return engine_of(request)
    if not isinstance(name, str) or not name:
        raise invalid("model", "`model` is required")
    resolve_model(request, name, kind)
    entry = pool.find(name)
    if entry is None:  # an OpenAI default name of a kind: none in a models file
        raise invalid("model", f"`{name}` names no model of the models file")
    engine = await pool.acquire(entry)
    leases = getattr(request.state, "pool_leases", None)
    if leases is None:
        leases = request.state.pool_leases = []
    leases.append(entry)
    request.state.engine = engine
    return engine


def first_model_of(request: Request, kind: str) -> str | None:
    """A models file: the id of its first model of `kind`, else of its first model whose kind
    is not known before it is loaded (`kind: auto`); for routes without a `model`."""
    pool = request.app.state.pool
    if pool is None:
        return None
    models = pool.served_models()
    sure = next((m.id for m in models if kind in m.kinds), None)
    return sure or next((m.id for m in models if not m.kinds), None)


async def read_json(request: Request) -> dict[str, Any]:
    """The body as a JSON object: 413 past `max_body_bytes`, 400 when malformed (by the rules
    of gateway/http/json_body.py)."""
    limit = request.app.state.config.max_body_bytes
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise _too_large(limit)
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    try:
        body = parse_json(b"".join(chunks))
    except BodyError as exc:
        raise invalid(None, f"The request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise invalid(None, "The request body must be a JSON object")
    return body


def _too_large(limit: int) -> APIError:
    return APIError(413, f"The request body exceeds {limit} bytes", code="request_too_large")


def check_model(request: Request, model: str) -> None:
    """`model` must reach the chat model (its id, its path or a `--model-alias`): else a 404
    listing the served ids, or a 400 when it names a model that does not chat
    (gateway/routes/model_names.py)."""
    resolve_model(request, model, CHAT)
