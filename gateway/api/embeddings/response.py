"""The `/v1/embeddings` answer: OpenAI's list of embedding objects, floats or base64; and the
`/v1/rerank` and `/v1/score` answers (rerank_body, score_body).

The worker sends every vector as little-endian float32 bytes. `base64` is those bytes encoded
(what OpenAI sends, and what its SDKs decode with numpy's float32); `float` is the same
float32 values as JSON numbers (each printed as the double it equals, so a client that parses
them gets exactly the values base64 would have given). The body is encoded by msgspec: a
request of thousands of vectors is one fast pass, not a dict walk.
"""

from __future__ import annotations

import base64
import sys
import time
import uuid
from array import array
from typing import Any

import msgspec
from starlette.responses import Response

from protocol.messages import Usage

_ENCODER = msgspec.json.Encoder()


def floats(vector: bytes) -> list[float]:
    values = array("f")
    values.frombytes(vector)
    if sys.byteorder == "big":
        values.byteswap()
    return values.tolist()


def embedding_body(
    vectors: list[bytes], encoding_format: str, model: str, usage: Usage
) -> dict[str, Any]:
    encode = (
        (lambda v: base64.b64encode(v).decode("ascii")) if encoding_format == "base64" else floats
    )
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": index, "embedding": encode(vector)}
            for index, vector in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": usage.prompt_tokens, "total_tokens": usage.prompt_tokens},
    }


def rerank_body(
    scores: list[float],
    documents: list[str] | None,
    top_n: int | None,
    model: str,
    usage: Usage,
    method: str,
) -> dict[str, Any]:
    """Cohere / Jina's rerank answer: results by score, best first (ties keep document
    order), each with its index in `documents`; `scoring_method` says how they were scored."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])[:top_n]
    results = []
    for index in order:
        result: dict[str, Any] = {"index": index, "relevance_score": scores[index]}
        if documents is not None:
            result["document"] = {"text": documents[index]}
        results.append(result)
    return {
        "id": f"rerank-{uuid.uuid4().hex}",
        "model": model,
        "results": results,
        "usage": {"prompt_tokens": usage.prompt_tokens, "total_tokens": usage.prompt_tokens},
        "scoring_method": method,
    }


def score_body(scores: list[float], model: str, usage: Usage, method: str) -> dict[str, Any]:
    """vLLM's score answer: one score per pair, in pair order."""
    return {
        "id": f"score-{uuid.uuid4().hex}",
        "object": "list",
        "created": int(time.time()),
        "model": model,
        "data": [{"index": i, "object": "score", "score": s} for i, s in enumerate(scores)],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "total_tokens": usage.prompt_tokens,
            "completion_tokens": 0,
        },
        "scoring_method": method,
    }


def json_response(body: dict[str, Any]) -> Response:
    return Response(_ENCODER.encode(body), media_type="application/json")
