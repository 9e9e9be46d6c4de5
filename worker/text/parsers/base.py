"""Building blocks every output parser shares: the parsed-delta type, marker scanning, tool-call ids.

Generated text arrives in pieces that may split a marker (`<tool_call>`, `</think>`) anywhere,
so the parsers hold back only the tail that could still be the start of a marker and release
everything else at once. `ToolCallEmitter` turns "a call began / more argument text / it ended"
into protocol `ToolCallDelta` pieces with their index and id.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.messages import ToolCallDelta


@dataclass(slots=True)
class ParsedDelta:
    """One feed's worth of output, split: visible text, reasoning text, tool-call pieces."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)


def find_first(text: str, markers: Iterable[str], start: int = 0) -> tuple[int, str] | None:
    """The earliest complete marker in `text[start:]` (the longest one on a tie), or None."""
    best: tuple[int, str] | None = None
    for marker in markers:
        index = text.find(marker, start)
        if index != -1 and (
            best is None or index < best[0] or (index == best[0] and len(marker) > len(best[1]))
        ):
            best = (index, marker)
    return best


def partial_marker_len(text: str, markers: Iterable[str]) -> int:
    """Length of the longest tail of `text` that is a proper prefix of one of `markers`."""
    longest = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return longest


def split_safe(text: str, markers: Iterable[str]) -> tuple[str, str]:
    """(text that cannot be part of a marker, tail to hold back until more text arrives)."""
    keep = partial_marker_len(text, markers)
    if keep == 0:
        return text, ""
    return text[:-keep], text[-keep:]


def new_call_id() -> str:
    """An OpenAI-style tool-call id: "call_" and 24 random alphanumerics."""
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return "call_" + "".join(secrets.choice(alphabet) for _ in range(24))


class ToolCallEmitter:
    """Collects the tool-call pieces of one response between two `take()`s.

    A call's first piece carries its index, id and name; later pieces carry argument text.
    Argument text of one call within one feed is merged into a single piece. With
    `parallel=False` every call after the first is dropped (OpenAI `parallel_tool_calls`).
    """

    def __init__(self, parallel: bool = True) -> None:
        self._parallel = parallel
        self._pieces: list[ToolCallDelta] = []
        self._index = -1
        self._dropping = False
        self.count = 0  # calls begun (and kept) so far

    def begin(self, name: str) -> None:
        if not self._parallel and self.count >= 1:
            self._dropping = True
            return
        self._dropping = False
        self._index = self.count
        self.count += 1
        self._pieces.append(ToolCallDelta(index=self._index, id=new_call_id(), name=name))

    def args(self, text: str) -> None:
        if self._dropping or not text or self._index < 0:
            return
        last = self._pieces[-1] if self._pieces else None
        if last is not None and last.index == self._index:
            last.arguments += text
        else:
            self._pieces.append(ToolCallDelta(index=self._index, arguments=text))

    def end(self) -> None:
        self._dropping = False

    def take(self) -> list[ToolCallDelta]:
        pieces, self._pieces = self._pieces, []
        return pieces
