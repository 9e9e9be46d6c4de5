"""`POST /tokenize` and `POST /detokenize`: vLLM's tokenizer endpoints (not under /v1, as in
vLLM), answered by the worker's tokenizer without generating anything.

Bodies are parsed by gateway/api/tokenize/requests.py. `model`, when given, must reach the chat
model (gateway/http/model_names.py); only a text model has a tokenizer here, so a server
whose model does not chat answers a 400 naming `model`. `/tokenize` answers vLLM's
`{count, max_model_len, tokens, token_strs}`: the ids a completion of the same prompt, or a chat
request of the same messages, would be served with (`count` is its `usage.prompt_tokens`), and
`max_model_len` the model's context length (null when its config does not say);
`/detokenize` answers `{prompt}`. Errors are OpenAI-shaped.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.api.tokenize.requests import parse_detokenize, parse_tokenize
from gateway.http.errors import invalid
from gateway.http.json_request import read_json
from gateway.http.model_routing import check_model, engine_for, engine_of, first_model_of
from gateway.workers.errors import WorkerRejected
from gateway.workers.protocol import EngineClient
from gateway.workers.served_models import CHAT


async def tokenize(request: Request) -> Response:
    req = parse_tokenize(await read_json(request))
    engine = await _engine(request, req.model)
    try:
        tokens, strings = await engine.tokenize(req.args)
    except WorkerRejected as exc:  # e.g. messages the chat template rejects
        raise invalid(None, str(exc)) from None
    ready = engine.ready_info
    text = ready.text if ready is not None else None
    return JSONResponse(
        {
            "count": len(tokens),
            "max_model_len": text.max_context if text is not None else None,
            "tokens": tokens,
            "token_strs": strings,
        }
    )


async def detokenize(request: Request) -> Response:
    req = parse_detokenize(await read_json(request))
    engine = await _engine(request, req.model)
    try:
        text = await engine.detokenize(req.tokens)
    except WorkerRejected as exc:  # an id outside the vocabulary
        raise invalid("tokens", str(exc)) from None
    return JSONResponse({"prompt": text})


async def _engine(request: Request, model: str | None) -> EngineClient:
    """The named model's engine (default: the main one, a models file's first chat model),
    which must be a chat model: 404 / 400 otherwise."""
    if model is None and request.app.state.pool is None:
        model = engine_of(request).model_name
    elif model is None:
        model = first_model_of(request, CHAT)
        if model is None:
            raise invalid("model", "`model` is required: the models file has no chat model")
    check_model(request, model)
    return await engine_for(request, model, CHAT)


# vLLM's tokenizer endpoints, at vLLM's paths (it has no /v1 ones).
ROUTES = [
    Route("/tokenize", tokenize, methods=["POST"]),
    Route("/detokenize", detokenize, methods=["POST"]),
]
