"""Text generation on mlx-lm: loading a checkpoint (and a draft model), and one-off generation.

The correctness rule: greedy output equals `mlx_lm.stream_generate` token for token and
character for character. So prompts are built exactly as mlx-lm builds them (worker/text/prompts.py),
tokens come from mlx-lm's own generators, and requests end with the same rules as
`stream_generate` (worker/text/request.py).

Two engines serve text (both implement worker.runtime.engine.Engine; worker/text/args.py
picks one from the worker's flags):
- `BatchTextEngine` (worker/text/batch_engine.py), the default: continuous batching on mlx-lm's
  `BatchGenerator`;
- `SoloTextEngine` (worker/text/solo_engine.py): batch-1 generators interleaved round robin, used
  when a setting BatchGenerator does not support is on: a draft model (speculative decoding),
  KV-cache quantization (`kv_bits`) or a rotating KV cache (`max_kv_size`).
Everything here runs on the worker's single MLX thread.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlx.core as mx
import mlx.nn as nn
from mlx_lm import load
from mlx_lm.tokenizer_utils import TokenizerWrapper

from protocol.inputs import ChatInputs, CompleteInputs, SamplingParams
from protocol.messages import Submit
from worker.text import laned_attention
from worker.text.prompt_size import PromptBudget
from worker.text.prompts import prompt_for
from worker.text.request import TokenTexts, make_text_request
from worker.text.sampling import load_sampling_defaults
from worker.text.settings import GenerationSettings
from worker.text.solo_engine import SoloGeneration

log = logging.getLogger(__name__)

DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}


@dataclass(frozen=True)
class TextModel:
    """A loaded checkpoint, its optional draft model and the facts the engines need."""

    path: str
    model: nn.Module
    tokenizer: TokenizerWrapper
    max_context: int | None  # max_position_embeddings; None when the config does not say
    vocab_size: int
    sampling_defaults: dict[str, Any] = field(default_factory=dict)
    draft_model: nn.Module | None = None
    draft_path: str | None = None
    token_texts: Callable[[int], str] | None = None
    # How long a prompt may be, checked before it is all tokenized (worker/text/prompt_size.py)
    prompt_budget: PromptBudget | None = None
    # LoRA adapters served on it at run time (worker/text/adapters/registry.py); None: none
    adapters: Any = None


def load_text_model(
    path: str,
    dtype: str = "auto",
    draft_path: str | None = None,
    adapter_path: str | None = None,
    shard: Callable[[nn.Module, dict[str, Any]], None] | None = None,
) -> TextModel:
    """Loads a local mlx-lm checkpoint directory (and draft model); raises on any failure.

    `dtype` "auto" keeps the stored weights' types; "float32" / "float16" / "bfloat16" casts
    the floating-point weights at load (on a Linux CPU float32 is the fast path: see
    protocol/launch/blas.py). A draft model whose vocabulary differs from the model's is refused.
    `adapter_path`: an mlx-lm LoRA adapter directory, applied as mlx_lm.load applies it.
    `shard(model, config)` splits the model across a distributed group before its weights are
    read (worker/distributed/sharding.py), so each rank reads only its part.
    """
    config = json.loads((Path(path) / "config.json").read_text()) if Path(path).is_dir() else {}
    model, tokenizer = _load(path, dtype, adapter_path, shard and (lambda m: shard(m, config)))
    laned_attention.install(model)  # on the CPU: long attention on both cores, the same floats
    text_config = config.get("text_config") or {}
    max_context = config.get("max_position_embeddings") or text_config.get(
        "max_position_embeddings"
    )
    vocab_size = config.get("vocab_size") or text_config.get("vocab_size") or len(tokenizer)
    draft_model = None
    if draft_path is not None:
        draft_model, draft_tokenizer = _load(draft_path, dtype)
        laned_attention.install(draft_model)
        check_same_vocabulary(tokenizer, draft_tokenizer, draft_path)
    return TextModel(
        path=path,
        model=model,
        tokenizer=tokenizer,
        max_context=int(max_context) if max_context else None,
        vocab_size=int(vocab_size),
        sampling_defaults=load_sampling_defaults(path),
        draft_model=draft_model,
        draft_path=draft_path,
        token_texts=TokenTexts(tokenizer),
        prompt_budget=PromptBudget.of(tokenizer, int(max_context) if max_context else None),
    )


def check_same_vocabulary(tokenizer: Any, draft_tokenizer: Any, draft_path: str) -> None:
    """Speculative decoding compares token ids: the draft must use the model's vocabulary."""
    ours, theirs = tokenizer.get_vocab(), draft_tokenizer.get_vocab()
    if ours != theirs:
        differing = len(set(ours.items()) ^ set(theirs.items()))
        raise ValueError(
            f"the draft model {draft_path!r} has another tokenizer vocabulary than the model "
            f"({len(theirs)} vs {len(ours)} tokens, {differing} entries differ); speculative "
            "decoding needs the same tokenizer"
        )


def _load(
    path: str,
    dtype: str,
    adapter_path: str | None = None,
    shard: Callable[[nn.Module], None] | None = None,
) -> tuple[nn.Module, TokenizerWrapper]:
    if not Path(path).is_dir():
        raise FileNotFoundError(f"model directory {path!r} does not exist")
    if adapter_path is not None and not (Path(adapter_path) / "adapter_config.json").is_file():
        raise FileNotFoundError(f"adapter directory {adapter_path!r} has no adapter_config.json")
    if dtype == "auto" and shard is None:
        return load(path, adapter_path=adapter_path)
    if dtype != "auto" and dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r} (auto, {', '.join(DTYPES)})")
    # Lazy load, then cast and split before anything is materialized: the weights are read
    # once, each rank of a group reading only its part.
    model, tokenizer = load(path, adapter_path=adapter_path, lazy=True)
    if dtype != "auto":
        model.set_dtype(DTYPES[dtype], lambda t: mx.issubdtype(t, mx.floating))
    if shard is not None:
        shard(model)
    mx.eval(model.parameters())
    return model, tokenizer


@dataclass(slots=True)
class TokenStep:
    """What one `TextGeneration.advance` produced: text safe to emit, the token, the end."""

    text: str
    token_ids: list[int]
    finish_reason: str | None = None


class TextGeneration:
    """One request generated on its own (batch-1), one token per `advance`.

    The engines do not use it; it is the simplest way to run one request through the same
    end rules, e.g. in tests. Prefill runs inside the first `advance`;
    `prompt_progress_callback(processed, total)` is called between prefill chunks and may raise
    to stop it.
    """

    def __init__(
        self,
        text_model: TextModel,
        prompt: list[int],
        sampling: SamplingParams,
        prompt_progress_callback: Callable[[int, int], None] | None = None,
        settings: GenerationSettings | None = None,
    ) -> None:
        # Features (parsers, constraints) are a chat request's: these are the plain end rules.
        inputs = CompleteInputs(list(prompt), sampling)
        self.request = make_text_request(text_model, "solo", list(prompt), inputs)
        self._generation = SoloGeneration(
            text_model.model,
            self.request,
            settings or GenerationSettings(),
            draft_model=text_model.draft_model,
        )
        self._progress = prompt_progress_callback or (lambda *_: None)

    @property
    def prompt_tokens(self) -> int:
        return self.request.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self.request.completion_tokens

    def advance(self) -> TokenStep:
        """Generates one token (the first call also runs the prefill)."""
        total = self.request.prompt_tokens
        while self._generation.prefill_pending:
            self._progress(self._generation.prefilled, total)
            self._generation.prefill_chunk()
        token, logprobs = self._generation.next_token()
        delta = self.request.accept(token, logprobs)
        if delta.finish_reason is not None:
            self.close()
        return TokenStep(delta.text, delta.token_ids, delta.finish_reason)

    def close(self) -> None:
        """Drops the generator (and with it the KV cache)."""
        self._generation.close()


def start_text_generation(
    text_model: TextModel,
    submit: Submit,
    prompt_progress_callback: Callable[[int, int], None] | None = None,
) -> TextGeneration:
    """Validates and tokenizes a Submit and sets up its generation (no model work yet)."""
    inputs = submit.inputs
    assert isinstance(inputs, ChatInputs | CompleteInputs)  # the scheduler routes by op
    prompt = prompt_for(text_model, inputs)
    return TextGeneration(text_model, prompt, inputs.sampling, prompt_progress_callback)
