"""API-key check for every route but /health, the base URL (`/`, `/v1`), the playground's
static files (`/playground/...`) and the API docs page (`/docs`, `/docs/assets/...`), as pure
ASGI middleware. /openapi.json itself needs the key (the docs page asks for it).

The admin routes that change what the server runs (`/v1/admin/models/load|unload|pin`) take
the admin key (`--admin-key`), not the API key: a user of the API cannot swap the model, drain
the worker or probe the host's directories. A server with an API key and no admin key has
those routes closed (403, saying how to open them); one with neither key is open throughout
(a local server, as on 127.0.0.1 by default). The admin key also opens every other route.
`/v1/admin/stats` (counters only; the playground's status tab reads them) takes either key.

Pure ASGI (not BaseHTTPMiddleware) so streaming responses pass through untouched. Both
`Authorization: Bearer KEY` (openai SDK) and `x-api-key: KEY` (anthropic SDK) are accepted;
the comparison is constant-time. WebSockets too, and since a browser cannot set their headers,
also as the subprotocol `openai-insecure-api-key.KEY` (what the openai SDK sends from one); a
WebSocket without the key is refused at its handshake (HTTP 403).
"""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.http.errors import AUTHENTICATION, PERMISSION, APIError

# The base URL (clients probe it keyless), and the docs page (gateway/openapi/docs_page.py;
# "/docs/" redirects to it), which shows nothing of the server until it has fetched
# /openapi.json with the key.
OPEN_PATHS = frozenset({"/health", "/", "/v1", "/docs", "/docs/"})
# The playground's and the docs page's scripts and styles: the pages load them before they can
# ask for the key.
OPEN_PREFIXES = ("/playground/", "/docs/assets/")


def has_key(headers: list[tuple[bytes, bytes]], api_key: bytes) -> bool:
    """Whether the request carries `api_key` in either header (constant-time per key, and
    every presented key is checked, so the time taken does not say which header matched)."""
    matches = [hmac.compare_digest(key, api_key) for key in presented_keys(headers)]
    return any(matches)


SUBPROTOCOL_KEY = b"openai-insecure-api-key."


def presented_keys(headers: list[tuple[bytes, bytes]]) -> list[bytes]:
    """The keys a request carries, from either header (or a WebSocket's subprotocols)."""
    keys = []
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            if scheme.lower() == b"bearer":
                keys.append(token.strip())
        elif name == b"x-api-key":
            keys.append(value.strip())
        elif name == b"sec-websocket-protocol":
            for protocol in value.split(b","):
                protocol = protocol.strip()
                if protocol.startswith(SUBPROTOCOL_KEY):
                    keys.append(protocol[len(SUBPROTOCOL_KEY) :])
    return keys


# The routes that change what the server runs: the admin key's alone.
ADMIN_PREFIX = "/v1/admin/models/"


class APIKeyMiddleware:
    def __init__(self, app: ASGIApp, api_key: str | None, admin_key: str | None = None) -> None:
        self.app = app
        self.api_key = api_key.encode() if api_key else None
        self.admin_key = admin_key.encode() if admin_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and self.api_key is not None:
            if not self._authorized(scope):
                await receive()  # websocket.connect
                await send({"type": "websocket.close", "code": 1008})
                return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path.startswith(ADMIN_PREFIX):
            error = self._admin_error(scope)
        elif (
            self.api_key is None
            or path in OPEN_PATHS
            or path.startswith(OPEN_PREFIXES)
            or self._authorized(scope)
        ):
            error = None
        else:
            error = _missing_key("API key")
        if error is None:
            await self.app(scope, receive, send)
        else:
            await error.response(path)(scope, receive, send)

    def _admin_error(self, scope: Scope) -> APIError | None:
        if self.admin_key is not None:
            if has_key(scope["headers"], self.admin_key):
                return None
            return _missing_key("admin key (--admin-key)")
        if self.api_key is None:
            return None  # no keys at all: an open, local server
        return APIError(
            403,
            "The admin routes are closed on this server: start it with --admin-key KEY (or "
            "ADMIN_KEY=KEY make serve) and send that key; the API key does not open them",
            type=PERMISSION,
            code="admin_key_required",
        )

    def _authorized(self, scope: Scope) -> bool:
        assert self.api_key is not None
        return has_key(scope["headers"], self.api_key) or (
            self.admin_key is not None and has_key(scope["headers"], self.admin_key)
        )


def _missing_key(which: str) -> APIError:
    return APIError(
        401,
        f"Invalid or missing {which} (send `Authorization: Bearer KEY` or `x-api-key: KEY`)",
        type=AUTHENTICATION,
        code="invalid_api_key",
        headers={"WWW-Authenticate": "Bearer"},
    )
