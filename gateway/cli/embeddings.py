"""`serve --embedding-model EMBEDDER --rerank-model RERANKER` and the embedding limits: flags and
their ServerConfig fields.

EMBEDDER (a directory or hub id, resolved like MODEL) is served next to MODEL by the same
worker (`/v1/embeddings`), RERANKER too (`/v1/rerank`, `/v1/score`: a cross-encoder, or any
causal LM taken as an LLM reranker); MODEL may itself be an embedding checkpoint or a reranker,
served alone. The embedding limits also bound the documents of a rerank or score request. The
limits are checked per request (a 400 naming the limit); `--embedding-batch-tokens` bounds one
forward pass, so embedding work interleaves with chat decode steps in small units.
"""

from __future__ import annotations

from typing import Any

import click

from gateway.cli.model_source import resolved_models
from gateway.cli.serve_options import Flag, config_flags


def embedding_options(command: Any) -> Any:
    options: list[Flag] = [
        ("--embedding-model", None, "Embedding checkpoint served next to MODEL (/v1/embeddings)."),
        ("--rerank-model", None, "Reranker served next to MODEL (/v1/rerank, /v1/score)."),
        ("--max-embedding-inputs", click.IntRange(min=1), "Inputs of one embeddings request."),
        ("--max-embedding-tokens", click.IntRange(min=1), "Tokens of one embeddings request."),
        ("--embedding-batch-tokens", click.IntRange(min=1), "Padded tokens per embedding pass."),
    ]
    return config_flags(command, options)


def embedding_config(options: dict[str, Any]) -> dict[str, Any]:
    """ServerConfig's embedding fields from the flags (the model resolved like MODEL)."""
    fields: dict[str, Any] = {
        name: options[name]
        for name in ("max_embedding_inputs", "max_embedding_tokens", "embedding_batch_tokens")
    }
    return fields | resolved_models(options, ("embedding_model", "rerank_model"))
