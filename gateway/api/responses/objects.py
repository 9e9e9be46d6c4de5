"""Responses API objects: output items, usage and the `Response` itself.

Output items: `reasoning` (its text as `reasoning_text` content; no summaries are generated),
`message` (one `output_text` part, with logprobs when asked), `function_call` (`call_id` is the
id the client answers with in `function_call_output`). A response that ended by
`max_output_tokens` has status "incomplete" with that reason.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from gateway.generation.logprobs import chat_content
from gateway.generation.output import ChoiceOutput
from protocol.messages import FinishReason, TokenLogprob, Usage


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def reasoning_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "reasoning_text", "text": text}] if status == "completed" else []
    return {"id": item_id, "type": "reasoning", "summary": [], "content": content, "status": status}


def output_text(text: str, logprobs: list[TokenLogprob] | None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
    part["logprobs"] = chat_content(logprobs) if logprobs is not None else []
    return part


def message_item(
    item_id: str, text: str, logprobs: list[TokenLogprob] | None, status: str = "completed"
) -> dict[str, Any]:
    content = [output_text(text, logprobs)] if status == "completed" else []
    return {
        "id": item_id,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def function_call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str = "completed"
) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def output_items(output: ChoiceOutput, logprobs: bool) -> list[dict[str, Any]]:
    items = []
    if output.reasoning:
        items.append(reasoning_item(new_id("rs"), output.reasoning))
    if output.text or not output.calls:
        items.append(
            message_item(new_id("msg"), output.text, output.logprobs if logprobs else None)
        )
    for call in output.tool_calls:
        items.append(function_call_item(new_id("fc"), call.id, call.name, call.arguments))
    return items


def usage_body(usage: Usage | None) -> dict[str, Any]:
    usage = usage or Usage(0, 0)
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


@dataclass(slots=True)
class ResponseMeta:
    """What every snapshot of one Response shares."""

    model: str
    echo: dict[str, Any]
    id: str = field(default_factory=lambda: new_id("resp"))
    created_at: int = field(default_factory=lambda: int(time.time()))

    def snapshot(
        self,
        status: str,
        output: list[dict[str, Any]],
        usage: Usage | None = None,
        finish: str | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        incomplete = finish == FinishReason.LENGTH
        if status == "completed" and incomplete:
            status = "incomplete"
        body = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "completed_at": int(time.time()) if status == "completed" else None,
            "status": status,
            "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "model": self.model,
            "output": output,
            **self.echo,
        }
        if usage is not None:  # ResponseUsage has no null: absent until it is known
            body["usage"] = usage_body(usage)
        return body
