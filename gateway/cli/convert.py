"""`vllm-omni-mlx convert SRC OUT`: a GGUF file, a CTranslate2 Whisper model or Kokoro's ONNX
export -> MLX layout.

The conversion runs in a process of its own (`python -m worker.convert`, worker/convert/):
the converters load numpy, gguf, tokenizers or onnx, and the Kokoro one MLX (for mlx-audio's
parameter tree), none of which the gateway's CLI imports.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

from protocol.launch.python import python_module


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
@click.option(
    "--vocab",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Kokoro ONNX: the phoneme vocabulary (vocab.json).",
)
@click.option(
    "--voices",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Kokoro ONNX: the voice packs (.npz of [510, 1, 256] arrays).",
)
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
def convert_command(
    src: Path,
    out: Path,
    dtype: str | None,
    parts: tuple[Path, ...],
    vocab: Path | None,
    voices: Path | None,
    force: bool,
) -> None:
    """Convert SRC into an MLX checkpoint directory OUT.

    SRC is a GGUF file (llama / qwen2; F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_x, K-quants) that
    becomes an mlx-lm checkpoint, or a CTranslate2 Whisper directory (model.bin, or
    model.bin.part1, part2, ...; config.json; tokenizer.json) that becomes the Hugging Face
    Whisper layout mlx-audio loads, or Kokoro-82M's int8 ONNX export (with --vocab and
    --voices) that becomes an mlx-audio kokoro checkpoint (float32). OUT is written completely
    or not at all.
    """
    if out.exists() and not force:
        raise click.ClickException(f"{out} exists (use --force to replace it)")
    argv = [*python_module("worker.convert"), str(src), str(out)]
    argv += ["--dtype", dtype] if dtype else []
    for part in parts:
        argv += ["--part", str(part)]
    argv += ["--vocab", str(vocab)] if vocab else []
    argv += ["--voices", str(voices)] if voices else []
    argv += ["--force"] if force else []
    done = subprocess.run(argv)
    if done.returncode != 0:
        sys.exit(done.returncode)
