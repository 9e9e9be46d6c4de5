"""Where `serve MODEL` gets its checkpoint: a local directory, a hub repo id (downloaded), or
without MODEL the embedded default (gateway/cli/default_models.py)."""

from __future__ import annotations

from functools import partial
from typing import Any

import click


def serve_model(model: str | None, options: dict[str, Any]) -> tuple[str, str]:
    """`resolve(MODEL)`, or without MODEL the embedded default (gateway/cli/default_models.py),
    whose speech models fill `--tts-model` / `--asr-model` unless they were given."""
    from gateway.cli import default_models

    if model is None:
        echo = partial(click.echo, err=True)
        echo("No MODEL given: serving the embedded default (SmolLM2-135M-Instruct, Whisper).")
        try:
            defaults = default_models.embedded_default(echo)
        except default_models.DefaultUnavailable as exc:
            raise click.ClickException(f"the embedded default is unavailable: {exc}") from exc
        options["asr_model"] = options["asr_model"] or defaults.asr
        options["tts_model"] = options["tts_model"] or defaults.tts
        if options["dtype"] == "auto" and default_models.default_dtype() is None:
            # The CPU's fast path: float32 matmuls on BLAS. mlx-audio would build Whisper in
            # float16 (its own single-threaded kernels here: 11-14 s a sentence, not 1.8 s).
            options["dtype"] = "float32"
        return defaults.chat, defaults.name
    return resolve(model)


def resolve(model: str, flag: str | None = None) -> tuple[str, str]:
    """(checkpoint directory, default served name) for MODEL, downloading a hub id if needed;
    a failure names `flag` when the model came from one."""
    from gateway.engine.model_resolver import ModelDownloadFailed, ModelNotFound, resolve_model

    try:
        resolved = resolve_model(model)
    except (ModelNotFound, ModelDownloadFailed) as exc:
        raise click.ClickException(f"{flag}: {exc}" if flag else str(exc)) from exc
    return resolved.path, resolved.name


def resolved_models(options: dict[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    """The checkpoint directory of each model flag given (`names`: their option keys)."""
    return {
        name: resolve(options[name], "--" + name.replace("_", "-"))[0]
        for name in names
        if options.get(name)
    }
