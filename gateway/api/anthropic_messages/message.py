"""Anthropic `Message` objects: content blocks, stop reason and usage from a choice's output.

Stop reasons: stop -> "end_turn", or "stop_sequence" (with the matched string in
`stop_sequence`) when one of `stop_sequences` ended it; length -> "max_tokens", tool_calls ->
"tool_use". Usage follows
Anthropic's split: `input_tokens` are the prompt tokens not read from the prefix cache,
`cache_read_input_tokens` the ones that were.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from gateway.generation.output import ChoiceOutput
from protocol.messages import FinishReason, Usage

_STOP_REASONS: dict[str, str] = {
    FinishReason.STOP: "end_turn",
    FinishReason.LENGTH: "max_tokens",
    FinishReason.TOOL_CALLS: "tool_use",
}


def message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def stop_reason(finish: str, stop_sequence: str = "") -> str:
    if finish == FinishReason.STOP and stop_sequence:
        return "stop_sequence"
    return _STOP_REASONS.get(finish, "end_turn")


def usage_body(usage: Usage | None) -> dict[str, int]:
    usage = usage or Usage(0, 0)
    return {
        "input_tokens": usage.prompt_tokens - usage.cached_tokens,
        "output_tokens": usage.completion_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_tokens,
    }


def tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's arguments as the object Anthropic's `input` is; text that is not a JSON
    object (only possible from an unconstrained model) is kept under `_raw_arguments`."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"_raw_arguments": arguments}


def thinking_block(text: str) -> dict[str, Any]:
    # Thinking is not signed here; clients send the block back as is and it is read as text.
    return {"type": "thinking", "thinking": text, "signature": ""}


def message_body(
    msg_id: str, model: str, output: ChoiceOutput, omit_thinking: bool
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if output.reasoning:
        content.append(thinking_block("" if omit_thinking else output.reasoning))
    if output.text or not output.calls:
        content.append({"type": "text", "text": output.text})
    for call in output.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": tool_input(call.arguments),
            }
        )
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(output.finish, output.stop_sequence),
        "stop_sequence": output.stop_sequence or None,
        "usage": usage_body(output.usage),
    }
