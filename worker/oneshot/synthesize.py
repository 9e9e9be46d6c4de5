"""One-shot speech synthesis without a server: `python -m worker.oneshot.synthesize --model ... --text ...`.

Runs the same speech engine the server's worker runs (worker/speech/engine.py), writes the raw
PCM (mono little-endian int16) to `--pcm-out` as it is produced, and prints one JSON line as
the last line of stdout: {"sample_rate", "samples", "usage": {"prompt_tokens",
"completion_tokens"}}. `vllm-omni-mlx tts` runs it as a subprocess (the gateway side never
imports MLX) and encodes the PCM into the requested file format.

Exit status: 0 done, 2 the request was refused (the message on stderr: unknown voice, ...),
1 anything else (the model did not load, generation failed).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from protocol.inputs import SpeechInputs
from protocol.messages import ErrorCode, FinishReason, Submit

EXIT_REFUSED = 2


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m worker.oneshot.synthesize", description=__doc__
    )
    parser.add_argument("--model", required=True, help="local TTS checkpoint directory")
    parser.add_argument("--text", required=True)
    parser.add_argument("--pcm-out", required=True, help="file for the int16 PCM")
    parser.add_argument("--voice")
    parser.add_argument("--instructions")
    parser.add_argument("--language")
    parser.add_argument("--speed", type=float)
    parser.add_argument("--ref-audio", help="reference audio file for a cloned voice")
    parser.add_argument("--ref-text", help="transcript of --ref-audio")
    parser.add_argument("--seed", type=int)
    return parser.parse_args(argv)


def inputs_of(args: argparse.Namespace) -> SpeechInputs:
    ref_audio = Path(args.ref_audio).read_bytes() if args.ref_audio else None
    return SpeechInputs(
        input=args.text,
        voice=args.voice,
        ref_audio=ref_audio,
        ref_text=args.ref_text,
        instructions=args.instructions,
        language=args.language,
        speed=args.speed,
        seed=args.seed,
    )


def run(args: argparse.Namespace) -> int:
    from worker.speech.engine import load_tts_engine

    engine = load_tts_engine(args.model)
    submit = Submit("oneshot", inputs_of(args), stream=True)
    deltas = [engine.admit(submit)]
    samples = 0
    with open(args.pcm_out, "wb") as out:
        while True:
            for delta in deltas:
                out.write(delta.audio)
                samples += len(delta.audio) // 2
                if delta.finish_reason is not None:
                    return _finish(delta, engine.sample_rate, samples)
            deltas = engine.step()


def _finish(delta: Any, sample_rate: int, samples: int) -> int:
    if delta.finish_reason != FinishReason.STOP:
        message = delta.error.message if delta.error else delta.finish_reason
        print(f"error: {message}", file=sys.stderr)
        refused = delta.error is not None and delta.error.code == ErrorCode.BAD_REQUEST
        return EXIT_REFUSED if refused else 1
    usage = delta.usage
    summary = {
        "sample_rate": sample_rate,
        "samples": samples,
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
        },
    }
    print(json.dumps(summary), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local directories only
    args = parse_args(argv)
    try:
        code = run(args)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
