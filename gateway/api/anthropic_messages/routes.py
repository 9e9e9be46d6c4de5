"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: the Anthropic Messages API.

Errors on these paths are Anthropic-shaped (`gateway.http.errors` picks the shape by path).
`context_management` edits are applied to the body's messages first (they may need the worker's
token count of the prompt), and reported back as the API does: `context_management` in the
message (and in the stream's `message_delta`), `original_input_tokens` in a count.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.anthropic_messages.context_edits import Messages, apply_edits, parse_edits
from gateway.api.anthropic_messages.events import MessageEvents
from gateway.api.anthropic_messages.message import message_body, message_id
from gateway.api.anthropic_messages.requests import parse_count, read_create
from gateway.api.anthropic_messages.surface import CREATE
from gateway.generation import lifecycle
from gateway.http.errors import invalid
from gateway.http.json_request import read_json
from gateway.http.model_routing import check_model, engine_for, reported_name
from gateway.media.parts import MediaCollector
from gateway.workers.errors import WorkerRejected
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import CHAT


async def create_message(request: Request) -> Response:
    body = await read_json(request)
    CREATE.check(body)  # before a model is loaded for it (the parser needs the engine)
    engine = await engine_for(request, body.get("model"), CHAT)
    context = None
    if "context_management" in body:
        read_create(body, MediaCollector.for_engine(engine))  # all read before any counting
        check_model(request, body.get("model"))
        body, context = await _edited(engine, body)  # the same body, less content
    parsed = read_create(body, MediaCollector.for_engine(engine))
    req = parsed.generation
    check_model(request, req.model)
    msg_id = message_id()
    if req.stream:
        events = MessageEvents(msg_id, reported_name(engine), parsed.omit_thinking, context)
        return await lifecycle.stream(request, engine, req, events)
    result = await lifecycle.complete(request, engine, req)
    message = message_body(msg_id, reported_name(engine), result.choices[0], parsed.omit_thinking)
    if context is not None:
        message["context_management"] = context
    return JSONResponse(message)


async def count_tokens(request: Request) -> Response:
    body = await read_json(request)
    model, inputs = parse_count(body)
    check_model(request, model)
    engine = await engine_for(request, model, CHAT)
    if "context_management" not in body:
        return JSONResponse({"input_tokens": await _count(engine, inputs)})
    original = await _count(engine, inputs)
    edited, _ = await _edited(engine, body)
    count = await _count(engine, parse_count(edited)[1])
    return JSONResponse(
        {"input_tokens": count, "context_management": {"original_input_tokens": original}}
    )


async def _edited(engine: EngineClient, body: dict) -> tuple[dict, dict[str, Any] | None]:
    """The body with its context-management edits applied, and what to report of them."""
    if "context_management" not in body:
        return body, None
    edits = parse_edits(body["context_management"])

    async def count(messages: Messages) -> int:
        counted = {k: v for k, v in body.items() if k in _COUNTED} | {"messages": messages}
        return await _count(engine, parse_count(counted)[1])

    messages, applied = await apply_edits(body["messages"], edits, count)
    return {**body, "messages": messages}, {"applied_edits": applied}


# What shapes the prompt, and so its token count.
_COUNTED = ("model", "system", "tools", "tool_choice", "thinking", "chat_template_kwargs")


async def _count(engine: EngineClient, inputs: Any) -> int:
    try:
        return await engine.count_tokens(inputs)
    except WorkerRejected as exc:
        raise invalid(None, str(exc)) from None


ROUTES = [
    Route("/v1/messages", create_message, methods=["POST"]),
    Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
]
