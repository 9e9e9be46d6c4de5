"""`vllm-omni-mlx convert SRC OUT`: a GGUF file or a CTranslate2 Whisper model -> MLX layout.

Importing this module imports click only: the gateway's CLI registers the command, and the
gateway never loads more than it needs (the converters load numpy, gguf and tokenizers when
the command runs; none of them imports MLX).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import click


@click.command("convert")
@click.argument("src", type=click.Path(exists=True, path_type=Path))
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--dtype",
    type=click.Choice(["float32", "float16", "bfloat16"]),
    help="Weights of OUT [default: float32 for GGUF, the source's for CTranslate2].",
)
@click.option(
    "--part",
    "parts",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A further piece of a split model.bin, after SRC's own (repeatable, in order).",
)
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
def convert_command(
    src: Path, out: Path, dtype: str | None, parts: tuple[Path, ...], force: bool
) -> None:
    """Convert SRC into an MLX checkpoint directory OUT.

    SRC is a GGUF file (llama / qwen2; F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_x, K-quants) that
    becomes an mlx-lm checkpoint, or a CTranslate2 Whisper directory (model.bin, or
    model.bin.part1, part2, ...; config.json; tokenizer.json) that becomes the Hugging Face
    Whisper layout mlx-audio loads. OUT is written completely or not at all.
    """
    from convert.errors import ConversionError
    from convert.output import new_staging_directory, publish
    from convert.sources import convert_source

    if out.exists() and not force:
        raise click.ClickException(f"{out} exists (use --force to replace it)")
    started = time.perf_counter()
    staging = new_staging_directory(out.resolve())
    try:
        summary = convert_source(src, staging, dtype, parts)
        publish(staging, out.resolve(), replace=force)
    except ConversionError as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    elapsed = time.perf_counter() - started
    click.echo(
        f"{src} -> {out} ({summary.kind}, {summary.parameters / 1e6:.1f}M parameters, "
        f"{summary.dtype}, {elapsed:.1f} s)",
        err=True,
    )
    for line in summary.details:
        click.echo(f"  {line}", err=True)
