"""Prefill chunks sized so that the streams already decoding keep their pace.

One step of the batch engine decodes a token for every generating request and then feeds one
prefill chunk to every request still prefilling, so every decoding stream waits for that chunk.
With mlx-lm's fixed chunks (prefill_step_size, 2,048 tokens) a long prompt arriving multiplies
the other streams' inter-token latency for as long as its prefill lasts: each chunk of a 30K
prompt attends to everything before it, and on a CPU one chunk takes many decode steps.

The pacer times the steps. A step without prefill measures the decode step; a step with one
measures what its chunk took (the step's time beyond the decode step). While requests decode,
the chunk is sized so that it takes `ratio` times their decode step, so their inter-token
latency stays within about 1 + `ratio` of what it is alone. A chunk's time is not proportional
to its tokens (each prefill call has a fixed cost: the model call, an eval, mlx-lm's
`clear_cache`), so the size is steered rather than computed: after each paced step it is
scaled by budget / what the chunk took (growing at most 2x a step), and kept as a fraction so that
growth from one token is not lost to rounding; it settles where a chunk takes the budget, and
follows the cost per token as the context grows. The decode step is measured again (one step
without prefill) when the number of decoding requests changes and every PROBE_EVERY paced
steps. With nothing decoding, chunks are the whole prefill_step_size: a prefill alone runs at
full speed, and a request alone is prefilled exactly as `mlx_lm.stream_generate` prefills it
(the same chunks, so the same floats: greedy output equal token for token).

The floor: a chunk is one token at least, and one prompt token can cost more than the budget. A
prefill call is a forward pass of its own, and where the weights dominate (real models, and a
GPU) one token costs about a whole decode step: no chunk meets a budget of 0.7 of one, and one
token a step would make a 30K prompt beside one stream take 30K steps. So the floor is measured:
the step after each decode-only one gives every prefilling request one token (its time beyond
the decode step is what one token costs; the floor is the smaller of the last two such
measurements, so that one slow step does not raise it). When the floor is over the budget, the
budget becomes FLOOR_SLACK times the floor: the streams' steps are about as long as the floor
makes them anyway, and the chunk grows while more tokens cost little more than one (on a
weight-bound model, many; where each token reads a long context, as on the tiny checkpoints on
a CPU, few).

`ratio` 0 turns pacing off (every chunk is prefill_step_size, as in mlx-lm). Chunk sizes follow
wall-clock time, so they differ between runs: the ranks of a distributed group, which must all
do the same work, run unpaced (worker/distributed).
"""

from __future__ import annotations

DEFAULT_RATIO = 0.7  # a paced step takes about 1.7x the decode step alone
PROBE_EVERY = 64  # paced steps between two measurements of the decode step
FIRST_CHUNK = 16  # prompt tokens per request in the first paced step
SMOOTHING = 0.5  # weight of the newest decode-step measurement
MAX_SCALE = 2.0  # the most one step's measurement grows the chunk
FLOOR_SLACK = 1.25  # when one token is over budget, a chunk may take this times what one took
FLOORS_KEPT = 2  # one-token measurements the floor is the least of


class PrefillPacer:
    """Chooses each step's prefill chunk (`chunk`) and learns from the step's time (`record`)."""

    def __init__(self, max_chunk: int, ratio: float = DEFAULT_RATIO) -> None:
        if max_chunk < 1:
            raise ValueError("max_chunk must be at least 1")
        if ratio < 0:
            raise ValueError("ratio must be >= 0")
        self.max_chunk = max_chunk
        self.ratio = ratio
        self._decode_s: float | None = None  # one decode step, for `_decode_n` requests
        self._decode_n = 0
        self._size = float(min(FIRST_CHUNK, max_chunk))  # tokens per prefilling request
        self._floors: list[float] = []  # what the latest one-token chunks took
        self._floor_due = False  # the next paced step measures the floor (one token)
        self._since_probe = 0
        self._planned = 0  # requests decoding in the step in progress

    @property
    def enabled(self) -> bool:
        return self.ratio > 0

    def chunk(self, decoding: int, prefilling: int) -> int:
        """Prompt tokens each prefilling request gets in the next step, given how many requests
        decode and prefill in it: 0 makes it a decode-only step that measures the decode step."""
        self._planned = decoding
        if not self.enabled or decoding == 0 or prefilling == 0:
            return self.max_chunk
        if self._decode_s is None or self._decode_n != decoding:
            return 0
        if self._since_probe >= PROBE_EVERY:
            return 0
        if self._floor_due:
            return 1
        return _tokens(self._size)

    def record(self, wall_s: float, prompt_tokens: int) -> None:
        """What the step planned by the last `chunk` took, and the prompt tokens it prefilled."""
        decoding = self._planned
        if not self.enabled or decoding == 0:
            return
        if prompt_tokens == 0:
            same = self._decode_s is not None and self._decode_n == decoding
            self._decode_s = _smooth(self._decode_s, wall_s) if same else wall_s
            self._decode_n = decoding
            self._since_probe = 0
            self._floor_due = True
            return
        if self._decode_s is None or self._decode_n != decoding:
            return  # the decode step it ran beside is not known: nothing to learn
        took = wall_s - self._decode_s
        self._since_probe += 1
        if self._floor_due:  # the step measured the floor: one token per prefilling request
            self._floor_due = False
            self._floors = [*self._floors, took][-FLOORS_KEPT:]
            return
        budget = self.ratio * self._decode_s
        floor = min(self._floors, default=0.0)
        if floor > budget:
            budget = FLOOR_SLACK * floor  # no chunk meets the budget: see the docstring
        self._size = self._steer(self._size, budget, took)

    def _steer(self, size: float, budget: float, took: float) -> float:
        """`size` scaled by budget / what its chunk took, growing at most MAX_SCALE times."""
        scale = budget / max(took, budget / MAX_SCALE)
        return min(float(self.max_chunk), max(1.0, size * scale))


def _tokens(size: float) -> int:
    return max(1, int(size + 1e-9))  # (0.01 / 0.016 x 16 is 10 tokens, not 9.999...)


def _smooth(previous: float | None, new: float) -> float:
    return new if previous is None else (1 - SMOOTHING) * previous + SMOOTHING * new
