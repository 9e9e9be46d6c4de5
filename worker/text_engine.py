"""Text generation on mlx-lm: loading and one request's generation state.

The correctness rule: greedy output equals `mlx_lm.stream_generate` token for token and
character for character. So prompts are built exactly as mlx-lm builds them (worker/prompts.py),
tokens come from `mlx_lm.generate.generate_step`, and `TextGeneration.advance` ends
generation with the same rules as `stream_generate` (EOS -> "stop", max_tokens -> "length").
Everything here runs on the worker's single MLX thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm import load
from mlx_lm.generate import generate_step
from mlx_lm.tokenizer_utils import TokenizerWrapper

from protocol.messages import FinishReason, SamplingParams, Submit
from worker.errors import bad_request
from worker.prompts import prompt_for
from worker.sampling import (
    load_sampling_defaults,
    make_request_logits_processors,
    make_request_sampler,
    resolve_sampling,
)
from worker.stop_strings import StopStringMatcher


@dataclass(frozen=True)
class TextModel:
    """A loaded checkpoint and the facts about it the scheduler needs."""

    path: str
    model: nn.Module
    tokenizer: TokenizerWrapper
    max_context: int | None  # max_position_embeddings; None when the config does not say
    vocab_size: int
    sampling_defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def limits(self) -> dict[str, Any]:
        return {"max_context": self.max_context}


def load_text_model(path: str) -> TextModel:
    """Loads a local mlx-lm checkpoint directory (raises on any failure)."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"model directory {path!r} does not exist")
    model, tokenizer = load(path)
    config = json.loads((Path(path) / "config.json").read_text())
    text_config = config.get("text_config") or {}
    max_context = config.get("max_position_embeddings") or text_config.get(
        "max_position_embeddings"
    )
    vocab_size = config.get("vocab_size") or text_config.get("vocab_size") or len(tokenizer)
    return TextModel(
        path=path,
        model=model,
        tokenizer=tokenizer,
        max_context=int(max_context) if max_context else None,
        vocab_size=int(vocab_size),
        sampling_defaults=load_sampling_defaults(path),
    )


@dataclass(slots=True)
class TokenStep:
    """What one `advance` produced: text safe to emit, the token, and whether it ended."""

    text: str
    token_ids: list[int]
    finish_reason: str | None = None


class TextGeneration:
    """One request's generator, KV cache, detokenizer and stop-string matcher.

    Prefill runs inside the first `advance`; `prompt_progress_callback` is called between
    prefill chunks and may raise to stop it.
    """

    def __init__(
        self,
        text_model: TextModel,
        prompt: list[int],
        sampling: SamplingParams,
        prompt_progress_callback: Callable[[int, int], None] | None = None,
    ) -> None:
        if isinstance(sampling.max_tokens, bool) or not isinstance(sampling.max_tokens, int):
            raise bad_request(f"max_tokens must be an integer, got {sampling.max_tokens!r}")
        if sampling.max_tokens < 1:
            raise bad_request(f"max_tokens must be at least 1, got {sampling.max_tokens}")
        stops = sampling.stop or []
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise bad_request("stop must be a list of strings")
        resolved = resolve_sampling(sampling, text_model.sampling_defaults, text_model.vocab_size)
        self.prompt_tokens = len(prompt)
        self.completion_tokens = 0
        self.max_tokens = sampling.max_tokens
        if text_model.max_context is not None:
            # The context window ends generation like max_tokens does ("length").
            self.max_tokens = min(self.max_tokens, text_model.max_context - len(prompt))
        self._eos = text_model.tokenizer.eos_token_ids
        self._detokenizer = text_model.tokenizer.detokenizer
        self._stops = StopStringMatcher(stops)
        self._tokens = generate_step(
            mx.array(prompt),
            text_model.model,
            max_tokens=self.max_tokens,
            sampler=make_request_sampler(resolved, text_model.vocab_size),
            logits_processors=make_request_logits_processors(resolved),
            prompt_progress_callback=prompt_progress_callback,
        )

    def advance(self) -> TokenStep:
        """Generates one token (the first call also runs the prefill)."""
        token, _ = next(self._tokens)
        self.completion_tokens += 1
        finish = None
        # The same end rules, in the same order, as mlx_lm.stream_generate.
        if token in self._eos:
            finish = FinishReason.STOP
        else:
            self._detokenizer.add_token(token)
            if self.completion_tokens == self.max_tokens:
                finish = FinishReason.LENGTH
        if finish is not None:
            self._detokenizer.finalize()
        text, hit_stop = self._stops.feed(self._detokenizer.last_segment)
        if hit_stop:
            finish = FinishReason.STOP
        elif finish is not None:
            text += self._stops.flush()
        if finish is not None:
            self.close()
        return TokenStep(text=text, token_ids=[token], finish_reason=finish)

    def close(self) -> None:
        """Drops the generator (and with it the KV cache)."""
        self._tokens.close()


def start_text_generation(
    text_model: TextModel,
    submit: Submit,
    prompt_progress_callback: Callable[[int, int], None] | None = None,
) -> TextGeneration:
    """Validates and tokenizes a Submit and sets up its generation (no model work yet)."""
    prompt = prompt_for(text_model, submit.op, submit.inputs)
    return TextGeneration(text_model, prompt, submit.sampling, prompt_progress_callback)
