"""Llama 3.1 / 3.2 / 3.3 JSON tool calls: the whole answer is `{"name": ..., "parameters": {...}}`.

Meta's JSON-based tool calling has no start marker: a response that begins with `{` (or with
`<|python_tag|>`) is a call, several calls are joined by `; `. Because plain JSON answers look
the same, an object only counts as a call when its name is one of the request's functions;
anything else is content, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.messages import ToolCallDelta
from worker.text.parsers.base import ToolCallEmitter
from worker.text.parsers.families import (
    Function,
    GrammarKit,
    ToolFormat,
    call_objects_schema,
    literal,
    repeat,
)
from worker.text.parsers.json_stream import JsonCallObject
from worker.text.parsers.tool_base import CallBody, ToolContext, ToolParser

PYTHON_TAG = "<|python_tag|>"


class Llama3Body(CallBody):
    def __init__(self, emitter: ToolCallEmitter, context: ToolContext, marker: str) -> None:
        super().__init__(emitter, context, marker)
        self._object: JsonCallObject | None = self._new_object()

    def _new_object(self) -> JsonCallObject:
        known = self.context.functions
        return JsonCallObject(
            self.emitter,
            args_keys=("parameters", "arguments"),
            accept_name=(lambda name: name in known) if known else None,
        )

    def _step(self) -> bool | str | None:
        if self._object is not None:
            used = self._object.feed(self.buf)
            self.buf = self.buf[used:]
            self.begun = self.begun or self._object.begun
            if self._object.failed:
                self.failed = True
                return None
            if not self._object.done:
                return None
            self._object = None
        stripped = self.buf.lstrip()
        if not stripped:
            return None
        if stripped.startswith(";"):
            self.buf = stripped[1:]
            self._object = self._new_object()
            return True
        return "end"

    def finish(self) -> None:
        if self._object is not None:
            self._object.finish()
            if self._object.begun and not self._object.done:
                self.emitter.end()


class Llama3JsonParser(ToolParser):
    """A call only at the very start of the answer (or after `<|python_tag|>`)."""

    def __init__(self, context: ToolContext) -> None:
        super().__init__(context, (PYTHON_TAG,), Llama3Body)
        self._at_start = True

    def feed(self, text: str) -> tuple[str, list[ToolCallDelta]]:
        if not self._at_start:
            return super().feed(text)
        pending = self._buf + text
        stripped = pending.lstrip()
        if not stripped:
            self._buf = pending
            return "", []
        self._at_start = False
        self._buf = ""
        if stripped.startswith("{"):
            leading = pending[: len(pending) - len(stripped)]
            self._body = Llama3Body(self.emitter, self.context, leading)
            return super().feed(stripped)
        return super().feed(pending)


def make_parser(context: ToolContext) -> ToolParser:
    return Llama3JsonParser(context)


def grammar(functions: Sequence[Function], parallel: bool, kit: GrammarKit) -> str:
    schema = call_objects_schema(functions, args_key="parameters")
    return "\n".join(
        [f"start: {repeat('call', literal('; '), parallel)}", f"call: {kit.json(schema)}"]
    )


FORMAT = ToolFormat("llama3_json", make_parser, grammar)
