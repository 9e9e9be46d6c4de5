"""API-key check for every route but /health, the base URL (`/`, `/v1`), the playground's
static files (`/playground/...`) and the API docs page (`/docs`, `/docs/assets/...`), as pure
ASGI middleware. /openapi.json itself needs the key (the docs page asks for it).

The admin routes that change what the server runs (`/v1/admin/models/load|unload|pin`, vLLM's
`/v1/load_lora_adapter` and `/v1/unload_lora_adapter`) take
the admin key (`--admin-key`), not the API key: a user of the API cannot swap the model, drain
the worker or probe the host's directories. A server with an API key and no admin key has
those routes closed (403, saying how to open them); one with neither key is open throughout
(a local server, as on 127.0.0.1 by default). The admin key also opens every other route.
`/v1/admin/stats` (counters only; the playground's status tab reads them) takes either key.

Several API keys (`--api-key` repeated, `--api-key-file`) each open the API; the one a request
used is named in its access-log line by its id (`key=` the first 8 hex digits of its SHA-256,
gateway/cli/listening.py), never by itself: the middleware puts the id in the request's
`state` for the access log.

Pure ASGI (not BaseHTTPMiddleware) so streaming responses pass through untouched. Both
`Authorization: Bearer KEY` (openai SDK) and `x-api-key: KEY` (anthropic SDK) are accepted;
the comparison is constant-time. WebSockets too, and since a browser cannot set their headers,
also as the subprotocol `openai-insecure-api-key.KEY` (what the openai SDK sends from one); a
WebSocket without the key is refused at its handshake (HTTP 403).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

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
    """Whether the request carries `api_key` in either header."""
    return matching_key(headers, (api_key,)) is not None


def matching_key(headers: list[tuple[bytes, bytes]], keys: Sequence[bytes]) -> bytes | None:
    """The key of `keys` the request carries, if any. Every presented key is compared with
    every key (constant-time each), so the time taken says neither which header nor which key
    matched."""
    found = None
    for presented in presented_keys(headers):
        for key in keys:
            if hmac.compare_digest(presented, key):
                found = key
    return found


def key_id(key: bytes) -> str:
    """A key as logs name it: the first 8 hex digits of its SHA-256."""
    return hashlib.sha256(key).hexdigest()[:8]


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
ADMIN_PATHS = frozenset({"/v1/load_lora_adapter", "/v1/unload_lora_adapter"})


class APIKeyMiddleware:
    def __init__(
        self, app: ASGIApp, api_keys: Sequence[str] = (), admin_key: str | None = None
    ) -> None:
        self.app = app
        self.api_keys = tuple(key.encode() for key in api_keys)
        self.admin_key = admin_key.encode() if admin_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and self.api_keys:
            if not self._authorized(scope):
                await receive()  # websocket.connect
                await send({"type": "websocket.close", "code": 1008})
                return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path.startswith(ADMIN_PREFIX) or path in ADMIN_PATHS:
            error = self._admin_error(scope)
        elif (
            not self.api_keys
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
        if not self.api_keys:
            return None  # no keys at all: an open, local server
        return APIError(
            403,
            "The admin routes are closed on this server: start it with --admin-key KEY (or "
            "ADMIN_KEY=KEY make serve) and send that key; the API key does not open them",
            type=PERMISSION,
            code="admin_key_required",
        )

    def _authorized(self, scope: Scope) -> bool:
        """Whether the request carries a key that opens the API; notes which one it was."""
        keys = self.api_keys + ((self.admin_key,) if self.admin_key is not None else ())
        key = matching_key(scope["headers"], keys)
        if key is None:
            return False
        scope.setdefault("state", {})["key_id"] = key_id(key)
        return True


def _missing_key(which: str) -> APIError:
    return APIError(
        401,
        f"Invalid or missing {which} (send `Authorization: Bearer KEY` or `x-api-key: KEY`)",
        type=AUTHENTICATION,
        code="invalid_api_key",
        headers={"WWW-Authenticate": "Bearer"},
    )
