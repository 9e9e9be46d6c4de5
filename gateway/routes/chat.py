"""`POST /v1/chat/completions`: OpenAI chat completions, streamed or not, with n choices."""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.chat import generation
from gateway.chat.output import ChoiceOutput
from gateway.engine.served_models import CHAT
from gateway.media.parts import MediaCollector
from gateway.openai.chunks import ChatChunks, usage_dict
from gateway.openai.logprobs import chat_logprobs
from gateway.openai.requests import parse_chat
from gateway.routes.common import check_model, engine_for, read_json


async def chat_completions(request: Request) -> Response:
    body = await read_json(request)
    engine = await engine_for(request, body.get("model"), CHAT)
    media = MediaCollector.for_engine(engine)
    req = parse_chat(body, request.app.state.config.max_tokens, media)
    check_model(request, req.model)
    response_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    model = engine.model_name
    if req.stream:
        chunks = ChatChunks(response_id, created, model, req.include_usage, req.n)
        return await generation.stream(request, engine, req, chunks)
    result = await generation.complete(request, engine, req)
    return JSONResponse(
        {
            "id": response_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [_choice(choice) for choice in result.choices],
            "usage": usage_dict(result.usage),
        }
    )


def _choice(output: ChoiceOutput) -> dict[str, Any]:
    # `refusal` is required by the API's schema; the served models never refuse by that channel.
    message: dict[str, Any] = {"role": "assistant", "content": output.text, "refusal": None}
    if output.reasoning:
        message["reasoning_content"] = output.reasoning
    if output.calls:
        message["content"] = output.text or None
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in output.tool_calls
        ]
    return {
        "index": output.index,
        "message": message,
        "logprobs": chat_logprobs(output.logprobs),
        "finish_reason": output.finish,
    }
