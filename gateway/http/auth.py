"""API-key check for every route but /health, the base URL (`/`, `/v1`), the playground's
static files (`/playground/...`) and the API docs page (`/docs`, `/docs/assets/...`), as pure
ASGI middleware. /openapi.json itself needs the key (the docs page asks for it).

Pure ASGI (not BaseHTTPMiddleware) so streaming responses pass through untouched. Both
`Authorization: Bearer KEY` (openai SDK) and `x-api-key: KEY` (anthropic SDK) are accepted;
the comparison is constant-time. WebSockets too, and since a browser cannot set their headers,
also as the subprotocol `openai-insecure-api-key.KEY` (what the openai SDK sends from one); a
WebSocket without the key is refused at its handshake (HTTP 403).
"""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.http.errors import AUTHENTICATION, APIError

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


class APIKeyMiddleware:
    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self.api_key = api_key.encode() if api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and self.api_key is not None:
            if not self._authorized(scope):
                await receive()  # websocket.connect
                await send({"type": "websocket.close", "code": 1008})
                return
        if (
            self.api_key is None
            or scope["type"] != "http"
            or scope["path"] in OPEN_PATHS
            or scope["path"].startswith(OPEN_PREFIXES)
            or self._authorized(scope)
        ):
            await self.app(scope, receive, send)
            return
        error = APIError(
            401,
            "Invalid or missing API key (send `Authorization: Bearer KEY` or `x-api-key: KEY`)",
            type=AUTHENTICATION,
            code="invalid_api_key",
            headers={"WWW-Authenticate": "Bearer"},
        )
        await error.response(scope["path"])(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        assert self.api_key is not None
        return has_key(scope["headers"], self.api_key)
