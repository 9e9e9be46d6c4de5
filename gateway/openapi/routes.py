"""`GET /openapi.json` and `GET /docs`: this server's OpenAPI document and the page showing it."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.openapi.docs_page import docs_page

__all__ = ["ROUTES", "docs_page", "openapi_json"]


async def openapi_json(request: Request) -> JSONResponse:
    # Imported here: the document reads every API's tables and schemas.
    from gateway.openapi.document import cached_document

    return JSONResponse(cached_document(bool(request.app.state.config.api_keys)))


ROUTES = [
    Route("/openapi.json", openapi_json, methods=["GET"]),
    Route("/docs", docs_page, methods=["GET", "HEAD"]),
]
