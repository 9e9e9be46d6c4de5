"""Stop strings over streamed text: emit what is safe, hold back what could start a stop string.

Pure Python (no MLX), so it is unit-tested on its own. The text arrives in increments (one
detokenized segment per token); a stop string may span several increments. Invariants:
- no character of a stop string is ever emitted;
- the emitted text, joined, is the generated text truncated just before the earliest stop string
  found (or all of it, after `flush`, when none was found).
"""

from __future__ import annotations

from collections.abc import Iterable


class StopStringMatcher:
    """Feeds text increments, returns the text safe to emit now and whether a stop string hit."""

    def __init__(self, stops: Iterable[str]) -> None:
        # An empty stop string would match everywhere; OpenAI-style APIs treat it as absent.
        self._stops = tuple(dict.fromkeys(s for s in stops if s))
        self._held = ""
        self._stopped = False
        self.matched = ""  # the stop string found (the earliest; the first listed on a tie)

    @property
    def active(self) -> bool:
        """Whether there is any stop string to look for."""
        return bool(self._stops)

    @property
    def stopped(self) -> bool:
        return self._stopped

    def feed(self, text: str) -> tuple[str, bool]:
        """Adds `text`; returns (text safe to emit now, whether a stop string was completed).

        After a stop string was found the matcher is spent: later text is dropped.
        """
        if self._stopped:
            return "", True
        if not self._stops:
            return text, False
        buffer = self._held + text
        cut = self._earliest_stop(buffer)
        if cut is not None:
            self.matched = next(s for s in self._stops if buffer.find(s) == cut)
            self._held = ""
            self._stopped = True
            return buffer[:cut], True
        keep = self._partial_suffix_length(buffer)
        self._held = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep], False

    def flush(self) -> str:
        """The held-back text, at the end of generation (it never became a stop string)."""
        if self._stopped:
            return ""
        held, self._held = self._held, ""
        return held

    def _earliest_stop(self, buffer: str) -> int | None:
        found = [i for i in (buffer.find(s) for s in self._stops) if i >= 0]
        return min(found) if found else None

    def _partial_suffix_length(self, buffer: str) -> int:
        """Length of the longest suffix of `buffer` that is a proper prefix of some stop string."""
        longest = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buffer)), longest, -1):
                if buffer.endswith(stop[:n]):
                    longest = n
                    break
        return longest
