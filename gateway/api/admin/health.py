"""`GET /health`: the engine's own verdict (200 only with a ready worker), open to all.

Without the API key (when the server has one) it says only the state (`ok`, `loading`,
`restarting`, `unresponsive`, `failed`, ...): the model, the worker's pid, its restarts and why
it last ended are for key holders, as they say what runs on the host and how it fails.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from gateway.http.auth import matching_key
from gateway.http.model_routing import engine_of


async def health(request: Request) -> JSONResponse:
    status, body = engine_of(request).health()
    if not may_see_details(request):
        body = {"status": body["status"]}
    return JSONResponse(body, status_code=status)


def may_see_details(request: Request) -> bool:
    """Whether the caller may read what the server runs: no `--api-key`, or the key sent."""
    keys = request.app.state.config.api_keys
    return (
        not keys or matching_key(request.scope["headers"], [k.encode() for k in keys]) is not None
    )
