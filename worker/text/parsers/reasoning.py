"""Reasoning ("thinking") text: split `<think>...</think>` off the answer, streaming.

Families:
- `qwen3`: the answer may open with `<think>`; when the prompt already ends inside a think
  block (Qwen3 "thinking" checkpoints and templates that put `<think>` into the generation
  prompt), the output starts in reasoning. Where it starts is decided from the prompt's tail.
- `deepseek_r1`: the output always starts in reasoning (R1's template opens the block, older
  versions let the model write `<think>` itself) and reasoning ends at the first `</think>`.

Reasoning can only begin at the start of the answer and ends at the first end marker; after
that everything is content (a later `<think>` is just text). The newlines around the markers
are layout, not text: they are dropped at both ends of the reasoning and before the answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.text.parsers.base import split_safe


@dataclass(frozen=True)
class ReasoningFormat:
    """A reasoning syntax: its markers and whether the output always starts inside it."""

    name: str
    start: str = "<think>"
    end: str = "</think>"
    always_starts_inside: bool = False

    def starts_inside(self, prompt_tail: str) -> bool:
        """Whether the answer begins in reasoning, given the end of the prompt text."""
        if self.always_starts_inside:
            return True
        opened = prompt_tail.rfind(self.start)
        return opened != -1 and opened > prompt_tail.rfind(self.end)


QWEN3 = ReasoningFormat("qwen3")
DEEPSEEK_R1 = ReasoningFormat("deepseek_r1", always_starts_inside=True)
FORMATS = {f.name: f for f in (QWEN3, DEEPSEEK_R1)}


class ReasoningParser:
    """Splits one response's text into (content, reasoning) pieces as it arrives."""

    def __init__(self, fmt: ReasoningFormat, starts_inside: bool) -> None:
        self._fmt = fmt
        self._default_inside = starts_inside
        # "start": before any text (a start marker may come); "reasoning"; "after": right
        # after the end marker (newlines dropped); "content": plain pass-through.
        self._state = "start"
        self._buf = ""
        self._reasoned = False  # some reasoning text went out

    @property
    def in_reasoning(self) -> bool:
        return self._state == "reasoning" or (self._state == "start" and self._default_inside)

    def feed(self, text: str) -> tuple[str, str]:
        if self._state == "content":
            return text, ""
        self._buf += text
        content, reasoning = [], []
        while self._buf:
            if self._state == "start":
                if not self._at_start():
                    break
            elif self._state == "reasoning":
                if not self._reasoned:
                    # Newlines right after the start marker are layout.
                    self._buf = self._buf.lstrip("\n")
                    if not self._buf:
                        break
                found = self._buf.find(self._fmt.end)
                if found == -1:
                    safe, self._buf = split_safe(self._buf, (self._fmt.end,))
                    # Trailing newlines may be the layout before the end marker.
                    kept = len(safe) - len(safe.rstrip("\n"))
                    if kept:
                        safe, self._buf = safe[:-kept], safe[-kept:] + self._buf
                    self._reasoned = self._reasoned or bool(safe)
                    reasoning.append(safe)
                    break
                reasoning.append(self._buf[:found].rstrip("\n"))
                self._buf = self._buf[found + len(self._fmt.end) :]
                self._state = "after"
            elif self._state == "after":
                stripped = self._buf.lstrip("\n")
                if not stripped:
                    self._buf = ""
                    break
                self._buf, self._state = stripped, "content"
            else:
                content.append(self._buf)
                self._buf = ""
        return "".join(content), "".join(reasoning)

    def finish(self) -> tuple[str, str]:
        """End of generation: what was held back goes where it was heading."""
        held, self._buf = self._buf, ""
        if self._state == "reasoning" or (self._state == "start" and self._default_inside):
            return "", held.rstrip("\n")
        if self._state == "after":
            return "", ""
        return held, ""

    def _at_start(self) -> bool:
        """Resolves the start: a start marker (after blank lines) or not; False: need more."""
        stripped = self._buf.lstrip()
        if stripped.startswith(self._fmt.start):
            self._buf = stripped[len(self._fmt.start) :]
            self._state = "reasoning"
            return bool(self._buf)
        if self._fmt.start.startswith(stripped):
            return False  # blank so far, or a partial start marker
        if self._default_inside:
            self._state = "reasoning"
        else:
            self._state = "content"
        return True
