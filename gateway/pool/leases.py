"""Leases end with their response: the middleware that gives back a request's pool leases.

A route takes a lease on the model it uses (`gateway.http.model_routing.engine_for`), so the pool
never unloads a model between its load and the end of the request. The lease must last until
the response has been sent, streams included, and end even when the client leaves (the task
is cancelled) or the route raised: so it is ended here, around the whole ASGI call.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.pool.pool import ModelPool


class PoolLeases:
    def __init__(self, app: ASGIApp, pool: ModelPool) -> None:
        self.app = app
        self.pool = pool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            for entry in scope.get("state", {}).pop("pool_leases", ()):
                self.pool.release(entry)
