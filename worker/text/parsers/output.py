"""One response's output parser: reasoning first, then tool calls in what is left.

Reasoning text never reaches the tool-call parser (a `<tool_call>` written while thinking is
thinking), and neither markers nor call text ever reach the content.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from protocol.messages import FinishReason
from worker.text.parsers.base import ParsedDelta
from worker.text.parsers.reasoning import ReasoningParser
from worker.text.parsers.tool_base import CallParser


class ResponseParser(Protocol):
    """What the engine asks of a response's parser (OutputParser, harmony.HarmonyParser)."""

    @property
    def in_reasoning(self) -> bool:
        """True while the response is inside its reasoning (for reasoning_tokens)."""
        ...

    def feed(self, text: str) -> ParsedDelta: ...

    def finish(self, finish_reason: str) -> tuple[ParsedDelta, str]: ...


class OutputParser:
    """Splits generated text into content / reasoning / tool calls. Without parts: all content."""

    def __init__(
        self,
        reasoning: ReasoningParser | None = None,
        tools: CallParser | None = None,
        cut_short: Callable[[], bool] | None = None,
    ) -> None:
        self._reasoning = reasoning
        self._tools = tools
        # True when constrained decoding closed the answer early to fit max_tokens.
        self._cut_short = cut_short

    @property
    def in_reasoning(self) -> bool:
        """True while the response is inside its reasoning block (for reasoning_tokens)."""
        return self._reasoning is not None and self._reasoning.in_reasoning

    def feed(self, text: str) -> ParsedDelta:
        if self._reasoning is None:
            content, reasoning = text, ""
        else:
            content, reasoning = self._reasoning.feed(text)
        return self._split_calls(content, reasoning, final=False)

    def finish(self, finish_reason: str) -> tuple[ParsedDelta, str]:
        """Flushes held-back text; returns it and the finish reason.

        "stop" becomes "tool_calls" after calls, or "length" when the answer was closed early.
        """
        content, reasoning = ("", "") if self._reasoning is None else self._reasoning.finish()
        delta = self._split_calls(content, reasoning, final=True)
        if finish_reason == FinishReason.STOP:
            if self._cut_short is not None and self._cut_short():
                finish_reason = FinishReason.LENGTH
            elif self._tools is not None and self._tools.called:
                finish_reason = FinishReason.TOOL_CALLS
        return delta, finish_reason

    def _split_calls(self, content: str, reasoning: str, final: bool) -> ParsedDelta:
        if self._tools is None:
            return ParsedDelta(content=content, reasoning=reasoning)
        content, calls = self._tools.feed(content) if content else ("", [])
        if final:
            more, more_calls = self._tools.finish()
            content += more
            calls += more_calls
        return ParsedDelta(content=content, reasoning=reasoning, tool_calls=calls)
