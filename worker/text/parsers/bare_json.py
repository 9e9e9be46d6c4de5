"""Tool calls written as bare JSON: a reply that opens with `{"name": ..., "arguments": {...}}`.

Some checkpoints of a tool-calling family never learned the family's markers: the
Qwen2.5-Coder GGUFs on PyPI (docs/models.md) have untrained `<tool_call>` rows and answer a
request with tools by the call object alone, or by the same object in one ```json fenced
block. For such a model the family's parser is wrapped: a reply that begins (after whitespace,
and an optional ```` ```json ```` / ```` ``` ```` fence) with a JSON object that names one of the
request's tools and has object arguments is that tool call, and so is each such object or
block that directly follows it; the closing fence is layout. Anything else (an object naming
no declared tool, prose first, a broken object) goes to the family's own parser unchanged, so
`<tool_call>` blocks are still read. Only requests with tools get a tool parser at all, and
none with `tool_choice: "none"` (worker/text/features.py). A reply that opens `{"name":` is
also held to one well-formed call by a lazy grammar (worker/text/constraints/bare_calls.py),
so under it there is no second call to read.

A call is emitted when its object is complete (its arguments as one piece): until then it
could still turn out to be an answer that merely starts with JSON, which is then content.
"""

from __future__ import annotations

import json
from typing import Any

from protocol.messages import ToolCallDelta
from worker.text.parsers.families import ToolFormat
from worker.text.parsers.tool_base import CallParser, ToolContext, ToolParser

JSON_FENCE = "```json"
_FENCES = (JSON_FENCE, "```")
_DECODER = json.JSONDecoder()


class BareJsonCalls:
    """The ToolParser interface: leading bare / fenced JSON calls, then the family's parser."""

    def __init__(self, context: ToolContext, inner: CallParser) -> None:
        if not isinstance(inner, ToolParser):
            raise TypeError("bare JSON calls wrap a family's ToolParser")
        self.context = context
        self.inner = inner
        self.emitter = inner.emitter  # calls of both kinds count as one response's
        self._buf = ""
        self._leading = True  # still where a bare call may stand
        self._fence = ""  # the header of the fence the current object stands in (if any)

    @property
    def called(self) -> bool:
        return self.inner.called

    def feed(self, text: str) -> tuple[str, list[ToolCallDelta]]:
        if not self._leading:
            return self.inner.feed(text)
        self._buf += text
        while self._leading and self._buf:
            if not self._step():
                break
        if self._leading:
            return "", self.emitter.take()
        rest, self._buf = self._buf, ""
        return self.inner.feed(rest)  # its pieces include the bare calls (one emitter)

    def finish(self) -> tuple[str, list[ToolCallDelta]]:
        if self._leading:
            self._leading = False
            rest, self._buf = self._buf, ""
            if self.called:
                rest = _without_closing_fence(rest)
            content, calls = self.inner.feed(rest)
            more, more_calls = self.inner.finish()
            return content + more, [*calls, *more_calls]  # the bare calls are in `calls`
        return self.inner.finish()

    def _step(self) -> bool:
        """One move over the buffer; False when it needs more text (or gave up leading)."""
        stripped = self._buf.lstrip()
        if not stripped or "```".startswith(stripped):
            return False
        if stripped.startswith("```"):
            if self._fence:  # the block's closing fence
                self._buf, self._fence = stripped[3:], ""
                return True
            header_end = stripped.find("\n")
            if header_end == -1:
                if any(f.startswith(stripped) or stripped.startswith(f) for f in _FENCES):
                    return False
                return self._give_up()
            if stripped[:header_end].strip() not in _FENCES:
                return self._give_up()
            self._fence = stripped[: header_end + 1]
            self._buf = stripped[header_end + 1 :]
            return True
        if not stripped.startswith("{"):
            return self._give_up()
        try:
            value, end = _DECODER.raw_decode(stripped)
        except ValueError:
            if _may_still_close(stripped):
                return False
            return self._give_up()
        call = self._call_of(value)
        if call is None:
            return self._give_up()
        name, arguments = call
        self.emitter.begin(name)
        self.emitter.args(json.dumps(arguments, ensure_ascii=False))
        self.emitter.end()
        self._buf = stripped[end:]
        return True

    def _call_of(self, value: Any) -> tuple[str, dict[str, Any]] | None:
        if not isinstance(value, dict) or set(value) != {"name", "arguments"}:
            return None
        name, arguments = value["name"], value["arguments"]
        if name not in self.context.functions or not isinstance(arguments, dict):
            return None
        return name, arguments

    def _give_up(self) -> bool:
        """Not (or no more) a bare call: the rest is the family parser's, as written."""
        self._leading = False
        if self._fence and not self.called:  # the fence opened an answer, not a call
            self._buf = self._fence + self._buf
        return False


def _may_still_close(text: str) -> bool:
    """Whether `text` (which starts with `{`) may still become one JSON value: its braces
    are not yet balanced outside strings."""
    depth, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return False
    return True


def _without_closing_fence(text: str) -> str:
    stripped = text.lstrip()
    return stripped[3:] if stripped.startswith("```") else text


def wrapping(family: ToolFormat) -> ToolFormat:
    """`family` with leading bare JSON calls read too; same name, same grammar for forced calls."""

    def make_parser(context: ToolContext) -> CallParser:
        return BareJsonCalls(context, family.make_parser(context))

    return ToolFormat(family.name, make_parser, family.grammar, bare_calls=True)
