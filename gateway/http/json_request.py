"""A request's JSON body: read under `max_body_bytes` (a 413 past it), parsed by the strict
rules of gateway/http/json_body.py (a 400 naming what is wrong), and a JSON object."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from gateway.http.errors import APIError, invalid
from gateway.http.json_body import BodyError, parse_json


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
        raise invalid(exc.param, f"The request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise invalid(None, "The request body must be a JSON object")
    return body


def _too_large(limit: int) -> APIError:
    return APIError(413, f"The request body exceeds {limit} bytes", code="request_too_large")
