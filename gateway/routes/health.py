"""`GET /health`: the engine's own verdict (200 only with a ready worker), open to all."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from gateway.routes.common import engine_of


async def health(request: Request) -> JSONResponse:
    status, body = engine_of(request).health()
    return JSONResponse(body, status_code=status)
