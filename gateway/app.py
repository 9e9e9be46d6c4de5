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

from gateway.config import ServerConfig
from gateway.engine.protocol import EngineClient
from gateway.http.access_log import AccessLogMiddleware
from gateway.http.auth import APIKeyMiddleware
from gateway.http.errors import EXCEPTION_HANDLERS
from gateway.http.request_id import RequestIdMiddleware
from gateway.metrics import Metrics
from gateway.openapi.docs_page import docs_assets
from gateway.playground.page import assets as playground_assets
from gateway.pool.leases import PoolLeases
from gateway.pool.pool import ModelPool
from gateway.responses.store import ResponseStore
from gateway.routes import ROUTES


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
            await engine.stop()

    app = Starlette(
        routes=[*ROUTES, playground_assets(), docs_assets()],
        middleware=[
            Middleware(RequestIdMiddleware),
            Middleware(AccessLogMiddleware, log_polls=config.log_polls),
            Middleware(APIKeyMiddleware, api_key=config.api_key),
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
    return app
