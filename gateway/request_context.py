"""The id of the HTTP request being served, as a context variable: set by the request-id
middleware (gateway/http/request_id.py), read by the log filter, by error bodies and by the
worker client, which stamps it on every Submit so the worker's log lines name it too."""

from __future__ import annotations

from contextvars import ContextVar

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
