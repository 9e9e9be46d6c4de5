"""Which waiting inputs the next forward pass embeds: length buckets under a token budget.

Every input of every admitted request waits as a `Pending(key, length)`, oldest first. A pass
pads its rows to its longest one, so rows of similar length share a pass: the planner sorts a
window of the oldest waiting inputs by length and cuts the sorted run into buckets whose padded
size (rows x longest) fits `max_tokens` and whose rows fit `max_rows`; the pass runs the bucket
that holds the oldest input. Invariants: the oldest input is always in the pass (so every
request finishes, and none waits behind later ones forever), a pass never exceeds the budget
unless one input alone does (it then runs alone: the model's length limit bounds it), and the
window keeps planning cost bounded however many inputs wait.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

WINDOW_PASSES = 4  # the window holds about this many passes' worth of the oldest inputs


@dataclass(frozen=True, slots=True)
class Pending:
    key: Hashable  # the engine's (request, input index)
    length: int  # tokens


def plan_pass(pending: Sequence[Pending], max_tokens: int, max_rows: int) -> list[Pending]:
    """The inputs of the next pass (a non-empty list when anything is pending), shortest first."""
    if not pending:
        return []
    window = _window(pending, max_tokens * WINDOW_PASSES, max_rows * WINDOW_PASSES)
    oldest = window[0]
    ordered = sorted(window, key=lambda p: p.length)  # stable: ties keep their age order
    bucket: list[Pending] = []
    for item in ordered:
        rows = len(bucket) + 1
        if bucket and (rows > max_rows or rows * item.length > max_tokens):
            if any(p is oldest for p in bucket):
                return bucket
            bucket = []
        bucket.append(item)
    return bucket


def _window(pending: Sequence[Pending], tokens: int, rows: int) -> list[Pending]:
    window: list[Pending] = []
    total = 0
    for item in pending:
        if window and (len(window) >= rows or total + item.length > tokens):
            break
        window.append(item)
        total += item.length
    return window
