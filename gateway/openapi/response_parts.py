"""The pieces every operation's response in /openapi.json is built from: media types, bodies,
a 2xx response (gateway/openapi/responses.py and admin_operations.py use them)."""

from __future__ import annotations

from typing import Any

from gateway.openapi.schemas import ref
from gateway.schema.builders import STRING, Schema, _all, _const, _doc, _enum

SSE = "text/event-stream"
JSON = "application/json"
DONE = "[DONE]"


def json_body(name: str) -> dict[str, Any]:
    return {JSON: {"schema": ref(name)}}


def text_body(doc: str) -> dict[str, Any]:
    return {"schema": _doc(STRING, doc)}


def binary_body(doc: str) -> dict[str, Any]:
    return {"schema": {"type": "string", "format": "binary", "description": doc}}


def sse_event(content: Schema, events: tuple[str, ...] | None = None, done: bool = False) -> Schema:
    """The schema of one server-sent event as parsed (`{"event", "data"}`), whose `data` is
    JSON matching `content`, or `[DONE]` when `done`. `events`: the event names; None: the
    stream names none (the parser reads "message")."""
    payload: Schema = {"type": "string", "contentMediaType": JSON, "contentSchema": content}
    data = {"type": "string", "if": {"const": DONE}, "else": payload} if done else payload
    name = _enum(*events) if events is not None else _const("message")
    return _all({"event": name, "data": data})


def sse_body(content: Schema, doc: str, events: tuple[str, ...] | None = None, done: bool = False):
    return {SSE: {"schema": _doc(sse_event(content, events, done), doc)}}


def ok(description: str, content: dict[str, Any], headers: dict[str, Any] | None = None):
    response: dict[str, Any] = {"description": description, "content": content}
    if headers:
        response["headers"] = headers
    return response


MODEL_404 = "The `model` named is not served here; the message lists the served models."
