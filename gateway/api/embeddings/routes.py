"""The embeddings API's paths: `/v1/embeddings` (embeddings.py), `/v1/rerank` and `/v1/score`
(rerank.py)."""

from starlette.routing import Route

from gateway.api.embeddings import embeddings, rerank

ROUTES = [
    Route("/v1/embeddings", embeddings.embeddings, methods=["POST"]),
    # vLLM serves both without the /v1 prefix too; /v2/rerank is Cohere's v2 path.
    *(
        Route(path, rerank.rerank, methods=["POST"])
        for path in ("/v1/rerank", "/v2/rerank", "/rerank")
    ),
    *(Route(path, rerank.score, methods=["POST"]) for path in ("/v1/score", "/score")),
]
