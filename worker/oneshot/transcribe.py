"""One-shot work without a server: `python -m worker.oneshot.transcribe transcribe FILE --model PATH ...`.

`vllm-omni-mlx transcribe` runs this module as a subprocess (the gateway's CLI never imports
MLX). It loads the speech-in engine, feeds it the file's bytes exactly as the server's worker
gets them, runs it to the end and writes the result in one of OpenAI's response formats to
stdout or `--out`. Errors (not a speech model, not audio, unknown language) print one line on
stderr and exit 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from gateway.audio.transcription.formats import FORMATS, Transcript, render
from protocol.messages import FinishReason, SamplingParams, Submit, Usage


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m worker.oneshot.transcribe", description=__doc__
    )
    commands = parser.add_subparsers(dest="command", required=True)
    t = commands.add_parser("transcribe", help="transcribe (or translate) one audio file")
    t.add_argument("file", help="audio file: wav, flac, mp3, ogg/opus, m4a, webm, ...")
    t.add_argument("--model", required=True, help="speech-recognition checkpoint directory")
    t.add_argument("--language", help="ISO-639-1 code of the speech (default: detect)")
    t.add_argument("--prompt", help="context / initial prompt")
    t.add_argument("--temperature", type=float, help="0..1 (default: Whisper's fallback)")
    t.add_argument("--task", choices=["transcribe", "translate"], default="transcribe")
    t.add_argument("--format", choices=FORMATS, default="text", help="output format")
    t.add_argument("--word-timestamps", action="store_true", help="words in verbose_json")
    t.add_argument("--out", help="write here instead of stdout")
    return parser.parse_args(argv)


def transcribe(args: argparse.Namespace) -> str:
    """Run one transcription with the server's engine; the rendered output."""
    from worker.transcription.engine import load_stt_engine

    engine = load_stt_engine(args.model)
    timestamps = ["word", "segment"] if args.word_timestamps else ["segment"]
    inputs = {
        "audio": Path(args.file).read_bytes(),
        "filename": Path(args.file).name,
        "language": args.language,
        "prompt": args.prompt,
        "temperature": args.temperature,
        "task": args.task,
        "timestamps": timestamps,
    }
    submit = Submit("oneshot", "transcribe", inputs, SamplingParams(max_tokens=0), stream=False)
    deltas = [engine.admit(submit)]
    while deltas[-1].finish_reason is None:
        deltas.extend(engine.step())
    terminal = deltas[-1]
    if terminal.finish_reason != FinishReason.STOP:
        message = terminal.error.message if terminal.error else terminal.finish_reason
        raise OneShotError(str(message))
    usage = terminal.usage or Usage(0, 0)
    transcript = Transcript(
        text="".join(d.text for d in deltas),
        task=args.task,
        language=terminal.language or args.language or "",
        segments=terminal.segments,
        usage=usage,
        duration=float(usage.prompt_tokens),
    )
    body = render(args.format, transcript, args.word_timestamps)
    if isinstance(body, dict):
        return json.dumps(body, ensure_ascii=False, indent=2) + "\n"
    return body


class OneShotError(Exception):
    """The request failed; the message says why."""


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        output = transcribe(args)
    except (OneShotError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.out:
        Path(args.out).write_text(output, encoding="utf-8")
    else:
        sys.stdout.write(output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
