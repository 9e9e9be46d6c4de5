"""One transcription without a server: `python -m worker.oneshot.transcribe FILE --model PATH`.

`vllm-omni-mlx transcribe` runs this module as a subprocess (the gateway's CLI never imports
MLX). It loads the transcription engine, feeds it the file's bytes exactly as the server's
worker gets them, runs it to the end and writes its deltas to stdout as one protocol `Step`
message (msgpack, `protocol.codec`): the CLI renders them in OpenAI's response formats, as the
server does. Errors (not a speech model, not audio, unknown language) print one line on stderr
and exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from protocol import encode
from protocol.inputs import TranscribeInputs
from protocol.messages import Delta, FinishReason, Step, Submit


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m worker.oneshot.transcribe", description=__doc__
    )
    parser.add_argument("file", help="audio file: wav, flac, mp3, ogg/opus, m4a, webm, ...")
    parser.add_argument("--model", required=True, help="speech-recognition checkpoint directory")
    parser.add_argument("--language", help="ISO-639-1 code of the speech (default: detect)")
    parser.add_argument("--prompt", help="context / initial prompt")
    parser.add_argument("--temperature", type=float, help="0..1 (default: Whisper's fallback)")
    parser.add_argument("--task", choices=["transcribe", "translate"], default="transcribe")
    parser.add_argument("--word-timestamps", action="store_true", help="time every word too")
    parser.add_argument(
        "--dtype", default="auto", choices=["auto", "float32", "float16", "bfloat16"],
        help="float32: Whisper in float32 (the fast path on a CPU, as the server's worker)",
    )  # fmt: skip
    return parser.parse_args(argv)


def transcribe(args: argparse.Namespace) -> list[Delta]:
    """Run one transcription with the server's engine; its deltas, the terminal one last."""
    from worker.transcription.engine import load_stt_engine

    engine = load_stt_engine(args.model, args.dtype)
    timestamps = ["word", "segment"] if args.word_timestamps else ["segment"]
    inputs = TranscribeInputs(
        audio=Path(args.file).read_bytes(),
        filename=Path(args.file).name,
        language=args.language,
        prompt=args.prompt,
        temperature=args.temperature,
        task=args.task,
        timestamps=timestamps,
    )
    submit = Submit("oneshot", inputs, stream=False)
    deltas = [engine.admit(submit)]
    while deltas[-1].finish_reason is None:
        deltas.extend(engine.step())
    terminal = deltas[-1]
    if terminal.finish_reason != FinishReason.STOP:
        message = terminal.error.message if terminal.error else terminal.finish_reason
        raise OneShotError(str(message))
    return deltas


class OneShotError(Exception):
    """The request failed; the message says why."""


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        deltas = transcribe(args)
    except (OneShotError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.buffer.write(encode(Step(deltas)))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
