"""`GET /metrics` (behind the API key): Prometheus text format, vLLM's names where they apply
(gateway/metrics/). Answers 200 with the gateway's own metrics while no worker is ready."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from gateway.metrics import CONTENT_TYPE_LATEST


async def metrics(request: Request) -> Response:
    body = await request.app.state.metrics.scrape()
    return Response(body, media_type=CONTENT_TYPE_LATEST)
