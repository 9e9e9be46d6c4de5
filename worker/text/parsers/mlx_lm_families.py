"""Every other tool-call syntax mlx-lm knows (Gemma 4, FunctionGemma, pythonic/LFM2, Kimi K2,
GLM 4.7, MiniMax M2, LongCat, ...), through mlx-lm's own parser modules.

These syntaxes are not JSON, so a call is held until its end marker and then parsed whole
with the module's `parse_tool_call`; its arguments arrive as one piece. No call grammar is
offered for them, so `tool_choice: required` / a named function is refused (400) here.
"""

from __future__ import annotations

import importlib
import json
import logging
import pkgutil
from functools import partial
from types import ModuleType
from typing import Any

from worker.text.parsers.base import ToolCallEmitter
from worker.text.parsers.families import ToolFormat
from worker.text.parsers.tool_base import CallBody, ToolContext, ToolParser

log = logging.getLogger(__name__)


class BufferedBody(CallBody):
    def __init__(
        self, module: ModuleType, emitter: ToolCallEmitter, context: ToolContext, marker: str
    ) -> None:
        super().__init__(emitter, context, marker)
        self._module = module
        self._end = module.tool_call_end or None
        self.end_marker = self._end

    def _step(self) -> bool | str | None:
        if self._end is None:
            return None  # the call runs to the end of the response
        index = self.buf.find(self._end)
        if index == -1:
            return None
        self._emit(self.buf[:index])
        self.buf = self.buf[index + len(self._end) :]
        return "end"

    def finish(self) -> None:
        # Without an end marker the call runs to the end of the response: parse it now. With
        # one, the response ended inside the call: unfinished, it is neither a call nor content.
        if not self.begun and self._end is None:
            self._emit(self.buf)

    def _emit(self, text: str) -> None:
        try:
            parsed = self._module.parse_tool_call(text, list(self.context.tools) or None)
        except Exception as exc:  # each mlx-lm parser raises its own errors on bad text
            log.debug("not a tool call (%s): %r", exc, text[:200])
            self.failed = True
            return
        calls = parsed if isinstance(parsed, list) else [parsed]
        for call in calls:
            self.begun = True
            self.emitter.begin(str(call["name"]))
            arguments: Any = call.get("arguments", {})
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            self.emitter.args(arguments)
            self.emitter.end()


def available() -> list[str]:
    """The names of mlx-lm's tool-parser modules."""
    import mlx_lm.tool_parsers as package

    return sorted(info.name for info in pkgutil.iter_modules(package.__path__))


def tool_format(name: str) -> ToolFormat:
    """The mlx-lm parser module `name` as a ToolFormat (ImportError if there is none)."""
    module = importlib.import_module(f"mlx_lm.tool_parsers.{name}")

    def make_parser(context: ToolContext) -> ToolParser:
        return ToolParser(context, (module.tool_call_start,), partial(BufferedBody, module))

    return ToolFormat(name, make_parser, None)
