"""`WS /v1/realtime?model=CHAT`: OpenAI's Realtime API (this package), GA events, or
the beta's with `OpenAI-Beta: realtime=v1`.

The key is checked at the handshake like every route's (a header, or the subprotocol
`openai-insecure-api-key.KEY` a browser sends). `model` names the chat model (default: the
served one, or a models file's first chat model); the speech-recognition and TTS models are
the served ones (a models file's first of each kind). At most `--max-realtime-sessions` are
open at once; one more is told so in an `error` event and closed (1013, try again later).
"""

from __future__ import annotations

import logging

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from gateway.api.realtime.names import names_for
from gateway.api.realtime.session import Session
from gateway.api.realtime.wire import EventError, as_event_error, error_event, receive_event
from gateway.http.errors import APIError
from gateway.http.model_routing import check_model, engine_for, first_model_of
from gateway.workers.errors import EngineUnavailable
from gateway.workers.served_models import CHAT

log = logging.getLogger("vllm_omni_mlx.realtime")


def _subprotocol(websocket: WebSocket) -> str | None:
    """Answer "realtime" when offered (the SDKs' browser handshake), else the first offered."""
    offered = websocket.scope.get("subprotocols") or []
    return "realtime" if "realtime" in offered else (offered[0] if offered else None)


async def realtime(websocket: WebSocket) -> None:
    await websocket.accept(subprotocol=_subprotocol(websocket))
    state = websocket.app.state
    limit = state.config.max_realtime_sessions
    open_now = getattr(state, "realtime_sessions", 0)
    if open_now >= limit:
        why = (
            "the realtime endpoint is off" if limit == 0 else f"{limit} realtime sessions are open"
        )
        await _refuse(websocket, EventError(f"{why}: try again later", None,
                                            "session_limit_reached", "server_error"), 1013)  # fmt: skip
        return
    state.realtime_sessions = open_now + 1
    try:
        await _serve(websocket)
    finally:
        state.realtime_sessions -= 1


async def _refuse(websocket: WebSocket, error: EventError, code: int) -> None:
    try:
        await websocket.send_json({"event_id": "event_refused", **error_event(error, None)})
        await websocket.close(code)
    except (WebSocketDisconnect, RuntimeError):
        pass


async def _serve(websocket: WebSocket) -> None:
    try:
        name = websocket.query_params.get("model") or first_model_of(websocket, CHAT)
        chat = await engine_for(websocket, name, CHAT)
        ready = chat.ready_info
        if ready is None or chat.state != "ready":
            raise EngineUnavailable(f"the engine is {chat.state}", 1.0)
        if ready.text is None:
            raise EventError("the realtime API needs a chat model", "model", "model_not_found")
        # A LoRA adapter's name: the session's responses run under it (check_model).
        model = check_model(websocket, name).id if name else chat.model_name
    except (APIError, EventError, EngineUnavailable) as exc:
        code = 1013 if isinstance(exc, EngineUnavailable) else 1008  # 1013: try again later
        await _refuse(websocket, as_event_error(exc), code)
        return
    session = Session(websocket, names_for(websocket.headers), model, chat)
    try:
        await session.open()
        while not session.outbox.closed:
            try:
                event = await receive_event(websocket)
            except EventError as exc:
                await session.send(error_event(exc, None))
                continue
            await session.handle(event)
    except WebSocketDisconnect:
        pass
    except EventError as exc:  # session.open: the VAD could not be loaded
        await session.send(error_event(exc, None))
    finally:
        await session.close()


ROUTES = [WebSocketRoute("/v1/realtime", realtime)]
