"""Prompt lookup: propose the continuation of the most recent earlier match of the last n tokens.

A coding agent's output re-writes much of its prompt (a file with an edit, tool arguments that
quote the context), and a greedy model repeats itself: where the last n tokens of prompt +
output occurred before, what followed them then is a good guess of what follows now. n goes
from `max_n` down to `min_n`, the longest match winning; the most recent occurrence is taken
(it is the one most like the current context); a match near the end is continued past it as a
repeating pattern would be. No model work: one dict per n maps each n-gram
to where its latest occurrence ended, extended incrementally as the sequence grows.
"""

from __future__ import annotations


class NgramIndex:
    """The n-grams of one sequence (prompt + generated tokens), for `propose`."""

    def __init__(self, min_n: int, max_n: int) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(f"n-gram sizes must satisfy 1 <= min <= max, got {min_n}, {max_n}")
        self._sizes = tuple(range(max_n, min_n - 1, -1))  # longest first
        # n -> n-gram -> end (exclusive) of its latest occurrence in the indexed tokens
        self._ends: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in self._sizes}
        self._indexed = 0  # how many tokens of the sequence are indexed

    def propose(self, tokens: list[int], last: int, k: int) -> list[int]:
        """Up to `k` tokens predicted to follow `tokens + [last]`: what followed the latest
        earlier occurrence of its last n tokens (`tokens` only ever grows between calls)."""
        self._extend(tokens)
        if k <= 0:
            return []
        tail = [*tokens[-(self._sizes[0] - 1) :], last] if self._sizes[0] > 1 else [last]
        for n in self._sizes:
            if len(tail) < n:
                continue
            end = self._ends[n].get(tuple(tail[-n:]))
            if end is not None:
                return _copy_from(tokens, last, end, k)
        return []

    def _extend(self, tokens: list[int]) -> None:
        if len(tokens) < self._indexed:
            raise ValueError("the sequence of an NgramIndex may only grow")
        for end in range(self._indexed + 1, len(tokens) + 1):
            for n, ends in self._ends.items():
                if end >= n:
                    ends[tuple(tokens[end - n : end])] = end
        self._indexed = len(tokens)


def _copy_from(tokens: list[int], last: int, start: int, k: int) -> list[int]:
    """k tokens of `tokens + [last] + guess` from `start`: a copy that may run into the text
    it is predicting, as LZ77 copies do, so a repeating pattern is continued past its end."""
    guess = tokens[start : start + k]
    n = len(tokens)
    while len(guess) < k:
        p = start + len(guess)
        guess.append(last if p == n else guess[p - n - 1])
    return guess
