"""`GET /` and `GET /v1` (and `HEAD`): the base URL answers, so clients that probe it before
their first call (SDK health checks, agent frameworks, uptime monitors) find a server.

Open to all, like /health: the body says what this is and where the API is. The served model
ids are listed only to a request that could use them (no `--api-key`, or the key presented).
`/health` stays the readiness check (200 only with a ready worker); this answers 200 while the
gateway is up, whatever the worker's state, which `status` reports. A browser (an Accept header
that prefers HTML) gets the web playground at `/` instead (gateway/playground/).
"""

from __future__ import annotations

from functools import cache
from importlib import metadata
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.http.auth import has_key
from gateway.playground.page import page, prefers_html
from gateway.routes.common import engine_of
from gateway.routes.model_names import models_of

NAME = "vllm-omni-mlx"


@cache
def _version() -> str | None:
    try:
        return metadata.version(NAME)
    except metadata.PackageNotFoundError:
        return None


async def root(request: Request) -> Response:
    if request.scope["path"] == "/" and prefers_html(request.headers.get("accept")):
        return page()
    if request.method == "HEAD":
        return Response(status_code=200, media_type="application/json")
    engine = engine_of(request)
    body: dict[str, Any] = {
        "object": "server",
        "name": NAME,
        "version": _version(),
        "status": engine.state,
        "api": {"openai": "/v1", "anthropic": "/v1/messages", "health": "/health"},
    }
    api_key = request.app.state.config.api_key
    if api_key is None or has_key(request.scope["headers"], api_key.encode()):
        body["models"] = [m.id for m in models_of(request)]
    return JSONResponse(body, headers={"vary": "Accept"})
