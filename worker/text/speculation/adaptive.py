"""How many tokens one sequence proposes next, from how its recent proposals fared.

A rejected proposal costs a verification position (and, in a batch, widens the pass for every
row), so each sequence keeps its own gate:

- the length follows the latest run: after a verification that accepted everything it grows
  by one (up to the server's `--num-draft-tokens`), otherwise it becomes what was accepted + 1;
- the acceptance rate (accepted / proposed, a moving average) below `MIN_RATE` pauses the
  sequence's proposals for a number of steps that doubles with each pause in a row (up to
  `MAX_PAUSE`) and starts again at `FIRST_PAUSE` once a probe after a pause is accepted. So
  free-form text, where proposals rarely hold, costs a probe every few dozen steps, and an
  answer that starts quoting its prompt is picked up within one pause.

Only token counts steer it (no clocks), so every rank of a distributed group would decide the
same.
"""

from __future__ import annotations

SMOOTHING = 0.3  # weight of the latest verification in the acceptance rate
MIN_RATE = 0.3  # below this acceptance rate proposals pause
FIRST_PAUSE = 4  # steps without proposals after a first poor stretch
MAX_PAUSE = 64  # the longest pause (steps)


class DraftGate:
    """One sequence's proposal length (`next_length`, 0 while paused) and its history."""

    __slots__ = ("max_length", "_length", "_rate", "_pause_left", "_next_pause")

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length
        self._length = max_length
        self._rate = 1.0  # optimistic: a new sequence tries at once
        self._pause_left = 0
        self._next_pause = FIRST_PAUSE

    @property
    def paused(self) -> bool:
        return self._pause_left > 0

    def next_length(self) -> int:
        """Tokens to propose this step (0: none); counts a step of a pause."""
        if self._pause_left:
            self._pause_left -= 1
            return 0
        return self._length

    def record(self, proposed: int, accepted: int) -> None:
        """What one verification of this sequence's `proposed` tokens accepted."""
        if proposed <= 0:
            return
        self._rate += SMOOTHING * (accepted / proposed - self._rate)
        if accepted == proposed:
            self._length = min(self.max_length, proposed + 1)
        else:
            self._length = max(1, accepted + 1)
        if self._rate < MIN_RATE:
            self._pause_left = self._next_pause
            self._next_pause = min(MAX_PAUSE, 2 * self._next_pause)
            # The probe after the pause decides alone whether proposing resumes.
            self._rate = MIN_RATE
        elif accepted:
            self._next_pause = FIRST_PAUSE
