"""`transcribe FILE --model M`: speech recognition without a server, in a worker subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from gateway.cli.oneshot import (
    blas_option,
    dtype_option,
    effective_dtype,
    oneshot_model,
    subprocess_env,
)
from gateway.workers.served_models import TRANSCRIPTION
from protocol.launch.python import python_module


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--model",
    required=True,
    help="Speech-recognition model: whisper-1 (the embedded default's), a name of "
    "`models list`, a directory or a hub id.",
)
@click.option("--language", help="ISO-639-1 code of the speech [default: detect].")
@click.option("--prompt", help="Context / initial prompt.")
@click.option("--temperature", type=click.FloatRange(0, 1), help="[default: fallback ladder]")
@click.option("--task", type=click.Choice(["transcribe", "translate"]), default="transcribe")
@click.option(
    "--format", type=click.Choice(["json", "text", "srt", "verbose_json", "vtt"]), default="text"
)
@click.option("--word-timestamps", is_flag=True, help="Words in verbose_json.")
@click.option("--out", type=click.Path(dir_okay=False), help="Write here [default: stdout].")
@dtype_option
@blas_option
def transcribe(file: str, model: str, **options: Any) -> None:
    """Transcribe (or translate) FILE with a speech-recognition MODEL, no server needed."""
    from gateway.audio.transcription.formats import Transcript, render
    from protocol import decode
    from protocol.messages import Step, Usage

    # The work runs in a worker subprocess: this process, like the gateway, never imports MLX.
    # It answers with its deltas as one protocol Step, rendered here as the server would.
    fmt, words, out = options.pop("format"), options["word_timestamps"], options.pop("out")
    env = subprocess_env(options.pop("blas"))
    options["dtype"] = effective_dtype(options["dtype"])
    argv = [*python_module("worker.oneshot.transcribe"), file]
    argv += ["--model", oneshot_model(model, TRANSCRIPTION)]
    for name, value in options.items():
        if value not in (None, False):
            flag = "--" + name.replace("_", "-")
            argv += [flag] if value is True else [flag, str(value)]
    done = subprocess.run(argv, stdout=subprocess.PIPE, env=env)
    if done.returncode != 0:
        sys.exit(done.returncode)  # the worker said why on stderr
    step = decode(done.stdout)
    assert isinstance(step, Step)
    terminal = step.deltas[-1]
    usage = terminal.usage or Usage(0, 0)
    transcript = Transcript(
        text="".join(d.text for d in step.deltas),
        task=options["task"],
        language=terminal.language or options["language"] or "",
        segments=terminal.segments,
        usage=usage,
        duration=float(usage.prompt_tokens),
    )
    body = render(fmt, transcript, words)
    output = (
        json.dumps(body, ensure_ascii=False, indent=2) + "\n" if isinstance(body, dict) else body
    )
    if out:
        Path(out).write_text(output, encoding="utf-8")
    else:
        sys.stdout.write(output)
