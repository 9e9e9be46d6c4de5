"""DeepSeek V3.2 tool calls (DSML), as mlx-lm's deepseek_v32 chat renderer teaches them:

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>
    <｜DSML｜parameter name="days" string="false">2</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

A parameter with `string="true"` holds raw text (a JSON string); `string="false"` holds JSON
(numbers, booleans, arrays, objects). A value the model marked as JSON that does not parse is
converted by the parameter's schema instead, as Qwen3-Coder's raw values are. The arguments
object is streamed one parameter at a time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from worker.text.parsers.base import ToolCallEmitter
from worker.text.parsers.families import Function, GrammarKit, ToolFormat, literal, repeat
from worker.text.parsers.parameter_calls import ParameterCallBody, parameter_rules
from worker.text.parsers.qwen3_coder import convert_value, declared_type, value_grammar
from worker.text.parsers.tool_base import ToolContext, ToolParser

DSML = "｜DSML｜"
CALLS_BEGIN = f"<{DSML}function_calls>"
CALLS_END = f"</{DSML}function_calls>"
INVOKE_END = f"</{DSML}invoke>"
PARAMETER_END = f"</{DSML}parameter>"
_INVOKE = re.compile(rf'\s*<{DSML}invoke name="([^"\n]+)">')
_PARAMETER = re.compile(rf'\s*<{DSML}parameter name="([^"\n]+)" string="(true|false)">')


class DsmlBody(ParameterCallBody):
    end_marker = CALLS_END
    closed_state = "invoke"  # another invoke may follow

    def __init__(self, emitter: ToolCallEmitter, context: ToolContext, marker: str) -> None:
        super().__init__(emitter, context, marker)
        self._state = "invoke"
        self._parameter: tuple[str, bool] | None = None

    def _step(self) -> bool | str | None:
        if self._state == "invoke":
            return self._invoke()
        if self._state == "parameters":
            return self._parameters()
        return self._value()

    def _invoke(self) -> bool | str | None:
        match = self._tag(_INVOKE, f"<{DSML}invoke")
        if isinstance(match, re.Match):
            self.buf = self.buf[match.end() :]
            self._open_call(match.group(1).strip())
            return True
        taken = self._take_prefix(CALLS_END)
        if taken is None or (taken is False and match is None):
            return None
        if not taken:
            self.failed = True
        return "end"

    def _parameters(self) -> bool | None:
        match = self._tag(_PARAMETER, f"<{DSML}parameter")
        if isinstance(match, re.Match):
            self._parameter = (match.group(1).strip(), match.group(2) == "true")
            self.buf = self.buf[match.end() :]
            self._state = "value"
            return True
        return self._close_tag(INVOKE_END, waiting=match is None)

    def _value(self) -> bool | None:
        index = self.buf.find(PARAMETER_END)
        if index == -1:
            return None
        self._value_done(self.buf[:index])
        self.buf = self.buf[index + len(PARAMETER_END) :]
        self._state = "parameters"
        return True

    def _value_done(self, raw: str) -> None:
        assert self._parameter is not None
        name, is_string = self._parameter
        value: Any = raw
        if not is_string:
            try:
                value = json.loads(raw)
            except ValueError:
                value = convert_value(raw, self._properties.get(name))
        self._emit(name, value)


def make_parser(context: ToolContext) -> ToolParser:
    return ToolParser(context, (CALLS_BEGIN,), DsmlBody)


def grammar(functions: Sequence[Function], parallel: bool, kit: GrammarKit) -> str:
    """One function_calls block of one or more invokes; every declared parameter in schema
    order, the required ones always; strings raw text (Qwen3-Coder's value rules: an enum's
    options, a pattern, else no `<` or newline), other values JSON by their schema."""
    nl = literal("\n")
    rules = [
        f"start: {literal(CALLS_BEGIN)} {nl} {repeat('call', nl, parallel)} {nl} "
        f"{literal(CALLS_END)}",
        "call: " + " | ".join(f"call_{i}" for i in range(len(functions))),
    ]

    def parameter(param: str, schema: Any) -> str:
        is_string = declared_type(schema if isinstance(schema, Mapping) else None) == "string"
        opening = f'<{DSML}parameter name="{param}" string="{"true" if is_string else "false"}">'
        return f"{literal(opening)} {value_grammar(schema, kit)} {literal(PARAMETER_END)} {nl}"

    for i, (name, parameters) in enumerate(functions):
        declared, items = parameter_rules(i, parameters, parameter)
        rules += declared
        head = literal(f'<{DSML}invoke name="{name}">') + " " + nl
        rules.append(f"call_{i}: {' '.join([head, *items, literal(INVOKE_END)])}")
    return "\n".join(rules)


FORMAT = ToolFormat("deepseek_v32", make_parser, grammar)
