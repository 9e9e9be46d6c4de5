"""Which constraint a request gets: a forced tool call, a response_format or structured_outputs
constraint, a thinking budget. On a harmony model (GPT-OSS) a forced call is one call message
and a constraint applies to the body of one `final` message, either after an optional
analysis message (worker/text/parsers/harmony.py).

With tools and tool_choice "auto" on a parser that reads bare JSON calls, a lazy grammar holds
a response that opens a call to it (bare_calls.py).

Returns the request's ConstraintProcessor, or None when nothing is constrained (the common
case costs nothing per token). A forced call and a response_format together are a 400: the
answer cannot be both a tool call and a JSON document.
"""

from __future__ import annotations

from typing import Any

from protocol.inputs import Constraint
from worker.runtime.errors import bad_request
from worker.text.constraints.bare_calls import bare_call_trigger
from worker.text.constraints.close_out import close_out_candidates
from worker.text.constraints.grammars import constraint_grammar, tool_call_grammar
from worker.text.constraints.llg import LlgKit, compile_matcher
from worker.text.constraints.processor import ConstraintProcessor
from worker.text.constraints.think_gate import HarmonyGate, ThinkGate
from worker.text.parsers import harmony


def plan_constraint(
    tokenizer: Any,
    model: Any,
    options: Any,
    constraint: Constraint | None,
    reasoning_open: bool,
    starts_inside: bool,
    max_tokens: int,
) -> ConstraintProcessor | None:
    """`model` is request_features.ModelFeatures, `options` its RequestOptions.

    A constrained answer after reasoning needs room: unless the request set a thinking
    budget, reasoning gets at most half of max_tokens (else a model that thinks too long, or
    a random one that never stops thinking, would never reach the constrained answer).
    """
    forced = options.tool_choice in ("required", "named")
    grammar = field = None
    if forced:
        if constraint is not None:
            named = getattr(constraint, "field", "response_format")
            raise bad_request(
                f"{named} cannot be combined with tool_choice 'required' or a named function"
            )
        if model.harmony:
            syntax: tuple[str, Any] = ("harmony", harmony.call_grammar)
        elif model.tools is not None:
            syntax = (model.tools.name, model.tools.grammar)
        else:
            raise bad_request("tool_choice: this model has no known tool-call format")
        tools = [t for t in options.tools if options.named in (None, t["function"]["name"])]
        parallel = options.parallel and options.named is None
        grammar, field = tool_call_grammar(tokenizer, syntax, tools, parallel), "tools"
    elif constraint is not None:
        grammar, field = constraint_grammar(constraint)
        if model.harmony:
            # The answer is a harmony `final` message whose body is constrained.
            try:
                grammar = harmony.final_message_grammar(grammar, LlgKit(tokenizer, lenient=True))
            except ValueError as exc:
                raise bad_request(f"{field} cannot be enforced: {exc}") from exc
    gate: ThinkGate | HarmonyGate | None = None
    if reasoning_open and model.think_ids is not None:
        gate = ThinkGate(*model.think_ids, starts_inside=starts_inside)
    elif model.harmony and (grammar is not None or options.thinking_budget is not None):
        vocab = tokenizer.get_vocab()
        gate = HarmonyGate(vocab[harmony.MESSAGE], vocab[harmony.END], tokenizer.decode)
    budget = options.thinking_budget if gate is not None else None
    if gate is not None and grammar is not None and budget is None:
        budget = max(1, max_tokens // 2)
    trigger = None
    if grammar is None and gate is None and _guards_bare_calls(model, options):
        trigger = bare_call_trigger(tokenizer, options.tools)
    if grammar is None and budget is None and trigger is None:
        return None
    matcher = compile_matcher(tokenizer, grammar, field) if grammar is not None else None
    vocab = len(getattr(tokenizer, "_tokenizer", tokenizer))
    return ConstraintProcessor(
        matcher,
        vocab_words=(vocab + 31) // 32,
        eos_ids=sorted(tokenizer.eos_token_ids),
        gate=gate,
        thinking_budget=budget,
        # Not for a lazy grammar: a bare call cut off by max_tokens stays content (closing it
        # would hand a client a call with, say, half a path in its command).
        max_tokens=max_tokens if matcher is not None else None,
        close_candidates=close_out_candidates(tokenizer) if matcher is not None else None,
        trigger=trigger,
    )


def _guards_bare_calls(model: Any, options: Any) -> bool:
    """A request with tools, tool_choice "auto", on a parser that reads bare JSON calls."""
    tools = model.tools
    return (
        bool(options.tools)
        and options.tool_choice == "auto"
        and not model.harmony
        and tools is not None
        and tools.bare_calls
    )
