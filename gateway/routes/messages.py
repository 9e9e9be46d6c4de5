"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: the Anthropic Messages API.

Errors on these paths are Anthropic-shaped (`gateway.http.errors` picks the shape by path).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.anthropic.events import MessageEvents
from gateway.anthropic.message import message_body, message_id
from gateway.anthropic.requests import parse_count, parse_create
from gateway.chat import generation
from gateway.engine.errors import WorkerRejected
from gateway.http.errors import invalid
from gateway.media.parts import MediaCollector
from gateway.routes.common import check_model, engine_of, read_json


async def create_message(request: Request) -> Response:
    body = await read_json(request)
    engine = engine_of(request)
    parsed = parse_create(body, MediaCollector.for_engine(engine))
    req = parsed.generation
    check_model(request, req.model)
    msg_id = message_id()
    if req.stream:
        events = MessageEvents(msg_id, engine.model_name, parsed.omit_thinking)
        return await generation.stream(request, engine, req, events)
    result = await generation.complete(request, engine, req)
    output = result.choices[0]
    return JSONResponse(message_body(msg_id, engine.model_name, output, parsed.omit_thinking))


async def count_tokens(request: Request) -> Response:
    body = await read_json(request)
    model, inputs = parse_count(body)
    check_model(request, model)
    try:
        count = await engine_of(request).count_tokens(inputs)
    except WorkerRejected as exc:
        raise invalid(None, str(exc)) from None
    return JSONResponse({"input_tokens": count})
