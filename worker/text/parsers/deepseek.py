"""DeepSeek tool calls (V3, R1-0528, V3.1 / V3.2 layouts), between DeepSeek's own special tokens.

V3 and R1-0528:
    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
    ```json
    {...}
    ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
V3.1 and later:
    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜><｜tool▁calls▁end｜>
The parser reads both; the arguments stream as they are written.
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.text.parsers.base import ToolCallEmitter
from worker.text.parsers.families import (
    Function,
    GrammarKit,
    ToolFormat,
    literal,
    parameters_schema,
)
from worker.text.parsers.json_stream import JsonValueScanner
from worker.text.parsers.tool_base import CallBody, ToolContext, ToolParser

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"
_FENCE = "```json\n"


class DeepSeekBody(CallBody):
    end_marker = CALLS_END

    def __init__(self, emitter: ToolCallEmitter, context: ToolContext, marker: str) -> None:
        super().__init__(emitter, context, marker)
        # Some outputs skip the outer begin token and open a call directly.
        self._state = "header" if marker == CALL_BEGIN else "call_or_end"
        self._scanner: JsonValueScanner | None = None

    def _step(self) -> bool | str | None:
        if self._state == "call_or_end":
            return self._call_or_end()
        if self._state == "header":
            return self._header()
        if self._state == "v3_name":
            return self._v3_name()
        if self._state == "fence":
            taken = self._take_prefix(_FENCE)
            if taken is None:
                return None
            self._start_arguments()
            return True
        if self._state == "arguments":
            return self._arguments()
        return self._call_end()

    def _call_or_end(self) -> bool | str | None:
        stripped = self.buf.lstrip()
        for marker, state in ((CALL_BEGIN, "header"), (CALLS_END, "end")):
            if stripped.startswith(marker):
                self.buf = stripped[len(marker) :]
                if state == "end":
                    return "end"
                self._state = state
                return True
        if any(marker.startswith(stripped) for marker in (CALL_BEGIN, CALLS_END)):
            return None
        self.failed = True
        return None

    def _header(self) -> bool | None:
        index = self.buf.find(SEP)
        if index == -1:
            # A name (or V3's "function") is one short line.
            if "\n" in self.buf or len(self.buf) > 256:
                self.failed = True
            return None
        before = self.buf[:index].strip()
        self.buf = self.buf[index + len(SEP) :]
        if before == "function":  # V3: the type, then the name on the next line
            self._state = "v3_name"
            return True
        self._begin(before)
        self._start_arguments()
        return True

    def _v3_name(self) -> bool | None:
        index = self.buf.find("\n")
        if index == -1:
            return None
        self._begin(self.buf[:index].strip())
        self.buf = self.buf[index + 1 :]
        self._state = "fence"
        return True

    def _begin(self, name: str) -> None:
        if not name:
            self.failed = True
            return
        self.begun = True
        self.emitter.begin(name)

    def _start_arguments(self) -> None:
        self.buf = self.buf.lstrip()
        self._scanner, self._state = JsonValueScanner(), "arguments"

    def _arguments(self) -> bool | None:
        assert self._scanner is not None
        if not self.buf:
            return None
        end = self._scanner.feed(self.buf)
        self.emitter.args(self.buf[:end])
        self.buf = self.buf[end:]
        if not self._scanner.done:
            return None
        self._state = "call_end"
        return True

    def _call_end(self) -> bool | None:
        stripped = self.buf.lstrip()
        if stripped.startswith("```"):
            stripped = stripped[3:].lstrip()
        if stripped.startswith(CALL_END):
            self.buf = stripped[len(CALL_END) :]
            self.emitter.end()
            self._state = "call_or_end"
            return True
        if CALL_END.startswith(stripped) or "```".startswith(stripped):
            return None
        self.emitter.end()
        self.failed = True
        return None

    def finish(self) -> None:
        if self._state in ("arguments", "call_end", "fence"):
            self.emitter.end()


def make_parser(context: ToolContext) -> ToolParser:
    return ToolParser(context, (CALLS_BEGIN, CALL_BEGIN), DeepSeekBody)


def _grammar(functions: Sequence[Function], parallel: bool, kit: GrammarKit, v3: bool) -> str:
    rules = [
        f"start: {kit.token(CALLS_BEGIN)} {'call+' if parallel else 'call'} {kit.token(CALLS_END)}",
        "call: " + " | ".join(f"call_{i}" for i in range(len(functions))),
    ]
    for i, (name, parameters) in enumerate(functions):
        arguments = kit.json(parameters_schema(parameters))
        if v3:
            head = f"{literal('function')} {kit.token(SEP)} {literal(name + chr(10) + _FENCE)}"
            body = f"{arguments} {literal(chr(10) + '```')}"
        else:
            head = f"{literal(name)} {kit.token(SEP)}"
            body = arguments
        rules.append(f"call_{i}: {kit.token(CALL_BEGIN)} {head} {body} {kit.token(CALL_END)}")
    return "\n".join(rules)


def grammar_v3(functions: Sequence[Function], parallel: bool, kit: GrammarKit) -> str:
    return _grammar(functions, parallel, kit, v3=True)


def grammar_v31(functions: Sequence[Function], parallel: bool, kit: GrammarKit) -> str:
    return _grammar(functions, parallel, kit, v3=False)


FORMAT_V3 = ToolFormat("deepseek_v3", make_parser, grammar_v3)
FORMAT_V31 = ToolFormat("deepseek_v31", make_parser, grammar_v31)
