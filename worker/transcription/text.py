"""Text deltas of a transcript that grows one audio window at a time.

After each window the engine has the whole transcript so far (decoding all tokens at once is
what makes the final text equal a direct mlx-audio run). `TranscriptDeltas` turns those
snapshots into deltas whose concatenation is the final text, and never sends anything that a
later window could still change:
- a trailing U+FFFD: the bytes of a multi-byte character may be split across windows, so the
  tokens decoded so far end in a replacement character that the next window completes;
- trailing whitespace: the final text is stripped, and the next window may start a word;
- leading whitespace: Whisper's text starts with a space that the final text drops.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

_UNSTABLE_TAIL = "\ufffd \t\r\n"


class TranscriptDeltas:
    def __init__(self) -> None:
        self._sent = ""

    @property
    def sent(self) -> str:
        return self._sent

    def update(self, transcript: str) -> str:
        """The new stable text of the transcript so far ("" when none)."""
        stable = transcript.lstrip().rstrip(_UNSTABLE_TAIL)
        if not stable.startswith(self._sent):
            return ""  # should not happen; the final delta sorts it out
        delta = stable[len(self._sent) :]
        self._sent = stable
        return delta

    def finish(self, transcript: str) -> str:
        """The rest of the final transcript (stripped), after everything sent before."""
        final = transcript.strip()
        if final.startswith(self._sent):
            delta = final[len(self._sent) :]
        else:
            # A decoder that rewrote text it had already produced: the deltas cannot match.
            log.warning("transcript changed after it was streamed; deltas differ from the text")
            common = _common_prefix(final, self._sent)
            delta = final[common:]
        self._sent += delta
        return delta


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
