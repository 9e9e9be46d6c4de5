"""Bare JSON calls held to their grammar from their first character: a lazy grammar.

A checkpoint whose tool parser also reads calls written as a bare JSON object
(worker/text/parsers/bare_json.py: Qwen2.5-Coder's GGUFs, whose `<tool_call>` rows are
untrained, and a model given tools through the Hermes fallback) writes a call as
`{"name": ..., "arguments": {...}}`. A small one often writes it broken: the command itself as
the name, a tool the client marked deferred, or the tool's definition copied into the
arguments until the braces no longer close (the 0.5B default under Claude Code's Bash tool,
docs/agents.md). The parser then rightly reads text, not a call, and the agent stalls.

llama.cpp answers this with a lazy grammar, applied from a trigger on; this is the same. While
a response with tools (tool_choice "auto") has written only blank text, nothing is masked. Once
its first non-blank text opens with `{` or with "```json", the response so far is fed to a
matcher of `bare_call_grammar` (one call to a declared tool with arguments valid for its
parameters, optionally in one ```json fence, then the end) and from then on every token is
masked by it, so the call the parser reads is well formed. One call, not several: allowed
more, the 0.5B default answers a tool result by repeating its call line after line until
max_tokens (measured: 9 minutes of `touch done.txt` calls under Claude Code). Any other opening
disarms the trigger for good: an answer in prose or in a code block is never touched, and a
call the model writes right anyway is written the same (the grammar allows every token of it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from worker.text.constraints.grammars import BARE_CALL_FENCE, bare_call_grammar
from worker.text.constraints.llg import compile_matcher

log = logging.getLogger(__name__)


class BareCallTrigger:
    """Watches a response's opening; `advance` returns the armed matcher when it triggers."""

    def __init__(self, tokenizer: Any, matcher: Any) -> None:
        self._tokenizer = tokenizer
        self._matcher = matcher  # compiled, not yet advanced
        self._tokens: list[int] = []
        self.state = "waiting"  # "waiting" | "armed" | "off"

    def advance(self, token: int) -> Any | None:
        """Takes the response's next token; the matcher (every token so far consumed) on the
        token that shows the response opens a call, else None."""
        if self.state != "waiting":
            return None
        self._tokens.append(token)
        opening = self._tokenizer.decode(self._tokens).lstrip()
        if not opening or (BARE_CALL_FENCE.startswith(opening) and opening != BARE_CALL_FENCE):
            return None  # blank so far, or a fence that may still say json
        if not (opening.startswith("{") or opening.startswith(BARE_CALL_FENCE)):
            self.state = "off"
            return None
        matcher = self._matcher
        if not all(matcher.consume_token(t) for t in self._tokens):
            # e.g. a fence header the grammar does not take ("```json5"): left to the parser.
            log.debug("bare call opening not in the grammar: %r", opening[:40])
            self.state = "off"
            return None
        self.state = "armed"
        return matcher


def bare_call_trigger(tokenizer: Any, tools: Sequence[Mapping[str, Any]]) -> BareCallTrigger | None:
    """The trigger for a request's tools, or None when llguidance cannot compile their
    grammar (the request is then served as before: the calls are read, not enforced)."""
    try:
        matcher = compile_matcher(tokenizer, bare_call_grammar(tokenizer, tools), "tools")
    except Exception as exc:  # noqa: BLE001 - any refusal means: serve unguarded
        log.info("bare tool calls not enforced for this request: %s", exc)
        return None
    return BareCallTrigger(tokenizer, matcher)
