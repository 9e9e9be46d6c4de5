"""Prompts of about a requested token count, built by a client that cannot tokenize.

Text is made of words drawn from a fixed list by a seeded generator, so a run is reproducible
from its seed and every prompt differs from the first word on (no prefix cache can reuse one
request's prompt for another by accident). `Calibration` turns a token count into a word
count: fitted on the `usage.prompt_tokens` the server reports for two prompts of known length,
it holds the chat template's overhead and the tokens per word of this list under the server's
tokenizer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

WORDS = (
    "the of and to in is that for it as with was on be by this are or from at an which not "
    "have has but all can one if will more when there been their would other its into some "
    "time only new these two may first any like then also use value data file list name "
    "number return object class method function module string line test error result "
    "default option system process thread server client request message stream buffer "
    "index table record field type path state event order group window model system "
    "simple small large early later often never always before after under above between "
    "during without within across around river mountain garden city market music letter "
    "paper story question answer reason example problem method answer people world house "
    "water light night morning summer winter window friend family school office country "
    "history science language number moment minute second result change point place"
).split()
WORDS = tuple(dict.fromkeys(WORDS))  # unique, in a fixed order


@dataclass(frozen=True)
class Calibration:
    """prompt_tokens ~= overhead + tokens_per_word * words, for this server and word list."""

    overhead: float
    tokens_per_word: float

    @classmethod
    def fit(cls, words: tuple[int, int], tokens: tuple[int, int]) -> Calibration:
        """The line through two measured (words, prompt_tokens) points."""
        (w1, w2), (t1, t2) = words, tokens
        if w1 == w2 or t2 <= t1:
            raise ValueError(f"cannot calibrate from words {words} -> tokens {tokens}")
        rate = (t2 - t1) / (w2 - w1)
        return cls(overhead=max(0.0, t1 - rate * w1), tokens_per_word=rate)

    def words_for(self, tokens: int, *, whole_prompt: bool = True) -> int:
        """Words for a prompt of `tokens` tokens (a whole prompt pays the template overhead)."""
        budget = tokens - self.overhead if whole_prompt else tokens
        return max(1, round(budget / self.tokens_per_word))


class PromptFactory:
    """Deterministic text for a (seed, key) pair; keys name the request a text is for."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def text(self, words: int, key: str) -> str:
        rng = random.Random(f"{self.seed}:{key}")
        return " ".join(rng.choice(WORDS) for _ in range(words))


@dataclass(frozen=True)
class ConversationPlan:
    """What each turn of a benchmark conversation says.

    Turn 1 is a whole prompt of `first_tokens` (the history later turns build on); every later
    turn appends the server's previous reply and a new user message of `follow_up_tokens`.
    """

    factory: PromptFactory
    calibration: Calibration
    first_tokens: int
    follow_up_tokens: int

    def user_text(self, conversation: str, turn: int) -> str:
        if turn == 1:
            words = self.calibration.words_for(self.first_tokens)
        else:
            words = self.calibration.words_for(self.follow_up_tokens, whole_prompt=False)
        return self.factory.text(words, f"{conversation}/turn{turn}")
