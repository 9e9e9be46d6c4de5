"""One choice of a non-streamed chat completion: OpenAI's `choices[i]` object."""

from __future__ import annotations

from typing import Any

from gateway.generation.logprobs import chat_logprobs
from gateway.generation.output import ChoiceOutput


def choice_of(output: ChoiceOutput) -> dict[str, Any]:
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
