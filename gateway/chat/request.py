"""What every API's request parser hands the generation layer: op, inputs, sampling, n, stream.

The three HTTP APIs (OpenAI chat / completions, Anthropic Messages, OpenAI Responses) differ in
their bodies and their output shapes, not in what they ask the worker: each parser ends in one
`GenerationRequest`, and `generation.py` runs it the same way for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gateway.media.parts import MediaItem
from protocol.messages import SamplingParams


@dataclass(slots=True)
class GenerationRequest:
    op: str  # protocol Op.CHAT or Op.COMPLETE
    model: str
    inputs: dict[str, Any]
    sampling: SamplingParams
    stream: bool
    include_usage: bool = False
    n: int = 1  # choices: one worker request each
    echo: str | None = None  # completions `echo`: the prompt text each choice starts with
    # Image / audio parts, fetched and checked into inputs["images"] / ["audios"] just before
    # the Submit (gateway/media/resolve.py); empty for text-only requests.
    media: tuple[MediaItem, ...] = ()

    def samplings(self) -> list[SamplingParams]:
        """One SamplingParams per choice; with a seed, choice i gets seed + i (so n choices
        differ from each other yet each is reproducible)."""
        if self.n == 1:
            return [self.sampling]
        seed = self.sampling.seed
        return [
            replace(self.sampling, seed=None if seed is None else (seed + i) % 2**64)
            for i in range(self.n)
        ]
