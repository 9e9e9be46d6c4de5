"""`serve --embedding-model EMBEDDER` and the embedding limits: flags and their ServerConfig fields.

EMBEDDER (a directory or hub id, resolved like MODEL) is served next to MODEL by the same
worker (`/v1/embeddings`); MODEL may itself be an embedding checkpoint, served alone. The
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
    if options["embedding_model"]:
        try:
            fields["embedding_model"] = resolve_model(options["embedding_model"]).path
        except (ModelNotFound, ModelDownloadFailed) as exc:
            raise click.ClickException(f"--embedding-model: {exc}") from exc
    return fields
