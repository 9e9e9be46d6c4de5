"""`POST /v1/completions`: OpenAI (legacy) text completions, streamed or not, with n choices."""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.chat import generation
from gateway.chat.output import ChoiceOutput
from gateway.engine.served_models import CHAT
from gateway.openai.chunks import CompletionChunks, usage_dict
from gateway.openai.logprobs import completion_logprobs
from gateway.openai.requests import parse_completion
from gateway.routes.common import check_model, engine_for, read_json


async def completions(request: Request) -> Response:
    body = await read_json(request)
    req = parse_completion(body, request.app.state.config.max_tokens)
    check_model(request, req.model)
    engine = await engine_for(request, req.model, CHAT)
    response_id = f"cmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    model = engine.model_name
    if req.stream:
        chunks = CompletionChunks(response_id, created, model, req.include_usage, req.n, req.echo)
        return await generation.stream(request, engine, req, chunks)
    result = await generation.complete(request, engine, req)
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
