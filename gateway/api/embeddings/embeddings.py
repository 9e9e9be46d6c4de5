"""`POST /v1/embeddings`: OpenAI's embeddings, served by the worker's embedding engine.

The body is parsed by gateway/api/embeddings/request.py (every field honoured, accepted or refused
by name); `model` must reach a served model that embeds (its id, its path, OpenAI's
`text-embedding-*` names, or a `--model-alias` when the main model embeds), else a 404 / 400
naming it (gateway/http/model_names.py). The limits the gateway knows from the worker's
Ready (`embedding`) are checked before anything is sent; the worker tokenizes, checks the rest
and answers one terminal delta with every vector. The client going away aborts the request
between two forward passes.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from gateway.api.embeddings.request import check_for_model, parse_embedding
from gateway.api.embeddings.response import embedding_body, json_response
from gateway.http import errors
from gateway.http.disconnect import DisconnectWatcher
from gateway.http.json_request import read_json
from gateway.http.model_names import resolve_model
from gateway.http.model_routing import engine_for
from gateway.workers.errors import EngineUnavailable
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import EMBEDDING
from protocol.inputs import EmbedInputs, ScoreInputs
from protocol.messages import Delta, Usage
from protocol.ready import EmbeddingInfo


async def embeddings(request: Request) -> Response:
    body = await read_json(request)
    req = parse_embedding(body)
    engine = await engine_for(request, req.model, EMBEDDING)
    ready = engine.ready_info
    if ready is None or engine.state != "ready":
        raise EngineUnavailable(f"the engine is {engine.state}: {engine.reason}", 1.0)
    model = resolve_model(request, req.model, EMBEDDING)
    info = _embedding_info(ready.embedding, model.id)
    check_for_model(req, info)
    terminal = await collect(request, engine, req.embed_inputs())
    if len(terminal.embeddings) != len(req.inputs):
        raise errors.no_terminal("embedding request")
    usage = terminal.usage or Usage(0, 0)
    return json_response(embedding_body(terminal.embeddings, req.encoding_format, model.id, usage))


def _embedding_info(info: EmbeddingInfo | None, name: str) -> EmbeddingInfo:
    if info is None:  # a model that answers to the name but not with embeddings
        raise errors.APIError(
            400, f"The model `{name}` does not make embeddings", param="model",
            code="model_not_supported",
        )  # fmt: skip
    return info


async def collect(
    request: Request, engine: EngineClient, inputs: EmbedInputs | ScoreInputs
) -> Delta:
    """The request's terminal delta (a 4xx / 5xx for an error, the param named when the
    worker's message names it first); the client going away aborts it."""
    watcher = DisconnectWatcher(request.receive)
    try:
        terminal = await watcher.run(_terminal(engine, inputs))
    finally:
        watcher.close()
    if terminal is None:
        raise errors.no_terminal("request")
    error = errors.terminal_error(terminal)
    if error is not None:
        if error.status == 400 and error.param is None:
            error.param = _named_field(error.message)
        raise error
    return terminal


def _named_field(message: str) -> str | None:
    """The field a worker's 400 names first (`input[3]`, `input`), as the error's param."""
    if message.startswith("`") and "`" in message[1:]:
        return message[1 : message.index("`", 1)]
    return None


async def _terminal(engine: EngineClient, inputs: EmbedInputs | ScoreInputs) -> Delta | None:
    async with engine.request(inputs, False) as batches:
        async for batch in batches:
            for delta in batch:
                if delta.finish_reason is not None:
                    return delta
    return None
