"""`GET /` and `GET /v1` (and `HEAD`): the base URL answers, so clients that probe it before
their first call (SDK health checks, agent frameworks, uptime monitors) find a server.

Open to all, like /health: the body says what this is and where the API is. The version and
the served model ids are given only to a request that could use them (no `--api-key`, or the
key presented): a version tells an attacker which known flaws to try.
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

from gateway.api.admin.health import may_see_details
from gateway.http.model_names import models_of
from gateway.http.model_routing import engine_of
from gateway.playground.page import page, prefers_html

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
        "status": engine.state,
        "api": {"openai": "/v1", "anthropic": "/v1/messages", "health": "/health"},
    }
    if may_see_details(request):
        body["version"] = _version()
        body["models"] = [m.id for m in models_of(request)]
    return JSONResponse(body, headers={"vary": "Accept"})
