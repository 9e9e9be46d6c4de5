"""One delta per request and step, also when speculation returns several tokens in one step.

A step that returns a request's pending token and its accepted proposals makes one Delta per
token (worker/text/request.py). They leave as one: vLLM counts inter-token latency per engine
step, and the gateway's metrics take one delta as one step's output. A delta joins the one
before it (same request) unless that would reorder output: a merged delta renders reasoning,
then text, then tool calls, so a delta whose first kind comes before the earlier one's last
kind stays separate (a model that writes text after a tool call).
"""

from __future__ import annotations

from protocol.messages import Delta

_REASONING, _TEXT, _TOOLS = 0, 1, 2


def merge_step_deltas(deltas: list[Delta]) -> list[Delta]:
    """`deltas` with each run of one request's deltas merged where order allows."""
    out: list[Delta] = []
    for delta in deltas:
        last = out[-1] if out else None
        if last is not None and last.request_id == delta.request_id and _in_order(last, delta):
            _absorb(last, delta)
        else:
            out.append(delta)
    return out


def _kinds(delta: Delta) -> list[int]:
    present = ((_REASONING, delta.reasoning), (_TEXT, delta.text), (_TOOLS, delta.tool_calls))
    return [kind for kind, value in present if value]


def _in_order(last: Delta, delta: Delta) -> bool:
    if last.finish_reason is not None:
        return False
    old, new = _kinds(last), _kinds(delta)
    return not old or not new or new[0] >= old[-1]


def _absorb(last: Delta, delta: Delta) -> None:
    """`delta`'s output after `last`'s, and its end (finish, usage, error, stop string)."""
    last.text += delta.text
    last.reasoning += delta.reasoning
    last.token_ids = [*last.token_ids, *delta.token_ids]
    last.tool_calls = [*last.tool_calls, *delta.tool_calls]
    if delta.logprobs is not None:
        last.logprobs = [*(last.logprobs or []), *delta.logprobs]
    last.finish_reason = delta.finish_reason
    last.usage = delta.usage or last.usage
    last.error = delta.error
    last.stop_sequence = delta.stop_sequence
