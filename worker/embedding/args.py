"""The worker's embedding flags (no MLX here): which model, the request limits, the pass size."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

DEFAULT_MAX_INPUTS = 2048  # OpenAI's limit of inputs per request
DEFAULT_MAX_TOKENS = 300_000  # OpenAI's limit of tokens per request, all inputs together
DEFAULT_BATCH_TOKENS = 8192  # padded tokens of one forward pass (one scheduler step)
DEFAULT_BATCH_ROWS = 256  # inputs of one forward pass


@dataclass(frozen=True)
class EmbeddingSettings:
    max_inputs: int = DEFAULT_MAX_INPUTS
    max_total_tokens: int = DEFAULT_MAX_TOKENS
    batch_tokens: int = DEFAULT_BATCH_TOKENS
    batch_rows: int = DEFAULT_BATCH_ROWS


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def add_embedding_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--embedding-model", help="an embedding checkpoint served next to the main model")
    add(
        "--rerank-model",
        help="a reranker served next to the main model: a cross-encoder, or a causal LM "
        "scored by its yes/no answer (an LLM reranker, Qwen3-Reranker style)",
    )
    add("--max-embedding-inputs", type=_positive, default=DEFAULT_MAX_INPUTS)
    add("--max-embedding-tokens", type=_positive, default=DEFAULT_MAX_TOKENS)
    add(
        "--embedding-batch-tokens",
        type=_positive,
        default=DEFAULT_BATCH_TOKENS,
        help="padded tokens of one embedding pass; passes interleave with chat decode steps",
    )


def embedding_settings(args: argparse.Namespace) -> EmbeddingSettings:
    return EmbeddingSettings(
        max_inputs=getattr(args, "max_embedding_inputs", DEFAULT_MAX_INPUTS),
        max_total_tokens=getattr(args, "max_embedding_tokens", DEFAULT_MAX_TOKENS),
        batch_tokens=getattr(args, "embedding_batch_tokens", DEFAULT_BATCH_TOKENS),
    )
