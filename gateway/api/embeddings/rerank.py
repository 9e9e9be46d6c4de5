"""`POST /v1/rerank` (Cohere / Jina) and `POST /v1/score` (vLLM): relevance scores of pairs.

The bodies are parsed by gateway/api/embeddings/scoring.py; `model` must reach the served model
that scores (a reranker, or the embedding model when no reranker is served: its vectors'
cosine, the embedding fallback), else a 404 / 400 naming it. The worker tokenizes the pairs,
checks their lengths and answers one terminal delta with a score per document; ScoreInfo
(from the worker's Ready) says how it scored, and both answers say it in `scoring_method`.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from gateway.api.embeddings.embeddings import collect
from gateway.api.embeddings.response import json_response, rerank_body, score_body
from gateway.api.embeddings.scoring import check_for_model, parse_rerank, parse_score
from gateway.http import errors
from gateway.http.json_request import read_json
from gateway.http.model_names import resolve_model
from gateway.http.model_routing import engine_for, engine_of
from gateway.workers.errors import EngineUnavailable
from gateway.workers.served_models import RERANK
from protocol.inputs import ScoreInputs
from protocol.messages import Delta, Usage
from protocol.ready import ScoreInfo


async def rerank(request: Request) -> Response:
    req = parse_rerank(await read_json(request))
    model, info = await _scorer(request, req.model)
    check_for_model(len(req.documents), info)
    terminal = await _scores(request, req.score_inputs(), len(req.documents), {})
    documents = req.documents if req.return_documents else None
    usage = terminal.usage or Usage(0, 0)
    return json_response(
        rerank_body(terminal.scores, documents, req.top_n, model, usage, info.method)
    )


async def score(request: Request) -> Response:
    req = parse_score(await read_json(request))
    model, info = await _scorer(request, req.model)
    first, second = req.names
    check_for_model(len(req.second), info, second)
    renames = {"query": first, "queries": first, "documents": second}
    terminal = await _scores(request, req.score_inputs(), len(req.second), renames)
    usage = terminal.usage or Usage(0, 0)
    return json_response(score_body(terminal.scores, model, usage, info.method))


async def _scorer(request: Request, name: str) -> tuple[str, ScoreInfo]:
    engine = await engine_for(request, name, RERANK)
    ready = engine.ready_info
    if ready is None or engine.state != "ready":
        raise EngineUnavailable(f"the engine is {engine.state}: {engine.reason}", 1.0)
    model = resolve_model(request, name, RERANK)
    if ready.score is None:  # a model that answers to the name but does not score
        raise errors.APIError(
            400, f"The model `{model.id}` does not rerank or score", param="model",
            code="model_not_supported",
        )  # fmt: skip
    return model.id, ready.score


async def _scores(request: Request, inputs: ScoreInputs, n: int, renames: dict[str, str]) -> Delta:
    """The terminal delta with `n` scores; the worker's field names renamed to the request's
    (`documents[3]` is `text_2[3]` in a /v1/score body that sent `text_2`)."""
    try:
        terminal = await collect(request, engine_of(request), inputs)
    except errors.APIError as exc:
        if exc.param is not None:
            head, sep, rest = exc.param.partition("[")
            if head in renames:
                exc.param = renames[head] + sep + rest
                exc.message = exc.message.replace(f"`{head}", f"`{renames[head]}", 1)
        raise
    if len(terminal.scores) != n:
        raise errors.no_terminal("scoring request")
    return terminal
