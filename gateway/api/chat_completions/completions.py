"""`POST /v1/completions`: OpenAI (legacy) text completions, streamed or not, with n choices."""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.api.chat_completions.chunks import CompletionChunks, usage_dict
from gateway.api.chat_completions.requests import parse_completion
from gateway.generation import lifecycle
from gateway.generation.logprobs import completion_logprobs
from gateway.generation.output import ChoiceOutput
from gateway.http.json_request import read_json
from gateway.http.model_routing import check_model, engine_for, reported_name
from gateway.request_context import TIME_LIMIT
from gateway.workers.served_models import CHAT


async def completions(request: Request) -> Response:
    body = await read_json(request)
    req = parse_completion(body, request.app.state.config.max_tokens)
    check_model(request, req.model)
    TIME_LIMIT.set(req.time_limit)  # this request's task: every Submit it makes carries it
    engine = await engine_for(request, req.model, CHAT)
    response_id = f"cmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    model = reported_name(engine)
    if req.stream:
        chunks = CompletionChunks(response_id, created, model, req.include_usage, req.n, req.echo)
        return await lifecycle.stream(request, engine, req, chunks)
    result = await lifecycle.complete(request, engine, req)
    return JSONResponse(
        {
            "id": response_id,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [_choice(choice, req.echo or "") for choice in result.choices],
            "usage": usage_dict(result.usage),
        }
    )


def _choice(output: ChoiceOutput, echo: str) -> dict[str, Any]:
    logprobs = None
    if output.logprobs is not None:
        logprobs, _ = completion_logprobs(output.logprobs, len(echo))
    return {
        "index": output.index,
        "text": echo + output.text,
        "logprobs": logprobs,
        "finish_reason": output.finish,
    }
