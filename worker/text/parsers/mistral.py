"""Mistral tool calls after the `[TOOL_CALLS]` control token, in either of its two layouts.

- Tokenizer v3-v7 (Mistral 7B v0.3, Nemo, Small 3.1, Mixtral 8x22B):
  `[TOOL_CALLS][{"name": "f", "arguments": {...}}, {"name": "g", ...}]`
- Tokenizer v11+ (Small 3.2, Magistral, Devstral): `[TOOL_CALLS]f[ARGS]{...}`, repeated per
  call; some checkpoints put `[CALL_ID]<9 chars>` before `[ARGS]`.

There is no end marker: a call ends with its JSON, the response with EOS.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from worker.text.parsers.base import ToolCallEmitter
from worker.text.parsers.families import (
    Function,
    GrammarKit,
    ToolFormat,
    call_objects_schema,
    literal,
    parameters_schema,
)
from worker.text.parsers.json_stream import JsonCallObject, JsonValueScanner
from worker.text.parsers.tool_base import CallBody, ToolContext, ToolParser

START = "[TOOL_CALLS]"
ARGS = "[ARGS]"
_HEADER = re.compile(r"\s*([\w\-.]+)\s*(?:\[CALL_ID\]\s*\w+\s*)?\[ARGS\]\s*")


class MistralBody(CallBody):
    def __init__(self, emitter: ToolCallEmitter, context: ToolContext, marker: str) -> None:
        super().__init__(emitter, context, marker)
        self._state = "layout"
        self._object: JsonCallObject | None = None
        self._scanner: JsonValueScanner | None = None

    def _step(self) -> bool | str | None:
        stripped = self.buf.lstrip()
        if self._state == "layout":
            if not stripped:
                return None
            if stripped.startswith("["):
                self.buf, self._state = stripped[1:], "object"
                self._object = JsonCallObject(self.emitter)
            else:
                self._state = "header"
            return True
        if self._state == "object":
            return self._array_item()
        if self._state == "separator":
            if not stripped:
                return None
            self.buf = stripped[1:]
            if stripped[0] == ",":
                self._object, self._state = JsonCallObject(self.emitter), "object"
                return True
            self.failed = stripped[0] != "]"
            return "end"
        if self._state == "header":
            return self._header(stripped)
        return self._arguments()

    def _array_item(self) -> bool | None:
        assert self._object is not None
        used = self._object.feed(self.buf)
        self.buf = self.buf[used:]
        self.begun = self.begun or self._object.begun
        if self._object.failed:
            self.failed = True
            return None
        if not self._object.done:
            return None
        self._state = "separator"
        return True

    def _header(self, stripped: str) -> bool | None:
        match = _HEADER.match(self.buf)
        if match is None:
            # A name is word characters; anything else before `[ARGS]` is not a call.
            if re.fullmatch(r"[\w\-.]*(\[[A-Z_]*\]?\w*)*", stripped):
                return None
            self.failed = True
            return None
        self.buf = self.buf[match.end() :]
        self.begun = True
        self.emitter.begin(match.group(1))
        self._scanner, self._state = JsonValueScanner(), "arguments"
        return True

    def _arguments(self) -> bool | str | None:
        assert self._scanner is not None
        if not self.buf:
            return None
        end = self._scanner.feed(self.buf)
        self.emitter.args(self.buf[:end])
        self.buf = self.buf[end:]
        if not self._scanner.done:
            return None
        self.emitter.end()
        return "end"

    def finish(self) -> None:
        if self._object is not None and self._object.begun and not self._object.done:
            self._object.finish()
            self.emitter.end()
        elif self._state == "arguments":
            self.emitter.end()


def make_parser(context: ToolContext) -> ToolParser:
    return ToolParser(context, (START,), MistralBody)


def grammar_array(functions: Sequence[Function], parallel: bool, kit: GrammarKit) -> str:
    """`[TOOL_CALLS][{...}, ...]` (tokenizer v3-v7)."""
    schema = {
        "type": "array",
        "items": call_objects_schema(functions),
        "minItems": 1,
        **({} if parallel else {"maxItems": 1}),
    }
    return f"start: {kit.token(START)} {kit.json(schema)}"


def grammar_args(functions: Sequence[Function], parallel: bool, kit: GrammarKit) -> str:
    """`[TOOL_CALLS]name[ARGS]{...}` per call (tokenizer v11+)."""
    rules = [
        f"start: {'call+' if parallel else 'call'}",
        "call: " + " | ".join(f"call_{i}" for i in range(len(functions))),
    ]
    for i, (name, parameters) in enumerate(functions):
        rules.append(
            f"call_{i}: {kit.token(START)} {literal(name)} {kit.token(ARGS)} "
            f"{kit.json(parameters_schema(parameters))}"
        )
    return "\n".join(rules)


FORMAT = ToolFormat("mistral", make_parser, grammar_array)
FORMAT_ARGS = ToolFormat("mistral_v11", make_parser, grammar_args)
