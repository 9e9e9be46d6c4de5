"""The response schemas of `/v1/embeddings`, `/v1/rerank` and `/v1/score` (for /openapi.json)."""

from __future__ import annotations

from gateway.schema.builders import (
    COUNT,
    INTEGER,
    NUMBER,
    STRING,
    Schema,
    _all,
    _array,
    _const,
    _doc,
    _obj,
)

SCHEMAS: dict[str, Schema] = {
    # -- embeddings and scores
    "EmbeddingList": _all(
        {
            "object": _const("list"),
            "data": _array(
                _all(
                    {
                        "object": _const("embedding"),
                        "index": COUNT,
                        "embedding": {
                            "anyOf": [
                                _array(NUMBER, "`encoding_format` float."),
                                _doc(STRING, "`encoding_format` base64: little-endian float32."),
                            ]
                        },
                    }
                )
            ),
            "model": STRING,
            "usage": _all({"prompt_tokens": INTEGER, "total_tokens": INTEGER}),
        }
    ),
    "RerankResponse": _all(
        {
            "id": STRING,
            "model": STRING,
            "results": _array(
                _obj(
                    {
                        "index": _doc(COUNT, "The document's index in the request."),
                        "relevance_score": NUMBER,
                        "document": _doc(_all({"text": STRING}), "With `return_documents`."),
                    },
                    ["index", "relevance_score"],
                ),
                "Best first.",
            ),
            "usage": _all({"prompt_tokens": INTEGER, "total_tokens": INTEGER}),
            "scoring_method": _doc(STRING, "How the scores were made."),
        }
    ),
    "ScoreResponse": _all(
        {
            "id": STRING,
            "object": _const("list"),
            "created": INTEGER,
            "model": STRING,
            "data": _array(
                _all({"index": COUNT, "object": _const("score"), "score": NUMBER}),
                "One per pair, in pair order.",
            ),
            "usage": _all(
                {"prompt_tokens": INTEGER, "total_tokens": INTEGER, "completion_tokens": INTEGER}
            ),
            "scoring_method": STRING,
        }
    ),
}
