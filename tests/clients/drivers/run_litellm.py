"""LiteLLM's `openai/` (Chat Completions) and `anthropic/` (Messages) providers against the server:
a plain call, a streamed one, and a forced tool call whose result goes back for the answer; and
`litellm.embedding` (`openai/`) against the embedding model served next to the chat model."""

from __future__ import annotations

import json

import litellm
from driver_common import (
    API_KEY,
    EMBED_TEXTS,
    EMBEDDING_MODEL,
    MODEL,
    PROMPT,
    TOOL_RESULT,
    URL,
    WEATHER_PROMPT,
    WEATHER_TOOL,
    run,
)

litellm.telemetry = False
PROVIDERS = {
    "openai": {"model": f"openai/{MODEL}", "api_base": f"{URL}/v1"},
    "anthropic": {"model": f"anthropic/{MODEL}", "api_base": URL},
}


def call(provider: str, messages: list[dict], **kwargs):
    return litellm.completion(
        **PROVIDERS[provider],
        api_key=API_KEY,
        messages=messages,
        max_tokens=256,
        num_retries=0,
        timeout=60,
        **kwargs,
    )


def plain(provider: str) -> dict:
    reply = call(provider, [{"role": "user", "content": PROMPT}])
    choice = reply.choices[0]
    return {"text": choice.message.content, "finish_reason": choice.finish_reason}


def streamed(provider: str) -> dict:
    pieces, finish = [], None
    for chunk in call(provider, [{"role": "user", "content": PROMPT}], stream=True):
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
    return {"text": "".join(pieces), "chunks": len(pieces), "finish_reason": finish}


def tool(provider: str) -> dict:
    messages = [{"role": "user", "content": WEATHER_PROMPT}]
    forced = {"type": "function", "function": {"name": "get_weather"}}
    reply = call(provider, messages, tools=[WEATHER_TOOL], tool_choice=forced)
    message = reply.choices[0].message
    calls = message.tool_calls or []
    result = {
        "finish_reason": reply.choices[0].finish_reason,
        "tool_calls": [{"name": c.function.name, "arguments": c.function.arguments} for c in calls],
    }
    if calls:
        json.loads(calls[0].function.arguments)  # the arguments are JSON
        messages += [
            message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": calls[0].id, "content": TOOL_RESULT},
        ]
        answer = call(provider, messages, tools=[WEATHER_TOOL])
        result["answer"] = answer.choices[0].message.content
    return result


def embedding() -> dict:
    reply = litellm.embedding(
        model=f"openai/{EMBEDDING_MODEL}", api_base=f"{URL}/v1", api_key=API_KEY,
        input=EMBED_TEXTS, timeout=60,
    )  # fmt: skip
    return {
        "texts": EMBED_TEXTS,
        "vectors": [item["embedding"] for item in reply.data],
        "indices": [item["index"] for item in reply.data],
        "prompt_tokens": reply.usage.prompt_tokens,
    }


run(
    {
        **{
            f"{provider}-{case.__name__}": (lambda p=provider, c=case: c(p))
            for provider in PROVIDERS
            for case in (plain, streamed, tool)
        },
        "openai-embedding": embedding,
    }
)
