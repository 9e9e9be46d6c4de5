"""How many tokens one sequence proposes next, from how its recent proposals fared (DraftGate),
and whether a batch of several rows verifies at all, from what its steps took (BatchGate).

A rejected proposal costs a verification position (and, in a batch, widens the pass for every
row), so each sequence keeps its own gate:

- the length follows the latest run: after a verification that accepted everything it grows
  by one (up to the server's `--num-draft-tokens`), otherwise it becomes what was accepted + 1;
- the acceptance rate (accepted / proposed, a moving average) below `MIN_RATE` pauses the
  sequence's proposals for a number of steps that doubles with each pause in a row (up to
  `MAX_PAUSE`) and starts again at `FIRST_PAUSE` once a probe after a pause is accepted. So
  free-form text, where proposals rarely hold, costs a probe every few dozen steps, and an
  answer that starts quoting its prompt is picked up within one pause.

Only token counts steer DraftGate (no clocks). BatchGate times steps, so ranks of a
distributed group could decide differently: speculation is refused with a group (config.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

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


EXPLORE_EVERY = 16  # steps of the better way between two tries of the other
EXPLORE_STEPS = 3  # steps a try of the other way lasts (its first is not timed)
RATE_SMOOTHING = 0.3  # weight of the latest timed step in a way's tokens/s


class BatchGate:
    """Whether a step of a batch of several rows may verify proposals, by what pays.

    Verifying costs every row of the batch the widened pass, while the per-sequence gates only
    see acceptance. On a CPU a batch of several rows is compute-bound already, so a verified
    position is not free, and speculation that pays for one stream can slow a batch of
    free-form streams. Per batch size, the gate keeps the output tokens/s of steps that
    verified and of steps that did not (moving averages), each timed from its start to the
    next step's start while the batch keeps its size: a plain decode step overlaps with its
    successor, so start to start is what a step costs. The first step after a change of way
    or of batch size is not timed (it finishes another step's pass in flight). The batch verifies while that
    way is at least as fast, and every `EXPLORE_EVERY` steps tries the other way for
    `EXPLORE_STEPS` steps, so that a change (the streams start quoting their prompts) is seen.
    A batch of one always may verify: its sequence's own gate decides.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        explore_every: int = EXPLORE_EVERY,
        explore_steps: int = EXPLORE_STEPS,
    ) -> None:
        self._clock = clock
        self._explore_every = explore_every
        self._explore_steps = explore_steps
        self._rates: dict[tuple[int, bool], float] = {}
        self._steps: dict[int, int] = {}  # steps of a batch size, for the exploration turns
        self._started = 0.0
        # The step in flight: its start, size, way, whether it is timed, the tokens it returned
        self._open: tuple[float, int, bool, bool, int] | None = None
        self._last: tuple[int, bool] | None = None  # the previous step's size and way

    def allows(self, size: int) -> bool:
        """Called as a step starts: closes the previous step's timing; whether this step may
        verify."""
        self._started = self._clock()
        self._close(size)
        if size <= 1:
            return True
        verified, plain = self._rates.get((size, True)), self._rates.get((size, False))
        if verified is None:
            return True
        if plain is None:
            return False
        better = verified >= plain
        step = self._steps.get(size, 0)
        self._steps[size] = step + 1
        exploring = step % self._explore_every >= self._explore_every - self._explore_steps
        return better != exploring

    def ran(self, size: int, verified: bool, tokens: int) -> None:
        """What the step that just started did: whether it verified, the tokens it returned."""
        timed = self._last == (size, verified)  # else it finishes another step's pass
        self._last = (size, verified)
        self._open = (self._started, size, verified, timed, tokens)

    def rate(self, size: int, verified: bool) -> float | None:
        """The tokens/s of that way at that batch size so far (None: not timed yet)."""
        return self._rates.get((size, verified))

    def _close(self, size: int) -> None:
        if self._open is None:
            return
        started, open_size, verified, timed, tokens = self._open
        self._open = None
        elapsed = self._started - started
        if not timed or open_size != size or open_size <= 1 or elapsed <= 0:
            return
        rate = tokens / elapsed
        key = (open_size, verified)
        old = self._rates.get(key)
        self._rates[key] = rate if old is None else old + RATE_SMOOTHING * (rate - old)
