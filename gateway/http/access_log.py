"""The access log: one line per HTTP request as its response ends, with status, duration and id.

Replaces uvicorn's access log, which cannot say how long a stream ran nor which request id it
had. Pure ASGI middleware inside the request-id middleware, so each line carries the id (the
log filter stamps it). Polls of /health and /metrics are left out unless `log_polls`: a
monitor hitting them every second would bury the requests. A response that never started
(the app raised, or the client left first) is logged with status 500 or 499 (nginx's
"client closed request"). A request that passed the key check names the key by its id
(`key=1a2b3c4d`, gateway/http/auth.py).
"""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("gateway.access")

POLL_PATHS = frozenset({"/health", "/metrics"})
CLIENT_CLOSED = 499


class AccessLogMiddleware:
    def __init__(self, app: ASGIApp, log_polls: bool = False) -> None:
        self.app = app
        self.log_polls = log_polls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (not self.log_polls and scope["path"] in POLL_PATHS):
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status: int | None = None

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_watch)
        except BaseException as exc:
            status = status or (500 if isinstance(exc, Exception) else CLIENT_CLOSED)
            raise
        finally:
            _write(scope, status or CLIENT_CLOSED, time.monotonic() - started)


def _write(scope: Scope, status: int, seconds: float) -> None:
    client = scope.get("client")
    peer = f"{client[0]}:{client[1]}" if client else "-"
    # As the client sent it (percent-encoded): a decoded path could write a line break.
    target = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    if scope.get("query_string"):
        target += "?" + scope["query_string"].decode("latin-1")
    key = scope.get("state", {}).get("key_id")  # set by the key check: never the key itself
    log.info(
        '%s "%s %s HTTP/%s" %d %.3fs%s',
        peer,
        scope["method"],
        target,
        scope.get("http_version", "1.1"),
        status,
        seconds,
        f" key={key}" if key else "",
    )
