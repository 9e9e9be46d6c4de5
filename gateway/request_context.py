"""The id of the HTTP request being served, as a context variable: set by the request-id
middleware (gateway/http/request_id.py), read by the log filter, by error bodies and by the
worker client, which stamps it on every Submit so the worker's log lines name it too; and the
request's time limit and the LoRA adapter its `model` names, which travel the same way."""

from __future__ import annotations

from contextvars import ContextVar

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
# A request's own `timeout` as a time.time() moment: set by its route for the request's task,
# stamped by the worker client on every Submit the request makes (its n choices, its spoken
# answer's text), which the worker ends as max_tokens would once it passes.
TIME_LIMIT: ContextVar[float | None] = ContextVar("time_limit", default=None)
# The LoRA adapter a chat or completion request's `model` names (None: the model itself): set
# by the route's model check (gateway/http/model_routing.py), stamped by the worker client on
# the request's chat and completion Submits.
ADAPTER: ContextVar[str | None] = ContextVar("adapter", default=None)
