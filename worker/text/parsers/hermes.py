"""Hermes / Qwen tool calls: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`.

The format of Qwen2.5, Qwen3 (non-coder), QwQ, Hermes 2/3 and many fine-tunes that reuse
their templates (mlx-lm calls it `json_tools`). Several calls are several blocks. The arguments
stream as the model writes them.
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.text.parsers.bare_json import wrapping
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

START = "<tool_call>"
END = "</tool_call>"


class HermesBody(CallBody):
    end_marker = END

    def __init__(self, emitter: ToolCallEmitter, context: ToolContext, marker: str) -> None:
        super().__init__(emitter, context, marker)
        self._object = JsonCallObject(emitter)

    def _step(self) -> bool | str | None:
        if not self._object.done:
            used = self._object.feed(self.buf)
            self.buf = self.buf[used:]
            self.begun = self._object.begun
            if self._object.failed:
                self.failed = True
            return True if self._object.done else None
        taken = self._take_prefix(END)
        if taken is None:
            return None
        if not taken:
            self.failed = True
        return "end"

    def finish(self) -> None:
        self._object.finish()
        if self._object.begun and not self._object.done:
            self.emitter.end()


def make_parser(context: ToolContext) -> ToolParser:
    return ToolParser(context, (START,), HermesBody)


def grammar(functions: Sequence[Function], parallel: bool, kit: GrammarKit) -> str:
    call = f"{kit.token(START)} {literal(chr(10))} body {literal(chr(10))} {kit.token(END)}"
    return "\n".join(
        [
            f"start: {repeat('call', literal(chr(10)), parallel)}",
            f"call: {call}",
            f"body: {kit.json(call_objects_schema(functions))}",
        ]
    )


# Qwen2.5-Coder's GGUFs answer with the bare call object instead (bare_json.py): read both.
FORMAT = wrapping(ToolFormat("hermes", make_parser, grammar))
