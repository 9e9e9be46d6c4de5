"""`POST /v1/completions`: OpenAI (legacy) text completions, streamed or not."""

from __future__ import annotations

import time
import uuid

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway import generation
from gateway.openai_requests import parse_completion
from gateway.routes.common import check_model, engine_of, read_json
from gateway.sse import CompletionChunks, usage_dict


async def completions(request: Request) -> Response:
    body = await read_json(request)
    req = parse_completion(body, request.app.state.config.max_tokens)
    check_model(request, req.model)
    engine = engine_of(request)
    response_id = f"cmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    model = engine.model_name
    if req.stream:
        chunks = CompletionChunks(response_id, created, model, req.include_usage)
        return await generation.stream(request, engine, req, chunks)
    result = await generation.complete(request, engine, req)
    return JSONResponse(
        {
            "id": response_id,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "text": result.text,
                    "logprobs": None,
                    "finish_reason": result.finish_reason,
                }
            ],
            "usage": usage_dict(result.usage),
        }
    )
