"""Qwen3-Coder XML tool calls (also Qwen3.5 / Qwen3-Next coder templates).

    <tool_call>
    <function=get_weather>
    <parameter=location>
    Paris
    </parameter>
    </function>
    </tool_call>

Parameter values are raw text; each one is converted to JSON by the tool's parameter schema
(string stays a string, integer/number/boolean/object/array are decoded) the way Qwen's own
parser does, and the arguments object is streamed one parameter at a time.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from worker.text.parsers.base import ToolCallEmitter
from worker.text.parsers.families import Function, GrammarKit, ToolFormat, literal, repeat
from worker.text.parsers.parameter_calls import ParameterCallBody, parameter_rules
from worker.text.parsers.tool_base import ToolContext, ToolParser

START = "<tool_call>"
END = "</tool_call>"
_FUNCTION = re.compile(r"\s*<function=([^>\n]+)>")
_PARAMETER = re.compile(r"\s*<parameter=([^>\n]+)>")
_VALUE_ENDS = ("</parameter>", "<parameter=", "</function>")


class Qwen3CoderBody(ParameterCallBody):
    end_marker = END

    def __init__(self, emitter: ToolCallEmitter, context: ToolContext, marker: str) -> None:
        super().__init__(emitter, context, marker)
        self._state = "function"
        self._parameter: str | None = None

    def _step(self) -> bool | str | None:
        if self._state == "function":
            return self._function()
        if self._state == "parameters":
            return self._parameters()
        if self._state == "value":
            return self._value()
        taken = self._take_prefix(END)
        if taken is None:
            return None
        if not taken:
            self.failed = True
        return "end"

    def _function(self) -> bool | None:
        match = self._tag(_FUNCTION, "<function=")
        if not isinstance(match, re.Match):
            self.failed = match is False
            return None
        self.buf = self.buf[match.end() :]
        self._open_call(match.group(1).strip())
        return True

    def _parameters(self) -> bool | None:
        match = self._tag(_PARAMETER, "<parameter=")
        if isinstance(match, re.Match):
            self._parameter = match.group(1).strip()
            self.buf = self.buf[match.end() :]
            self._state = "value"
            return True
        return self._close_tag("</function>", waiting=match is None)

    def _value(self) -> bool | None:
        ends = [(self.buf.find(end), end) for end in _VALUE_ENDS]
        found = [(index, end) for index, end in ends if index != -1]
        if not found:
            return None
        index, end = min(found)
        self._value_done(self.buf[:index])
        # `</parameter>` is consumed; a missing one (next parameter, end of function) is not.
        self.buf = self.buf[index + len(end) :] if end == "</parameter>" else self.buf[index:]
        self._state = "parameters"
        return True

    def _value_done(self, raw: str) -> None:
        assert self._parameter is not None
        value = raw[1:] if raw.startswith("\n") else raw
        value = value[:-1] if value.endswith("\n") else value
        self._emit(self._parameter, convert_value(value, self._properties.get(self._parameter)))


def convert_value(value: str, schema: Mapping[str, Any] | None) -> Any:
    """A raw parameter value -> its JSON value, by the parameter's declared type."""
    kind = declared_type(schema)
    if kind == "string":
        return value
    if value.strip().lower() == "null":
        return None
    text = value.strip()
    try:
        if kind == "integer":
            number = float(text)
            return int(number) if number.is_integer() else number
        if kind == "number":
            number = float(text)
            return int(number) if number.is_integer() and "." not in text else number
    except ValueError:
        return value
    if kind == "boolean":
        lowered = text.lower()
        return lowered == "true" if lowered in ("true", "false") else value
    try:
        decoded = json.loads(text)
    except ValueError:
        if kind in ("object", "array"):
            try:
                return ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return value
        return value
    # Without a declared type, only containers are decoded ("42" may well be a string).
    if kind is None and not isinstance(decoded, (dict, list)):
        return value
    return decoded


def declared_type(schema: Mapping[str, Any] | None) -> str | None:
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None and "enum" in schema:
        values = schema["enum"]
        if values and all(isinstance(v, str) for v in values):
            return "string"
    return kind if isinstance(kind, str) else None


def make_parser(context: ToolContext) -> ToolParser:
    return ToolParser(context, (START,), Qwen3CoderBody)


def grammar(functions: Sequence[Function], parallel: bool, kit: GrammarKit) -> str:
    """One `<tool_call>` block per call; every declared parameter in schema order.

    Required parameters must appear, optional ones may; string values are raw text (no
    `<`, so the block's own tags stay unambiguous), other values are JSON by their schema.
    """
    nl = literal("\n")
    rules = [
        f"start: {repeat('call', nl, parallel)}",
        "call: " + " | ".join(f"call_{i}" for i in range(len(functions))),
    ]
    closing = literal("\n</parameter>\n")

    def parameter(param: str, schema: Any) -> str:
        return f"{literal(f'<parameter={param}>' + chr(10))} {value_grammar(schema, kit)} {closing}"

    for i, (name, parameters) in enumerate(functions):
        declared, items = parameter_rules(i, parameters, parameter)
        rules += declared
        head = literal(f"<function={name}>\n")
        tail = literal("</function>\n")
        body = " ".join([head, *items, tail])
        rules.append(f"call_{i}: {kit.token(START)} {nl} {body} {kit.token(END)}")
    return "\n".join(rules)


def value_grammar(schema: Any, kit: GrammarKit) -> str:
    schema = schema if isinstance(schema, Mapping) else {}
    if declared_type(schema) != "string":
        return kit.json(schema or {})
    options = schema.get("enum") or ([schema["const"]] if "const" in schema else None)
    if options:
        return "(" + " | ".join(literal(str(option)) for option in options) + ")"
    if isinstance(schema.get("pattern"), str):
        return "/" + schema["pattern"].removeprefix("^").removesuffix("$").replace("/", "\\/") + "/"
    low = int(schema.get("minLength", 0))
    high = schema.get("maxLength")
    count = f"{{{low},{int(high)}}}" if high is not None else f"{{{low},}}"
    return f"/[^<\\n]{count}/"


FORMAT = ToolFormat("qwen3_coder", make_parser, grammar)
