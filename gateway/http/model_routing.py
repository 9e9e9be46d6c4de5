"""Which engine serves a request: the one worker's, or (a models file) the engine of the model
it names, loaded and leased until the response ends; and the chat model check."""

from __future__ import annotations

from typing import Any

from starlette.requests import HTTPConnection, Request

from gateway.http.errors import APIError, invalid
from gateway.http.model_names import ADD_ONE, WHAT, models_of, resolve_model
from gateway.request_context import ADAPTER
from gateway.workers.errors import EngineUnavailable
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import CHAT, ServedModel, serving


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


def default_model(request: Request, kind: str) -> str:
    """The request names no model: the served model of `kind` (a models file's first), else a
    400 saying how to serve one."""
    name = first_model_of(request, kind)
    if name is None:
        model = serving(models_of(request), kind)
        name = model.id if model is not None else None
    if name is None:
        raise APIError(
            400,
            f"This server serves no {kind} model; {ADD_ONE[kind]}",
            param="model",
            code="model_not_supported",
        )
    return name


def ready_section(engine: EngineClient, name: str, kind: str) -> Any:
    """The section of the engine's Ready for `kind` (`image`, `video`: Ready's field of that
    name): EngineUnavailable while the worker is not ready, a 400 when the model `name`
    reached does not do `kind`."""
    ready = engine.ready_info
    if ready is None or engine.state != "ready":
        raise EngineUnavailable(f"the engine is {engine.state}: {engine.reason}", 1.0)
    section = getattr(ready, kind)
    if section is None:
        raise APIError(
            400, f"The model `{name}` does not {WHAT[kind]}", param="model",
            code="model_not_supported",
        )  # fmt: skip
    return section


def check_model(request: HTTPConnection, model: str) -> ServedModel:
    """`model` must reach the chat model (its id, its path or a `--model-alias`) or a LoRA
    adapter loaded on it: else a 404 listing the served ids, or a 400 when it names a model
    that does not chat (gateway/http/model_names.py). An adapter becomes the request's
    (`ADAPTER`: its chat and completion Submits run under it)."""
    served = resolve_model(request, model, CHAT)
    ADAPTER.set(served.id if served.parent is not None else None)
    return served


def reported_name(engine: EngineClient) -> str:
    """The model a response names: the LoRA adapter its request runs under, else the chat
    model's id."""
    return ADAPTER.get() or engine.model_name
