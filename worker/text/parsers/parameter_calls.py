"""The shared body of tool-call syntaxes whose arguments come as tagged parameters, one tag
per argument (Qwen3-Coder's `<parameter=p>`, DeepSeek V3.2's DSML `<｜DSML｜parameter ...>`):
the call's arguments object is streamed one parameter at a time, each value converted to JSON
as the family's rules say (the subclass's `_value_done`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from worker.text.parsers.base import ToolCallEmitter
from worker.text.parsers.tool_base import CallBody, ToolContext


class ParameterCallBody(CallBody):
    """States: the subclass's opening state, "parameters", "value", then `closed_state`."""

    closed_state = "close"  # the state after a call's closing tag

    def __init__(self, emitter: ToolCallEmitter, context: ToolContext, marker: str) -> None:
        super().__init__(emitter, context, marker)
        self._properties: Mapping[str, Any] = {}  # the open call's parameter schemas
        self._count = 0  # parameters written into the open call

    def _tag(self, pattern: re.Pattern[str], prefix: str) -> re.Match[str] | bool | None:
        """The tag's match; None while it may still come; False when something else is there."""
        match = pattern.match(self.buf)
        if match is not None:
            return match
        stripped = self.buf.lstrip()
        if prefix.startswith(stripped) or (
            stripped.startswith(prefix) and ">" not in stripped and "\n" not in stripped
        ):
            return None
        return False

    def _open_call(self, name: str) -> None:
        schema = self.context.functions.get(name) or {}
        self._properties = schema.get("properties") or {}
        self._count = 0
        self.begun = True
        self.emitter.begin(name)
        self.emitter.args("{")
        self._state = "parameters"

    def _emit(self, name: str, value: Any) -> None:
        """One `"name": value` member of the open call's arguments."""
        separator = ", " if self._count else ""
        self._count += 1
        self.emitter.args(
            f"{separator}{json.dumps(name, ensure_ascii=False)}: "
            f"{json.dumps(value, ensure_ascii=False)}"
        )

    def _close_call(self) -> None:
        self.emitter.args("}")
        self.emitter.end()
        self._state = self.closed_state

    def _close_tag(self, tag: str, waiting: bool) -> bool | None:
        """After a parameter: the call's closing `tag` closes it; None while it may still come
        (or, `waiting`, another parameter's tag may); anything else fails the call, closed."""
        taken = self._take_prefix(tag)
        if taken is None or (taken is False and waiting):
            return None
        self._close_call()
        self.failed = not taken
        return True

    def _value_done(self, raw: str) -> None:
        """The open parameter's raw value is complete: convert and `_emit` it."""
        raise NotImplementedError

    def finish(self) -> None:
        if self._state == "value":
            self._value_done(self.buf)
            self._state = "parameters"
        if self._state == "parameters":
            self._close_call()


def parameter_rules(
    i: int, parameters: Mapping[str, Any] | None, rule: Callable[[str, Any], str]
) -> tuple[list[str], list[str]]:
    """Function i's grammar rules, one per declared parameter in schema order (`rule` gives a
    parameter's tag and value), and the items its call lists: the required ones always, the
    others optional."""
    properties = (parameters or {}).get("properties") or {}
    required = set((parameters or {}).get("required") or ())
    rules, items = [], []
    for j, (param, schema) in enumerate(properties.items()):
        rules.append(f"p_{i}_{j}: {rule(param, schema)}")
        items.append(f"p_{i}_{j}" if param in required else f"p_{i}_{j}?")
    return rules, items
