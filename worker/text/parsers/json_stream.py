"""Incremental JSON scanning for tool calls: find where a value ends, stream a call's arguments.

Models write a call as JSON (`{"name": "f", "arguments": {...}}`) a few characters at a time.
`JsonValueScanner` follows one JSON value's nesting and strings so the end of the value is known
the moment it is written; `JsonCallObject` walks the call object key by key, reports the name as
soon as its string closes and passes the arguments value's text through as it arrives, so a
client sees the arguments grow token by token. Neither validates JSON fully: a constrained
(grammar) call is valid by construction, and an unconstrained one is passed on as written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from worker.text.parsers.base import ToolCallEmitter

_WHITESPACE = " \t\r\n"
_SCALAR_CHARS = frozenset("0123456789+-.eEtruefalsn")


class JsonValueScanner:
    """Finds the end of one JSON value fed in pieces (the value must start at the first char)."""

    __slots__ = ("kind", "done", "_depth", "_in_string", "_escape")

    def __init__(self) -> None:
        self.kind: str | None = None  # "container" | "string" | "scalar"
        self.done = False
        self._depth = 0
        self._in_string = False
        self._escape = False

    def feed(self, text: str, pos: int = 0) -> int:
        """Scans `text[pos:]`; returns the index just past the value (then `done`) or len(text)."""
        n = len(text)
        if self.kind is None and pos < n:
            first = text[pos]
            self.kind = "container" if first in "{[" else "string" if first == '"' else "scalar"
        i = pos
        if self.kind == "scalar":
            while i < n and text[i] in _SCALAR_CHARS:
                i += 1
            self.done = i < n
            return i
        while i < n:
            c = text[i]
            if self._in_string:
                if self._escape:
                    self._escape = False
                elif c == "\\":
                    self._escape = True
                elif c == '"':
                    self._in_string = False
                    if self.kind == "string":
                        self.done = True
                        return i + 1
            elif c == '"':
                self._in_string = True
            elif c in "{[":
                self._depth += 1
            elif c in "}]":
                self._depth -= 1
                if self._depth == 0:
                    self.done = True
                    return i + 1
            i += 1
        return n


class JsonCallObject:
    """Streams one call object: begins the call at its name, then passes the arguments through.

    Keys in `name_keys` give the function name, keys in `args_keys` its arguments (an object,
    or a string holding JSON, which some templates render); other keys are skipped. Arguments
    written before the name are held until the name arrives. `failed` is set on text that is
    not a call object (or names a function `accept_name` refuses); `raw` keeps everything fed,
    for the caller's fallback.
    """

    def __init__(
        self,
        emitter: ToolCallEmitter,
        name_keys: Sequence[str] = ("name",),
        args_keys: Sequence[str] = ("arguments", "parameters"),
        accept_name: Callable[[str], bool] | None = None,
    ) -> None:
        self._emitter = emitter
        self._accept_name = accept_name
        self._name_keys = name_keys
        self._args_keys = args_keys
        self._state = "open"
        self._scanner: JsonValueScanner | None = None
        self._text = ""  # the current key's or (non-streamed) value's text
        self._key = ""
        self._role = ""
        self._name: str | None = None
        self._pending_args = ""  # arguments seen before the name
        self._has_args = False
        self.begun = False
        self.done = False
        self.failed = False
        self.raw = ""

    def feed(self, text: str) -> int:
        """Consumes `text` up to the object's end; returns how much of it was used."""
        i, n = 0, len(text)
        while i < n and not (self.done or self.failed):
            state = self._state
            if state in ("open", "key_or_close", "colon", "value_start", "comma_or_close"):
                while i < n and text[i] in _WHITESPACE:
                    i += 1
                if i == n:
                    break
                i = self._punctuation(state, text, i)
            elif state == "key":
                i = self._scan(text, i, stream=False)
            else:  # "value"
                i = self._scan(text, i, stream=self._role == "args")
        self.raw += text[:i]
        return i

    def finish(self) -> None:
        """The text ended: a scalar still being read may be complete; anything else is cut off."""
        if self._state == "value" and self._scanner and self._scanner.kind == "scalar":
            self._value_done()

    def _punctuation(self, state: str, text: str, i: int) -> int:
        c = text[i]
        if state == "open" and c == "{":
            self._state = "key_or_close"
        elif state == "key_or_close" and c == '"':
            self._scanner, self._text, self._state = JsonValueScanner(), "", "key"
            return i  # the scanner reads the opening quote itself
        elif state in ("key_or_close", "comma_or_close") and c == "}":
            self._close()
        elif state == "colon" and c == ":":
            self._state = "value_start"
        elif state == "value_start":
            self._role = (
                "name"
                if self._key in self._name_keys and self._name is None
                else "args"
                if self._key in self._args_keys and not self._has_args
                else "other"
            )
            self._scanner, self._text, self._state = JsonValueScanner(), "", "value"
            return i
        elif state == "comma_or_close" and c == ",":
            self._state = "key_or_close"
        else:
            self.failed = True
            return i
        return i + 1

    def _scan(self, text: str, i: int, stream: bool) -> int:
        assert self._scanner is not None
        end = self._scanner.feed(text, i)
        chunk = text[i:end]
        if stream and self._scanner.kind == "container":
            self._has_args = True
            if self.begun:
                self._emitter.args(chunk)
            else:
                self._pending_args += chunk
        else:
            self._text += chunk
        if self._scanner.done:
            if self._state == "key":
                self._key_done()
            else:
                self._value_done()
        return end

    def _key_done(self) -> None:
        try:
            self._key = json.loads(self._text)
        except ValueError:
            self.failed = True
            return
        self._state = "colon"

    def _value_done(self) -> None:
        self._state = "comma_or_close"
        if self._role == "name":
            try:
                name = json.loads(self._text)
            except ValueError:
                name = None
            if not isinstance(name, str) or not name or not self._name_ok(name):
                self.failed = True
                return
            self._name = name
            self._begin()
        elif self._role == "args" and self._scanner and self._scanner.kind != "container":
            self._has_args = True
            self._pending_args += _arguments_from_value(self._text)
            if self.begun:
                self._emitter.args(self._pending_args)
                self._pending_args = ""

    def _name_ok(self, name: str) -> bool:
        return self._accept_name is None or self._accept_name(name)

    def _begin(self) -> None:
        assert self._name is not None
        self.begun = True
        self._emitter.begin(self._name)
        if self._pending_args:
            self._emitter.args(self._pending_args)
            self._pending_args = ""

    def _close(self) -> None:
        if not self.begun:
            self.failed = True  # an object without a name is not a call
            return
        if not self._has_args:
            self._emitter.args("{}")
        self._emitter.end()
        self.done = True


def _arguments_from_value(text: str) -> str:
    """Arguments written as a JSON string or null (not an object) -> the arguments' JSON text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
