"""What speculation did, counted as vLLM counts it (its spec_decode metrics) and per request.

A draft is one sequence's proposals in one verification; its draft tokens are the proposals,
its accepted tokens those the sequence kept, and position j counts the drafts whose token j
(from 0) was accepted. The worker's totals reach /metrics under vLLM's names
(gateway/metrics/worker.py); each request's own go into its log line.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class SpecCounts:
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)

    def add(self, proposed: int, accepted: int) -> None:
        if proposed <= 0:
            return
        self.drafts += 1
        self.draft_tokens += proposed
        self.accepted_tokens += accepted
        per_position = self.accepted_per_position
        if len(per_position) < accepted:
            per_position.extend([0] * (accepted - len(per_position)))
        for j in range(accepted):
            per_position[j] += 1

    def since(self, before: SpecCounts) -> SpecCounts:
        """What was counted after `before` (an earlier copy of these counts)."""
        per_position = list(self.accepted_per_position)
        for j, n in enumerate(before.accepted_per_position):
            per_position[j] -= n
        return SpecCounts(
            self.drafts - before.drafts,
            self.draft_tokens - before.draft_tokens,
            self.accepted_tokens - before.accepted_tokens,
            per_position,
        )

    def copy(self) -> SpecCounts:
        return SpecCounts(
            self.drafts, self.draft_tokens, self.accepted_tokens, list(self.accepted_per_position)
        )

    def describe(self) -> str:
        """The request log's words: proposals accepted of proposed, in how many drafts."""
        if not self.drafts:
            return ""
        rate = self.accepted_tokens / self.draft_tokens
        return (
            f" spec={self.accepted_tokens}/{self.draft_tokens} accepted ({rate:.0%}) "
            f"in {self.drafts} drafts"
        )
