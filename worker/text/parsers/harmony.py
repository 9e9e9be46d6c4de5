"""OpenAI's harmony format (GPT-OSS): one response is a series of messages on named channels.

The generation prompt ends with `<|start|>assistant`; the model then writes messages such as

    <|channel|>analysis<|message|>The user asks for the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>
    <|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>

(the recipient may also come before the channel: `<|start|>assistant to=functions.x<|channel|>
commentary json<|message|>`). A message's header runs to `<|message|>`, its body to `<|end|>`,
or to `<|call|>` / `<|return|>`, which end the turn (they are end-of-sequence tokens, so they
usually never reach the text). Bodies go where their header says:

- the `analysis` channel is reasoning;
- a message to `functions.NAME` is a call of NAME whose body is the JSON arguments (streamed as
  they come), when the request has tools and tool_choice is not "none"; otherwise its body is
  content;
- every other message (`final`, a `commentary` preamble with no recipient, a message to a
  built-in tool such as `python` that this server does not run) is content; a second message
  on the same route starts a new paragraph (a blank line between them).

Headers and markers never reach any of them. Output that does not start like a harmony header
(a model that ignores the format, random weights) is content as it is.

The forced-call grammar (`tool_choice` required / named) is one call message, and a
`response_format` / `structured_outputs` constraint applies to the body of one `final` message
(`final_message_grammar`); either may come after one analysis message, which the model writes
freely until it ends it or the thinking budget does (worker/text/constraints/think_gate.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from protocol.messages import FinishReason
from worker.text.parsers.base import ParsedDelta, ToolCallEmitter, find_first, split_safe
from worker.text.parsers.families import Function, GrammarKit, literal
from worker.text.parsers.tool_base import ToolContext

START = "<|start|>"
CHANNEL = "<|channel|>"
MESSAGE = "<|message|>"
CONSTRAIN = "<|constrain|>"
END = "<|end|>"
CALL = "<|call|>"
RETURN = "<|return|>"
BODY_ENDS = (END, CALL, RETURN)
# What a header can start with (after blank space): the next message's start, its channel, or a
# recipient written before the channel.
HEADER_STARTS = (START, CHANNEL, "to=")
# A header longer than this without `<|message|>` is not one (real headers are tens of bytes).
MAX_HEADER = 256
FUNCTIONS = "functions."
_CHANNEL_NAME = re.compile(re.escape(CHANNEL) + r"\s*([A-Za-z_]+)")
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")


class HarmonyParser:
    """Splits one harmony response into content, reasoning and tool calls as it arrives.

    `tools` is the request's tool context, or None when calls are not parsed (no tools, or
    tool_choice "none"). `cut_short` says whether constrained decoding closed the answer early.
    """

    def __init__(
        self, tools: ToolContext | None = None, cut_short: Callable[[], bool] | None = None
    ) -> None:
        self._tools = tools
        self._emitter = ToolCallEmitter(tools.parallel if tools is not None else True)
        self._cut_short = cut_short
        # "header": reading a message's header; "body": inside its body; "plain": the output is
        # not harmony, everything is content.
        self._state = "header"
        self._route = "content"  # where the current body goes: content | reasoning | call
        self._routes_used: set[str] = set()
        self._separate = False  # the next body text starts a new paragraph of its route
        self._buf = ""

    @property
    def in_reasoning(self) -> bool:
        return self._state == "body" and self._route == "reasoning"

    def feed(self, text: str) -> ParsedDelta:
        self._buf += text
        out = ParsedDelta()
        while self._buf:
            if self._state == "plain":
                out.content += self._buf
                self._buf = ""
            elif self._state == "header":
                if not self._header():
                    break
            else:
                found = find_first(self._buf, BODY_ENDS)
                if found is None:
                    safe, self._buf = split_safe(self._buf, BODY_ENDS)
                    self._body(safe, out)
                    break
                index, marker = found
                self._body(self._buf[:index], out)
                self._buf = self._buf[index + len(marker) :]
                self._close()
        out.tool_calls = self._emitter.take()
        return out

    def finish(self, finish_reason: str) -> tuple[ParsedDelta, str]:
        """Flushes what was held back; "stop" becomes "tool_calls" after a call, or "length"
        when constrained decoding closed the answer early."""
        out = ParsedDelta()
        held, self._buf = self._buf, ""
        if self._state == "body":
            self._body(held, out)
            self._close()
        elif self._state == "plain" or (held.strip() and not _is_markup(held)):
            out.content += held  # text that never became a harmony header
        out.tool_calls = self._emitter.take()
        if finish_reason == FinishReason.STOP:
            if self._cut_short is not None and self._cut_short():
                finish_reason = FinishReason.LENGTH
            elif self._emitter.count:
                finish_reason = FinishReason.TOOL_CALLS
        return out, finish_reason

    def _header(self) -> bool:
        """Reads a header up to `<|message|>`; False when more text is needed."""
        stripped = self._buf.lstrip()
        if not stripped:
            return False
        if not stripped.startswith(HEADER_STARTS):
            if any(start.startswith(stripped) for start in HEADER_STARTS):
                return False  # a marker split across pieces
            self._state = "plain"
            return True
        index = self._buf.find(MESSAGE)
        if index == -1:
            if len(self._buf) > MAX_HEADER:
                self._state = "plain"
                return True
            return False
        self._open(self._buf[:index])
        self._buf = self._buf[index + len(MESSAGE) :]
        self._state = "body"
        return True

    def _open(self, header: str) -> None:
        route, recipient = header_route(header)
        if route == "call" and self._tools is not None:
            assert recipient is not None
            self._emitter.begin(recipient[len(FUNCTIONS) :])
        elif route == "call":
            route = "content"
        # A second message on the same route is a new paragraph of it.
        self._separate = route in self._routes_used and route != "call"
        self._routes_used.add(route)
        self._route = route

    def _body(self, text: str, out: ParsedDelta) -> None:
        if not text:
            return
        if self._separate:
            text, self._separate = "\n\n" + text, False
        if self._route == "reasoning":
            out.reasoning += text
        elif self._route == "call":
            self._emitter.args(text)
        else:
            out.content += text

    def _close(self) -> None:
        if self._route == "call":
            self._emitter.end()
        self._state, self._route = "header", "content"


def header_route(header: str) -> tuple[str, str | None]:
    """Where a message's body goes by its header: ("reasoning" | "call" | "content", the
    recipient of a call)."""
    recipient = _RECIPIENT.search(header)
    if recipient is not None and recipient.group(1).startswith(FUNCTIONS):
        return "call", recipient.group(1)
    channel = _CHANNEL_NAME.search(header)
    if channel is not None and channel.group(1) == "analysis":
        return "reasoning", None
    return "content", None


def _is_markup(text: str) -> bool:
    """Whether leftover header text is harmony markup (a header cut off by the token limit):
    it starts with a marker's `<|`, or with a recipient's `to=`."""
    stripped = text.lstrip()
    return stripped.startswith(("<|", "to="))


def analysis_rule(kit: GrammarKit) -> str:
    """Lark rules of one analysis message and the next message's start: what a constrained
    answer may come after (its text is free; the thinking budget ends it, `HarmonyGate`)."""
    return (
        f"analysis: {kit.token(CHANNEL)} {literal('analysis')} {kit.token(MESSAGE)} "
        f"ANALYSIS_TEXT {kit.token(END)} {kit.token(START)} {literal('assistant')}\n"
        "ANALYSIS_TEXT: /(?s:.*)/"
    )


def call_grammar(functions: Sequence[Function], parallel: bool, kit: GrammarKit) -> str:
    """An optional analysis message, then one call message to one of `functions`, its
    arguments JSON by the function's schema.

    A harmony turn ends with its call (`<|call|>` ends the sequence), so there is one call a
    turn whatever `parallel` says."""
    calls = " | ".join(f"call_{i}" for i in range(len(functions)))
    rules = [f"start: analysis? ({calls})", analysis_rule(kit)]
    for i, (name, parameters) in enumerate(functions):
        head = (
            f"{kit.token(CHANNEL)} {literal(f'commentary to={FUNCTIONS}{name} ')} "
            f"{kit.token(CONSTRAIN)} {literal('json')} {kit.token(MESSAGE)}"
        )
        rules.append(f"call_{i}: {head} {kit.json(parameters)}")
    return "\n".join(rules)


def final_message_grammar(inner: str, kit: GrammarKit) -> str:
    """A top-level grammar (llguidance's JSON form) of an optional analysis message, then one
    `final` message whose body is the top-level grammar `inner` (a response_format or
    structured_outputs constraint): llguidance's JSON form, or Lark text (what
    `grammar_from_lark` gives)."""
    try:
        parsed = json.loads(inner)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        nested = parsed.get("grammars")
        if not (isinstance(nested, list) and nested and all(isinstance(g, dict) for g in nested)):
            raise ValueError("a top-level grammar needs a non-empty `grammars` list of objects")
    else:
        nested = [{"lark_grammar": inner}]
    # The first grammar is where the body starts; the others stay, for it to reference.
    body = [{**nested[0], "name": "final_body"}, *nested[1:]]
    head = f"{kit.token(CHANNEL)} {literal('final')} {kit.token(MESSAGE)}"
    lark = f"start: analysis? {head} @final_body\n{analysis_rule(kit)}"
    return json.dumps({"grammars": [{"lark_grammar": lark}, *body]})
