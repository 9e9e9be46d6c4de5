"""Bare JSON calls held to their grammar once opened: a lazy grammar.

A checkpoint whose tool parser also reads calls written as a bare JSON object
(worker/text/parsers/bare_json.py: Qwen2.5-Coder's GGUFs, whose `<tool_call>` rows are
untrained, and a model given tools through the Hermes fallback) writes a call as
`{"name": ..., "arguments": {...}}`. A small one often writes it broken: the command itself as
the name, or the tool's definition copied into the arguments until the braces no longer close
(the 0.5B default under Claude Code's Bash tool, docs/models.md). The parser then rightly reads
text, not a call, and the agent stalls.

llama.cpp answers this with a lazy grammar, applied once a trigger pattern shows; its Hermes
trigger is a reply opening `{"name": "<a tool>"`, bare or after a ```json fence. This is the
same idea. While a response with tools (tool_choice "auto") could still be opening that way,
nothing is masked; once it has written `{"name":` (blank text, and a "```json" header line,
allowed before), the response so far is fed to a matcher of `bare_call_grammar` and from
then on every token is masked by it: one call to a declared tool with arguments valid for its
parameters, optionally fenced, then the end. Any other opening (prose, a code block, a JSON
answer whose first key is not "name") switches the trigger off for good, and so does an opening still undecided
after `MAX_OPENING_TOKENS` tokens (a model writing blank lines without end). A JSON answer
whose first key is "name" is taken for a call: that is the price of the trigger.

One call, not several: allowed more, the 0.5B default answers a tool result by repeating its
call line after line until max_tokens (measured: 9 minutes of `touch done.txt` calls under
Claude Code). A call the model writes well formed, with "name" first, is not changed by the
mask (the grammar's JSON takes any whitespace); one cut off by max_tokens stays content, as
without the grammar. Not while reasoning is on (a think gate): the trigger is planned only for
answers without one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from worker.text.constraints.grammars import bare_call_grammar
from worker.text.constraints.llg import compile_matcher
from worker.text.parsers.bare_json import JSON_FENCE

log = logging.getLogger(__name__)

# A call opens within a few tokens (`{"name":` after a fence is under 10); a reply still
# undecided after this many (blank lines without end) switches the trigger off.
MAX_OPENING_TOKENS = 32
_NAME_KEY = '"name"'


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
        verdict = opens_call(opening)
        if verdict is None and len(self._tokens) < MAX_OPENING_TOKENS:
            return None  # undecided; past the bound (endless blanks, say), off
        if not verdict:
            self.state = "off"
            return None
        matcher = self._matcher
        if not all(matcher.consume_token(t) for t in self._tokens):
            log.debug("bare call opening not in the grammar: %r", opening[:40])
            self.state = "off"
            return None
        self.state = "armed"
        return matcher


def opens_call(text: str) -> bool | None:
    """Whether `text` (a response's opening, leading blanks stripped) opens a bare call:
    `{"name":`, or a "```json" header line and then that; None while it still may."""
    if text.startswith("```"):
        header, newline, rest = text.partition("\n")
        if not newline:
            return None if JSON_FENCE.startswith(header) or _is_fence(header) else False
        if not _is_fence(header):
            return False
        text = rest.lstrip()
        if not text:
            return None
    if not text or "```".startswith(text):
        return None
    if not text.startswith("{"):
        return False
    key = text[1:].lstrip()
    if len(key) <= len(_NAME_KEY):
        return None if _NAME_KEY.startswith(key) else False
    if not key.startswith(_NAME_KEY):
        return False
    after = key[len(_NAME_KEY) :].lstrip()
    return after.startswith(":") if after else None


def _is_fence(header: str) -> bool:
    return header.startswith(JSON_FENCE) and not header[len(JSON_FENCE) :].strip(" \t")


def bare_call_trigger(tokenizer: Any, tools: Sequence[Mapping[str, Any]]) -> BareCallTrigger | None:
    """The trigger for a request's tools, or None when llguidance cannot compile their
    grammar (the request is then served as before: the calls are read, not enforced)."""
    try:
        matcher = compile_matcher(tokenizer, bare_call_grammar(tokenizer, tools), "tools")
    except Exception as exc:  # noqa: BLE001 - any refusal means: serve unguarded
        log.info("bare tool calls not enforced for this request: %s", exc)
        return None
    return BareCallTrigger(tokenizer, matcher)
