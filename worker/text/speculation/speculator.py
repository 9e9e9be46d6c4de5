"""The batch's speculation state: a proposer, each sequence's gate and counts, by uid.

The generation batch asks `lengths` (how many tokens each row may propose this step, no model
work), then `propose` once it knows each row's last token, then `record`s each row's
verification. Sequences are known by their BatchGenerator uid; the batch engine calls
`forget` when a request leaves and gets its counts for the request's log line.
"""

from __future__ import annotations

from typing import Protocol

from worker.text.speculation.adaptive import BatchGate, DraftGate
from worker.text.speculation.counters import SpecCounts
from worker.text.speculation.ngram import NgramIndex


class Proposer(Protocol):
    """Makes each row's proposals: up to `lengths[i]` tokens to follow `tokens[i] + [last[i]]`."""

    def propose(
        self, uids: list[int], tokens: list[list[int]], last: list[int], lengths: list[int]
    ) -> list[list[int]]: ...

    def forget(self, uid: int) -> None: ...


class NgramProposer:
    """Prompt lookup (worker/text/speculation/ngram.py), one index per sequence."""

    def __init__(self, min_n: int, max_n: int) -> None:
        self._min_n, self._max_n = min_n, max_n
        self._indexes: dict[int, NgramIndex] = {}

    def propose(
        self, uids: list[int], tokens: list[list[int]], last: list[int], lengths: list[int]
    ) -> list[list[int]]:
        out: list[list[int]] = []
        for uid, seq, token, k in zip(uids, tokens, last, lengths, strict=True):
            if k <= 0:
                out.append([])
                continue
            index = self._indexes.get(uid)
            if index is None:
                index = self._indexes[uid] = NgramIndex(self._min_n, self._max_n)
            out.append(index.propose(seq, token, k))
        return out

    def forget(self, uid: int) -> None:
        self._indexes.pop(uid, None)


class Speculator:
    """See the module docstring; `max_length` is --num-draft-tokens."""

    def __init__(self, proposer: Proposer, max_length: int) -> None:
        self.proposer = proposer
        self.max_length = max_length
        self.totals = SpecCounts()
        self.batch_gate = BatchGate()
        self._gates: dict[int, DraftGate] = {}
        self._counts: dict[int, SpecCounts] = {}

    def lengths(self, uids: list[int], room: list[int]) -> list[int]:
        """Tokens each row may propose this step: its gate's length, and never more than its
        remaining max_tokens allow (the step emits the row's last token as well)."""
        out = []
        for uid, left in zip(uids, room, strict=True):
            gate = self._gates.get(uid)
            if gate is None:
                gate = self._gates[uid] = DraftGate(self.max_length)
            out.append(min(gate.next_length(), left - 1) if left > 1 else 0)
        return out

    def propose(
        self, uids: list[int], tokens: list[list[int]], last: list[int], lengths: list[int]
    ) -> list[list[int]]:
        return self.proposer.propose(uids, tokens, last, lengths)

    def record(self, uid: int, proposed: int, accepted: int) -> None:
        if proposed <= 0:
            return
        gate = self._gates.get(uid)
        if gate is not None:
            gate.record(proposed, accepted)
        self._counts.setdefault(uid, SpecCounts()).add(proposed, accepted)
        self.totals.add(proposed, accepted)

    def forget(self, uid: int) -> SpecCounts:
        """Drops a sequence's state; returns what it counted."""
        self._gates.pop(uid, None)
        self.proposer.forget(uid)
        return self._counts.pop(uid, None) or SpecCounts()
