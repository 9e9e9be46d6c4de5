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

from gateway.config import ServerConfig

_DEFAULTS = ServerConfig(model="", served_model_name="")


def embedding_options(command: Any) -> Any:
    options = [
        ("--embedding-model", None, "Embedding checkpoint served next to MODEL (/v1/embeddings)."),
        ("--rerank-model", None, "Reranker served next to MODEL (/v1/rerank, /v1/score)."),
        ("--max-embedding-inputs", click.IntRange(min=1), "Inputs of one embeddings request."),
        ("--max-embedding-tokens", click.IntRange(min=1), "Tokens of one embeddings request."),
        ("--embedding-batch-tokens", click.IntRange(min=1), "Padded tokens per embedding pass."),
    ]
    for flag, kind, help_text in reversed(options):
        default = getattr(_DEFAULTS, flag[2:].replace("-", "_"))
        command = click.option(flag, type=kind, default=default, show_default=True, help=help_text)(
            command
        )
    return command


def embedding_config(options: dict[str, Any]) -> dict[str, Any]:
    """ServerConfig's embedding fields from the flags (the model resolved like MODEL)."""
    from gateway.engine.model_resolver import ModelDownloadFailed, ModelNotFound, resolve_model

    fields = {
        name: options[name]
        for name in ("max_embedding_inputs", "max_embedding_tokens", "embedding_batch_tokens")
    }
    for name in ("embedding_model", "rerank_model"):
        if options.get(name):
            try:
                fields[name] = resolve_model(options[name]).path
            except (ModelNotFound, ModelDownloadFailed) as exc:
                flag = "--" + name.replace("_", "-")
                raise click.ClickException(f"{flag}: {exc}") from exc
    return fields
