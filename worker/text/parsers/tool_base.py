"""The streaming tool-call parser every family plugs into: content outside calls, bodies inside.

`ToolParser.feed(text)` passes text through as content until a family's start marker (e.g.
`<tool_call>`), holding back only a tail that may be the start of one; from the marker on, the
text goes to a `CallBody` that the family defines, which reports the call through a
`ToolCallEmitter` and says where its text ends. Text after the body is content again (or the
next call). A body that finds no call in what followed the marker gives its text back, and the
parser emits it as content unchanged (the model wrote it; it is not a call). A body still
open when generation ends is never content (see `ToolParser.finish`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from protocol.messages import ToolCallDelta
from worker.text.parsers.base import ToolCallEmitter, find_first, split_safe


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a parser needs to know about the request: its tools and the parallel-calls policy."""

    tools: Sequence[Mapping[str, Any]] = ()  # OpenAI tool objects ({"type", "function": {...}})
    parallel: bool = True
    functions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # name -> parameters

    @classmethod
    def of(cls, tools: Sequence[Mapping[str, Any]] | None, parallel: bool = True) -> ToolContext:
        functions: dict[str, Mapping[str, Any]] = {}
        for tool in tools or ():
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                functions[function["name"]] = function.get("parameters") or {}
        return cls(tuple(tools or ()), parallel, functions)


class CallBody:
    """The text after a start marker. Subclasses implement `_step`; the base buffers and fails.

    `feed` returns the text left over after the body ended (possibly ""), or None while the
    body goes on. `finish` is the end of generation inside the body. A body that fails (text
    that is not a call) swallows its text up to `end_marker` (or everything, without one), and
    when no call began, that raw text is handed back (`fallback`) to be emitted as content.
    """

    end_marker: str | None = None

    def __init__(self, emitter: ToolCallEmitter, context: ToolContext, marker: str) -> None:
        self.emitter = emitter
        self.context = context
        self.buf = ""
        self.raw = marker
        self.begun = False  # set by subclasses when a call began
        self.failed = False

    def feed(self, text: str) -> str | None:
        self.buf += text
        self.raw += text
        while not self.failed:
            step = self._step()
            if self.failed:
                break
            if step is None:
                return None
            if step == "end":
                return self._leave(self.buf)
        if self.end_marker is None:
            return self._leave("")
        index = self.buf.find(self.end_marker)
        if index == -1:
            return None
        return self._leave(self.buf[index + len(self.end_marker) :])

    def finish(self) -> None:
        """Generation ended inside the body; subclasses close what they can."""

    def fallback(self) -> str:
        """Raw text to emit as content when the body turned out not to be a call."""
        return "" if self.begun else self.raw

    def _leave(self, rest: str) -> str:
        if rest:
            self.raw = self.raw[: len(self.raw) - len(rest)]
        self.buf = ""
        return rest

    def _step(self) -> bool | str | None:
        """One move: True (progress, go on), None (needs more text), "end" (body over).

        Sets `failed` (and returns anything) on text that cannot be a call.
        """
        raise NotImplementedError

    def _take_prefix(self, prefix: str) -> bool | None:
        """Strips leading whitespace, then `prefix`: True if taken, None if it may still come."""
        stripped = self.buf.lstrip()
        if stripped.startswith(prefix):
            self.buf = stripped[len(prefix) :]
            return True
        if prefix.startswith(stripped):
            return None
        return False


BodyFactory = Callable[[ToolCallEmitter, ToolContext, str], CallBody]


class CallParser(Protocol):
    """What a response's output parser needs of a tool-call parser (ToolParser, and wrappers
    such as bare_json.BareJsonCalls)."""

    @property
    def called(self) -> bool: ...

    def feed(self, text: str) -> tuple[str, list[ToolCallDelta]]: ...

    def finish(self) -> tuple[str, list[ToolCallDelta]]: ...


class ToolParser:
    """Splits content text into plain content and tool calls, for one response."""

    def __init__(
        self, context: ToolContext, start_markers: Sequence[str], body: BodyFactory
    ) -> None:
        self.context = context
        self.emitter = ToolCallEmitter(parallel=context.parallel)
        self._markers = tuple(start_markers)
        self._make_body = body
        self._buf = ""
        self._body: CallBody | None = None

    @property
    def called(self) -> bool:
        return self.emitter.count > 0

    def feed(self, text: str) -> tuple[str, list[ToolCallDelta]]:
        self._buf += text
        content: list[str] = []
        while self._buf:
            if self._body is not None:
                rest = self._body.feed(self._buf)
                self._buf = ""
                if rest is None:
                    break
                self._add(content, self._body.fallback())
                self._body, self._buf = None, rest
                continue
            found = find_first(self._buf, self._markers)
            if found is None:
                safe, self._buf = split_safe(self._buf, self._markers)
                self._add(content, safe)
                break
            index, marker = found
            self._add(content, self._buf[:index])
            self._buf = self._buf[index + len(marker) :]
            self._body = self._make_body(self.emitter, self.context, marker)
        return "".join(content), self.emitter.take()

    def finish(self) -> tuple[str, list[ToolCallDelta]]:
        """End of generation: closes an open body, releases held-back text.

        Generation that ends inside a call (max_tokens, a stop string) never turns its markup
        into content: a call that began is closed as it stands (a partial call, reported with
        the request's finish reason, e.g. "length"); one whose name had not come is dropped.
        Text after a marker that turned out not to be a call stays content, as mid-stream."""
        content: list[str] = []
        if self._body is not None:
            self._body.finish()
            if self._body.failed:  # not a call after all: the model's text, as mid-stream
                self._add(content, self._body.fallback())
            self._body = None
        self._add(content, self._buf)
        self._buf = ""
        return "".join(content), self.emitter.take()

    def _add(self, content: list[str], text: str) -> None:
        # Whitespace between or after calls is layout, not an answer.
        if text and (text.strip() or not self.called):
            content.append(text)
