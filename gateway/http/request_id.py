"""Request ids: the client's `x-request-id`, or one made here; echoed on every response.

Pure ASGI middleware, outermost but for Starlette's own error middleware, so every answer
carries the id in its `x-request-id` header: 401s, 404s, streams and 500s alike. The id is in
the request's scope (`request.state.request_id`) and, while the app runs, in `REQUEST_ID`, so
an error body made deep inside a stream can quote it. A client's id is kept only when it is a
short token; anything else is replaced, so a header cannot inject text into logs or bodies.
The engine names the request's worker requests after it, and `RequestIdLogFilter` stamps every
gateway log record made while it is served, so both processes' logs carry it.
"""

from __future__ import annotations

import logging
import re
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.request_context import REQUEST_ID

HEADER = b"x-request-id"
_CLIENT_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")


def new_request_id() -> str:
    return "req_" + uuid.uuid4().hex


def request_id_of(scope: Scope) -> str | None:
    found = scope.get("state", {}).get("request_id")
    return found if isinstance(found, str) else None


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == HEADER), b"")
        request_id = given.decode() if _CLIENT_ID.fullmatch(given) else new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        header = (HEADER, request_id.encode())

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        token = REQUEST_ID.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            REQUEST_ID.reset(token)


class RequestIdLogFilter(logging.Filter):
    """Stamps a log record made while a request is served with that request's id (unless the
    record says its own: `extra={"request_id": ...}`, "" for none)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            request_id = REQUEST_ID.get()
            if request_id is not None:
                record.request_id = request_id
        return True
