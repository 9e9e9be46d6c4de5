"""The Starlette application: routes, API-key middleware, error handlers, engine lifespan.

`create_app(config, engine)` takes the engine from outside so tests can pass a fake one; the
engine starts in the lifespan (the worker is spawned then; READY arrives later and /health
says so) and stops on shutdown, which also stops the worker.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

from gateway.api.admin import routes as admin
from gateway.api.anthropic_messages import routes as anthropic_messages
from gateway.api.chat_completions import routes as chat_completions
from gateway.api.embeddings import routes as embeddings
from gateway.api.images import routes as images
from gateway.api.realtime import routes as realtime
from gateway.api.realtime.wire import WS_MAX_SIZE
from gateway.api.responses import routes as responses
from gateway.api.responses.store import ResponseStore
from gateway.api.speech import routes as speech
from gateway.api.tokenize import routes as tokenize
from gateway.api.transcriptions import routes as transcriptions
from gateway.api.videos import routes as videos
from gateway.api.videos.jobs import VideoJobs
from gateway.config import ServerConfig
from gateway.http.access_log import AccessLogMiddleware
from gateway.http.auth import APIKeyMiddleware
from gateway.http.errors import EXCEPTION_HANDLERS
from gateway.http.request_id import RequestIdMiddleware
from gateway.metrics import Metrics
from gateway.openapi import routes as openapi
from gateway.openapi.docs_page import docs_assets
from gateway.playground.page import assets as playground_assets
from gateway.pool.leases import PoolLeases
from gateway.pool.pool import ModelPool
from gateway.workers.protocol import EngineClient

__all__ = ["ROUTES", "WS_MAX_SIZE", "create_app"]  # WS_MAX_SIZE: uvicorn's ws_max_size (serve)

# Every API's paths (gateway/api/*/routes.py) and the document's (/openapi.json, /docs).
ROUTES = [
    *admin.ROUTES,
    *openapi.ROUTES,
    *chat_completions.ROUTES,
    *anthropic_messages.ROUTES,
    *responses.ROUTES,
    *speech.ROUTES,
    *realtime.ROUTES,
    *transcriptions.ROUTES,
    *embeddings.ROUTES,
    *images.ROUTES,
    *videos.ROUTES,
    *tokenize.ROUTES,
]


def _cors(origins: tuple[str, ...]) -> list[Middleware]:
    """`--allowed-origins`: browsers on these origins may call the API (none: CORS is off).
    Outermost, so a preflight (which a browser sends without the key) is answered before the
    key check; keys travel in headers, never cookies, so credentials stay off."""
    if not origins:
        return []
    return [
        Middleware(
            CORSMiddleware,
            allow_origins=list(origins),
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["*"],  # the SDKs' own (x-stainless-*, anthropic-version, ...)
            expose_headers=["x-request-id", "retry-after"],
            max_age=600,
        )
    ]


def create_app(config: ServerConfig, engine: EngineClient | ModelPool) -> Starlette:
    """An ASGI app serving `engine` (a `WorkerEngineClient`, or any `EngineClient`), or the
    models of a models file (a `ModelPool`: a worker per model)."""
    pool = engine if isinstance(engine, ModelPool) else None

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await engine.start()
        try:
            yield
        finally:
            await app.state.videos.close()
            await engine.stop()

    app = Starlette(
        routes=[*ROUTES, playground_assets(), docs_assets()],
        middleware=[
            *_cors(config.allowed_origins),
            Middleware(RequestIdMiddleware),
            Middleware(AccessLogMiddleware, log_polls=config.log_polls),
            Middleware(APIKeyMiddleware, api_keys=config.api_keys, admin_key=config.admin_key),
            *([Middleware(PoolLeases, pool=pool)] if pool is not None else []),
        ],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
    app.state.config = config
    app.state.engine = engine
    app.state.pool = pool  # None: one worker serves every model
    app.state.metrics = Metrics(engine)  # GET /metrics; observes the engine's requests
    app.state.model_created = int(time.time())  # reset by each model swap
    app.state.responses = ResponseStore()  # previous_response_id and GET /v1/responses/{id}
    app.state.videos = VideoJobs()  # /v1/videos jobs and their clips
    return app
