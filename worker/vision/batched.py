"""Vision requests decoded together: mlx-vlm's language model in the text engine's batch.

A vision-language model is a language model that reads image features where its prompt has
image tokens. Once a request's prompt is in its KV cache, what is left is plain decoding, so
the requests to one model decode together in the text engine's continuous batch
(worker/text/batch_engine.py over mlx-lm's `BatchGenerator`), one forward pass a step for all
of them, instead of one pass each:
- a prompt with images (or video) is prefilled on mlx-vlm's own path, paced (the vision tower,
  the merged embeddings, Qwen's mRoPE positions; worker/vision/engine.py); at its first token
  the request `join`s the batch with the KV cache that path filled (cut back to the prompt:
  mlx-vlm feeds a token before it hands it out) and its mRoPE offset;
- a prompt of text only goes to the batch whole, prefilled there in chunks like any text
  prompt (with the text engine's prefix cache).
`BatchedLanguageModel` is the language model as the batch calls a model: logits for a batch
KV cache, with Qwen's mRoPE positions given per row (the row's position plus its request's
offset: what mlx-vlm computes for one request from the state it keeps on the model). Greedy
output equals direct mlx-vlm's, request for request (tests/unit/test_vision_batched.py).

Served this way: the families in `BATCHED_TYPES` (each tested so), for requests without
audio; the others, audio prompts and spoken replies keep mlx-vlm's batch-1 generator.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx

from worker.text.request import TextRequest
from worker.vision.model import VisionModel

# The model types whose language model decodes in the batch (tested equal to mlx-vlm).
BATCHED_TYPES = frozenset({"qwen2_vl", "qwen2_5_vl", "qwen3_vl", "gemma3"})
# Where mlx-vlm's Qwen-style language models keep a request's mRoPE offset.
ROPE_DELTAS = "_rope_deltas"


def batched(vm: VisionModel) -> bool:
    """Whether the loaded model's requests decode in the batch: a family of `BATCHED_TYPES`
    without audio input."""
    model = vm.model
    family = getattr(model.config, "model_type", None)
    return family in BATCHED_TYPES and hasattr(model, "language_model") and not vm.takes_audio


class BatchedLanguageModel:
    """mlx-vlm's language model called as mlx-lm's BatchGenerator calls a model; see the
    module docstring. `rows()` says, around each call, whose rows it computes."""

    def __init__(self, language_model: Any) -> None:
        self.language_model = language_model
        self.mrope = hasattr(language_model, ROPE_DELTAS)
        self._offsets: mx.array | None = None  # the current call's rows' mRoPE offsets

    @property
    def layers(self) -> Any:
        return self.language_model.layers

    def make_cache(self) -> list[Any]:
        from mlx_vlm.models.cache import make_prompt_cache

        return make_prompt_cache(self.language_model)

    @contextlib.contextmanager
    def rows(
        self, requests: Sequence[TextRequest | None], offsets: dict[str, int]
    ) -> Iterator[None]:
        """Calls inside compute rows for `requests` in order (mRoPE offsets by request id)."""
        if self.mrope:
            self._offsets = mx.array(
                [0 if r is None else offsets.get(r.request_id, 0) for r in requests], mx.int32
            )
        try:
            yield
        finally:
            self._offsets = None

    def __call__(self, inputs: mx.array, cache: list[Any] | None = None) -> mx.array:
        kwargs: dict[str, Any] = {}
        if self.mrope:
            assert cache is not None and self._offsets is not None, "called outside rows()"
            rows, width = inputs.shape
            # The three mRoPE axes agree on text tokens: each row's position in its cache.
            start = cache[0].offset.reshape(-1, 1) + self._offsets.reshape(-1, 1)
            positions = (start + mx.arange(width).reshape(1, -1)).astype(mx.int32)
            kwargs["position_ids"] = mx.broadcast_to(positions[None], (3, rows, width))
        return self.language_model(inputs, cache=cache, **kwargs).logits


@dataclass
class BatchModel:
    """What the text batch engine reads of its model, for a vision model's language model."""

    model: BatchedLanguageModel
    tokenizer: Any  # mlx-lm's TokenizerWrapper (its EOS set is mlx-vlm's)
    max_context: int | None


def rope_offset(state: dict[str, Any]) -> int:
    """A request's mRoPE offset, from the language model state mlx-vlm left for it (0: none)."""
    deltas = state.get(ROPE_DELTAS)
    if deltas is None:
        return 0
    first: Any = mx.array(deltas).reshape(-1)[0].item()
    return int(first)


def prompt_cache(cache: list[Any] | None, prompt_tokens: int) -> list[Any] | None:
    """The KV cache mlx-vlm prefilled, cut back to the prompt's `prompt_tokens` (it has fed
    the first token already); None when it cannot be (a rotating window that wrapped)."""
    if not cache:
        return None
    extra = int(cache[0].offset) - prompt_tokens
    if extra < 0 or any(not c.is_trimmable() for c in cache):
        return None
    if extra:
        for layer in cache:
            layer.trim(extra)
    return cache


class Lookahead:
    """A request's sampler and logits processors as its mlx-vlm generator is given them,
    watched for the join. mlx-vlm draws each token one step ahead of handing it out (at the
    first token, the second is drawn already) and shows the processors the tokens from the
    prompt's last one on; so at the join the sampler's key goes back to before its last draw
    (the batch draws that token again, the same one: a seeded request samples what it would
    have alone) and the batch shows the processors the same tokens (`hidden`)."""

    def __init__(self, sampler: Any, processors: list[Any]) -> None:
        self._sampler = sampler
        self._processors = processors
        self._key_before: Any = None  # the sampler's key before its last draw
        self._seen: int | None = None  # the tokens the processors saw at their first call

    def sample(self, logprobs: mx.array) -> mx.array:
        self._key_before = getattr(self._sampler, "key", None)
        return self._sampler(logprobs)

    def processors(self) -> list[Any] | None:
        if not self._processors:
            return None
        first, *rest = self._processors

        def watched(tokens: mx.array, logits: mx.array) -> mx.array:
            if self._seen is None:
                self._seen = tokens.size
            return first(tokens, logits)

        return [watched, *rest]

    def rewind(self) -> None:
        """Puts the sampler's key back to before mlx-vlm's draw ahead (a keyless sampler,
        greedy, has nothing to put back)."""
        if self._key_before is not None:
            self._sampler.advance_to(self._key_before)

    def hidden(self, prompt_tokens: int) -> int:
        """How many of the prompt's tokens mlx-vlm did not show the processors."""
        return 0 if self._seen is None else max(0, prompt_tokens - self._seen)
