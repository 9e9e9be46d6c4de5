"""The id of the HTTP request being served, as a context variable: set by the request-id
middleware (gateway/http/request_id.py), read by the log filter, by error bodies and by the
worker client, which stamps it on every Submit so the worker's log lines name it too; and the
request's time limit, which travels the same way."""

from __future__ import annotations

from contextvars import ContextVar

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
# A request's own `timeout` as a time.time() moment: set by its route for the request's task,
# stamped by the worker client on every Submit the request makes (its n choices, its spoken
# answer's text), which the worker ends as max_tokens would once it passes.
TIME_LIMIT: ContextVar[float | None] = ContextVar("time_limit", default=None)
