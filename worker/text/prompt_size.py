"""Prompts longer than the context, refused without tokenizing all of them.

A request body may hold megabytes of text (up to --max-body-mb). Tokenizing all of it takes the
tokenizer tens of seconds and gigabytes it does not give back, on the thread that serves
everyone, only to learn that the prompt does not fit. Two bounds make that cheap:

- **Certain overflow, before tokenizing.** No token stands for more text than the longest
  token's stored form (`longest_token_bytes`: a byte-level BPE token's string is one character a
  byte; SentencePiece's "▁" and WordPiece's "##" only make the stored form longer than the text
  it stands for). So a text of C characters (at most as many as its bytes) is at least
  C / longest tokens: past the context when C >= context * longest.
- **Tokenizing that stops past the context.** A large text (>= LARGE_TEXT_CHARS) is counted
  in pieces cut at whitespace, and counting stops as soon as the pieces hold more tokens than
  the context, with a margin per cut (tokenizing a piece apart can differ from the whole by a
  token or two at its edges). Only a text that fits is then tokenized whole, in one call, so the
  ids are exactly those of the one-call path.
Smaller texts take the one-call path directly: that is every prompt that fits in a context of
up to LARGE_TEXT_CHARS / longest tokens, and it costs nothing extra.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from worker.runtime.errors import context_length

LARGE_TEXT_CHARS = 1 << 18  # 256K characters: below, prompts are tokenized in one call
PIECE_CHARS = 1 << 15
CUT_MARGIN = 8  # tokens one cut between pieces may add or take away, at the most
# Where a model states no context: the most ids /tokenize and count_tokens return.
UNBOUNDED_TOKENS = 1 << 20


def longest_token_bytes(tokenizer: Any) -> int:
    """The UTF-8 length of the longest stored token string, added tokens included."""
    vocab = tokenizer.get_vocab()
    return max((len(token.encode("utf-8", "surrogatepass")) for token in vocab), default=1) or 1


@dataclass(frozen=True, slots=True)
class PromptBudget:
    """The tokens a prompt must stay under (`limit`), and what one token can stand for."""

    limit: int
    longest_token: int

    @classmethod
    def of(cls, tokenizer: Any, max_context: int | None) -> PromptBudget:
        return cls(max_context or UNBOUNDED_TOKENS, longest_token_bytes(tokenizer))

    def check_chars(self, chars: int) -> None:
        """RequestError (context_length) when `chars` characters cannot fit in any case."""
        if chars >= self.limit * self.longest_token:
            raise context_length(chars // self.longest_token, self.limit)

    def encode(self, encode: Callable[[str], list[int]], text: str) -> list[int]:
        """`encode(text)`, after `check_chars`; a large text is counted piece by piece
        first, and a RequestError (context_length) ends the counting once it is past."""
        self.check_chars(len(text))
        if len(text) >= LARGE_TEXT_CHARS:
            counted = count_until(encode, text, self.limit)
            if counted is not None:
                raise context_length(counted, self.limit)
        return [int(t) for t in encode(text)]


def count_until(encode: Callable[[str], list[int]], text: str, limit: int) -> int | None:
    """None when `text` may fit in `limit` tokens; else a count of at least `limit` that the
    text is known to reach (the pieces' count less the margin of every cut so far)."""
    counted = cuts = start = 0
    while start < len(text):
        end = _cut(text, start)
        counted += len(encode(text[start:end]))
        if end < len(text):
            cuts += 1
        if counted - CUT_MARGIN * cuts >= limit:
            return counted - CUT_MARGIN * cuts
        start = end
    return None


def _cut(text: str, start: int) -> int:
    """The end of the piece from `start`: before a whitespace in its second half, else at
    PIECE_CHARS (a text with no spaces, where any cut is as good as another)."""
    end = start + PIECE_CHARS
    if end >= len(text):
        return len(text)
    space = max(text.rfind(" ", start + PIECE_CHARS // 2, end), text.rfind("\n", start, end))
    return space if space > start + PIECE_CHARS // 2 else end
