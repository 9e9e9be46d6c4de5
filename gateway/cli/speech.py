"""`vllm-omni-mlx tts`: synthesize one text to an audio file, no server needed.

The synthesis runs in a `python -m worker.oneshot.synthesize` subprocess (this process, like the
gateway, never imports MLX), which writes raw PCM; the file is then encoded here with the same
encoders `/v1/audio/speech` uses (gateway/audio/speech/encoding.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from gateway.audio.speech.encoding import FORMATS, encode, unsupported_reason
from gateway.cli.oneshot import blas_option, oneshot_model, subprocess_env
from protocol.launch.python import python_module

SUFFIX_FORMATS = {
    ".wav": "wav",
    ".mp3": "mp3",
    ".flac": "flac",
    ".opus": "opus",
    ".ogg": "opus",
    ".aac": "aac",
    ".pcm": "pcm",
    ".raw": "pcm",
}


def format_for(out: str, fmt: str | None) -> str:
    """--format, else the one --out's suffix names, else wav."""
    return fmt or SUFFIX_FORMATS.get(Path(out).suffix.lower(), "wav")


def oneshot_command(model: str, text: str, pcm_out: str, **options: object) -> list[str]:
    argv = [
        *python_module("worker.oneshot.synthesize"),
        "--model",
        model,
        "--text",
        text,
    ]
    argv += ["--pcm-out", pcm_out]
    for name, value in options.items():
        if value is not None:
            argv += ["--" + name.replace("_", "-"), str(value)]
    return argv


@click.command()
@click.option(
    "--model",
    required=True,
    help="Speech model: tts-1 (the embedded default's), a directory or a hub repo id.",
)
@click.option("--text", required=True, help="The text to speak ('-': read standard input).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Output file.")
@click.option("--voice", help="A preset voice of the model.")
@click.option("--instructions", help="Style / emotion, or a voice description.")
@click.option("--language", help="Language, for models that take one.")
@click.option("--speed", type=click.FloatRange(0.25, 4.0), help="For models that take it.")
@click.option("--ref-audio", type=click.Path(exists=True, dir_okay=False), help="Voice to clone.")
@click.option("--ref-text", help="Transcript of --ref-audio.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    help="Audio format [default: from --out's suffix, else wav].",
)
@click.option("--seed", type=int, help="Same seed, same audio.")
@blas_option
def tts(model: str, text: str, out: str, fmt: str | None, blas: str, **options: object) -> None:
    """Speak TEXT with a TTS model into an audio file (no server)."""
    from gateway.workers.served_models import SPEECH

    fmt = format_for(out, fmt)
    if text == "-":
        text = sys.stdin.read()
    path = oneshot_model(model, SPEECH)
    with tempfile.NamedTemporaryFile(suffix=".pcm") as pcm_file:
        argv = oneshot_command(path, text, pcm_file.name, **options)
        done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, env=subprocess_env(blas))
        if done.returncode != 0:  # the worker said why on stderr
            raise click.exceptions.Exit(done.returncode)
        lines = [line for line in done.stdout.splitlines() if line.strip()]
        summary = json.loads(lines[-1])
        pcm = Path(pcm_file.name).read_bytes()
    rate = int(summary["sample_rate"])
    why = unsupported_reason(fmt, rate)
    if why is not None:
        raise click.ClickException(f"--format {fmt}: {why}")
    Path(out).write_bytes(encode(fmt, pcm, rate))
    seconds = summary["samples"] / rate
    click.echo(f"wrote {out} ({fmt}, {seconds:.2f} s at {rate} Hz)", err=True)
