"""What one generated choice adds up to: text, reasoning, tool calls, logprobs, finish, usage.

Every API renders from this: the non-streamed responses directly, the streamed ones for their
closing events (Anthropic's stop reason, the Responses API's `response.completed` and its
stored conversation). Tool calls arrive as `ToolCallDelta` pieces (id and name on a call's
first piece, then argument text); a call the worker gave no id gets one here, so every API
can hand the client an id to answer with.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from protocol.messages import Delta, FinishReason, TokenLogprob, ToolCallDelta, Usage


def new_call_id(prefix: str = "call_") -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str = ""


def is_first_piece(piece: ToolCallDelta) -> bool:
    """A call's first piece names it; later pieces carry only argument text."""
    return piece.name is not None or piece.id is not None


def finish_reason_of(reason: str, has_tool_calls: bool) -> str:
    """A stop with tool calls in it is a tool-call stop, whoever reported it."""
    if reason == FinishReason.STOP and has_tool_calls:
        return FinishReason.TOOL_CALLS
    return reason


@dataclass(slots=True)
class ChoiceOutput:
    index: int = 0
    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    calls: dict[int, ToolCall] = field(default_factory=dict)
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    stop_sequence: str = ""  # the stop string that ended it, when one did

    def add(self, delta: Delta) -> None:
        if delta.text:
            self.text_parts.append(delta.text)
        if delta.reasoning:
            self.reasoning_parts.append(delta.reasoning)
        for piece in delta.tool_calls:
            self.add_piece(piece)
        if delta.logprobs is not None:
            self.logprobs = (self.logprobs or []) + list(delta.logprobs)
        if delta.finish_reason is not None:
            self.finish_reason = delta.finish_reason
            self.usage = delta.usage
            self.stop_sequence = delta.stop_sequence

    def add_piece(self, piece: ToolCallDelta) -> ToolCall:
        call = self.calls.get(piece.index)
        if call is None:
            call = self.calls[piece.index] = ToolCall(piece.id or new_call_id(), piece.name or "")
        elif piece.name and not call.name:
            call.name = piece.name
        call.arguments += piece.arguments
        return call

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_parts)

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [self.calls[i] for i in sorted(self.calls)]

    @property
    def finish(self) -> str:
        """The finish reason to report (stop / length / tool_calls)."""
        return finish_reason_of(self.finish_reason or FinishReason.STOP, bool(self.calls))


def total_usage(usages: list[Usage | None]) -> Usage:
    """Usage of n choices of one prompt: the prompt counted once, completions summed."""
    present = [u for u in usages if u is not None]
    if not present:
        return Usage(0, 0)
    first = present[0]
    return Usage(
        prompt_tokens=first.prompt_tokens,
        completion_tokens=sum(u.completion_tokens for u in present),
        cached_tokens=first.cached_tokens,
        reasoning_tokens=sum(u.reasoning_tokens for u in present),
    )


def assistant_turn(output: ChoiceOutput) -> dict[str, Any]:
    """The conversation message of a generated turn (what the next request continues from)."""
    message: dict[str, Any] = {"role": "assistant", "content": output.text}
    if output.reasoning:
        message["reasoning_content"] = output.reasoning
    if output.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in output.tool_calls
        ]
    return message
