"""Client events in, server events out, and the `error` event.

Client events are JSON text frames, each an object with a string `type`, at most
`MAX_EVENT_BYTES` (OpenAI's limit on an `input_audio_buffer.append`; the WebSocket's own
limit is set a little above it). Every server event gets an `event_id`. A bad client event is
answered with an `error` event naming it and the session goes on (as OpenAI's does); only a
frame that cannot be read at all (binary, not JSON) or a closed socket ends the session.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from gateway.http.errors import APIError
from gateway.http.json_body import BodyError, parse_json
from gateway.workers.errors import EngineUnavailable

MAX_EVENT_BYTES = 15 * 2**20
WS_MAX_SIZE = MAX_EVENT_BYTES + 2**20  # uvicorn's limit for one message (ws_max_size)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


class EventError(Exception):
    """A client event this server cannot take: answered with an `error` event."""

    def __init__(self, message: str, param: str | None = None, code: str = "invalid_value",
                 kind: str = "invalid_request_error") -> None:  # fmt: skip
        super().__init__(message)
        self.message, self.param, self.code, self.kind = message, param, code, kind


def as_event_error(exc: EventError | APIError | EngineUnavailable) -> EventError:
    """A request's own error (a parser's 4xx, a model's, no worker) as an `error` event's."""
    if isinstance(exc, EventError):
        return exc
    if isinstance(exc, EngineUnavailable):
        return EventError(exc.reason, None, "engine_unavailable", "server_error")
    kind = "server_error" if exc.status >= 500 else "invalid_request_error"
    return EventError(exc.message, exc.param, exc.code or "invalid_value", kind)


def error_event(error: EventError, client_event_id: str | None) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {
            "type": error.kind,
            "code": error.code,
            "message": error.message,
            "param": error.param,
            "event_id": client_event_id,
        },
    }


async def receive_event(websocket: WebSocket) -> dict[str, Any]:
    """The next client event; EventError for one that is not a JSON object with a `type`."""
    message = await websocket.receive()
    if message["type"] == "websocket.disconnect":
        raise WebSocketDisconnect(message.get("code", 1000))
    text = message.get("text")
    if text is None:
        raise EventError("send events as JSON text frames (binary frames are not taken)")
    if len(text) > MAX_EVENT_BYTES:
        raise EventError(f"an event may be at most {MAX_EVENT_BYTES} bytes", code="event_too_large")
    try:
        event = parse_json(text.encode())
    except BodyError as exc:
        raise EventError(
            f"an event must be a JSON object: {exc}", exc.param, "invalid_json"
        ) from None
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise EventError("an event must be a JSON object with a string `type`", "type")
    return event


class Outbox:
    """Server events, sent one at a time in the order they are made, from any task."""

    def __init__(self, websocket: WebSocket) -> None:
        self._websocket = websocket
        self._lock = asyncio.Lock()
        self.closed = False

    async def send(self, event: dict[str, Any]) -> None:
        event = {"event_id": new_id("event"), **event}
        async with self._lock:
            if self.closed:
                return
            try:
                await self._websocket.send_text(json.dumps(event))
            except (WebSocketDisconnect, RuntimeError, OSError):
                self.closed = True  # the client left: the session's reader ends it
