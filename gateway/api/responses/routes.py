"""`POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`: the OpenAI Responses API.

Responses are stored (unless `store: false`) in the app's bounded in-memory `ResponseStore`,
which `previous_response_id` and `GET` read. A request with remote MCP tools runs its rounds in
gateway/api/responses/mcp.py and mcp_run.py.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.responses.events import ResponseEvents
from gateway.api.responses.mcp_run import complete_with_mcp, stream_with_mcp
from gateway.api.responses.objects import ResponseMeta, output_items
from gateway.api.responses.requests import ResponsesRequest, parse_create
from gateway.api.responses.store import ResponseStore, StoredResponse
from gateway.generation import lifecycle
from gateway.generation.output import ChoiceOutput, assistant_turn
from gateway.http.errors import APIError
from gateway.http.json_request import read_json
from gateway.http.model_routing import check_model, engine_for, reported_name
from gateway.mcp_rounds.tools import check_servers
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import CHAT


def store_of(request: Request) -> ResponseStore:
    return request.app.state.responses


async def create_response(request: Request) -> Response:
    body = await read_json(request)
    store = store_of(request)
    parsed = parse_create(body, store, request.app.state.config.max_tokens)
    req = parsed.generation
    check_model(request, req.model)
    engine = await engine_for(request, req.model, CHAT)
    meta = ResponseMeta(reported_name(engine), parsed.echo)
    if parsed.mcp:
        return await _with_mcp(request, engine, parsed, meta)

    def on_done(response: dict[str, Any], output: ChoiceOutput) -> None:
        if parsed.store:
            conversation = parsed.conversation + [assistant_turn(output)]
            store.put(meta.id, StoredResponse(response, conversation))

    if req.stream:
        events = ResponseEvents(meta, parsed.logprobs, on_done)
        return await lifecycle.stream(request, engine, req, events)
    result = await lifecycle.complete(request, engine, req)
    response = _response(meta, parsed, result.choices[0])
    on_done(response, result.choices[0])
    return JSONResponse(response)


async def _with_mcp(
    request: Request, engine: EngineClient, parsed: ResponsesRequest, meta: ResponseMeta
) -> Response:
    servers = {server.label: server for server in request.app.state.config.mcp_servers}
    check_servers(parsed.mcp, servers)
    lifecycle.check_max_tokens(engine, parsed.generation)  # before a stream starts
    store = store_of(request)
    if parsed.generation.stream:
        return await stream_with_mcp(request, engine, parsed, meta, servers, store)
    return JSONResponse(await complete_with_mcp(request, engine, parsed, meta, servers, store))


def _response(meta: ResponseMeta, parsed: ResponsesRequest, output: ChoiceOutput) -> dict:
    items = output_items(output, parsed.logprobs)
    return meta.snapshot("completed", items, output.usage, output.finish)


def _not_found(response_id: str) -> APIError:
    return APIError(
        404,
        f"No response with id {response_id!r} (stored in memory, the most recent only)",
        param="response_id",
        code="not_found",
    )


async def get_response(request: Request) -> Response:
    response_id = request.path_params["response_id"]
    stored = store_of(request).get(response_id)
    if stored is None:
        raise _not_found(response_id)
    return JSONResponse(stored.response)


async def delete_response(request: Request) -> Response:
    response_id = request.path_params["response_id"]
    if not store_of(request).delete(response_id):
        raise _not_found(response_id)
    return JSONResponse({"id": response_id, "object": "response.deleted", "deleted": True})


ROUTES = [
    Route("/v1/responses", create_response, methods=["POST"]),
    Route("/v1/responses/{response_id}", get_response, methods=["GET"]),
    Route("/v1/responses/{response_id}", delete_response, methods=["DELETE"]),
]
