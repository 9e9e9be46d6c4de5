"""Word error rate of direct mlx-audio Whisper on the espeak-ng test sentences, per model,
voice and rate: how the real-weights tier's combination was chosen (docs/speech.md).

    python -m tests.weights.measure_wer --model whisper-tiny.en --model whisper-base \\
        --voice en-us --voice en --rate 130 --rate 175 [--dtype float32|auto]

Each (model, voice, rate) speaks tests.support.spoken.SENTENCES with espeak-ng, transcribes
each file with `language="en"` (tests.support.direct_process: OpenBLAS, as the server's
worker) and prints one line: the WER over all ten and the seconds per sentence.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.support.direct_process import DirectProcess
from tests.support.spoken import SENTENCES, speak, word_error_rate
from worker.convert import packages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", choices=["whisper-tiny.en", "whisper-base"])
    parser.add_argument("--voice", action="append", help="espeak-ng -v (default: en-us)")
    parser.add_argument("--rate", action="append", type=int, help="espeak-ng -s (default: 130)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "auto"])
    parser.add_argument("--show", action="store_true", help="print every transcript")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        direct = DirectProcess(Path(tmp) / "direct.log")
        try:
            for key in args.model or ["whisper-tiny.en"]:
                path = str(packages.ensure_converted(key))
                for voice in args.voice or ["en-us"]:
                    for rate in args.rate or [130]:
                        pairs, start = [], time.monotonic()
                        for i, sentence in enumerate(SENTENCES):
                            wav = speak(Path(tmp) / f"{i}.wav", sentence, voice, rate)
                            text = direct.transcribe(path, wav, args.dtype, language="en")["text"]
                            pairs.append((sentence, text))
                            if args.show:
                                print(f"    {text}", flush=True)
                        per = (time.monotonic() - start) / len(SENTENCES)
                        wer = word_error_rate(pairs)
                        print(
                            f"{key} {args.dtype} -v {voice} -s {rate}: WER {wer:.3f} "
                            f"({per:.1f} s a sentence)",
                            flush=True,
                        )
        finally:
            direct.close()


if __name__ == "__main__":
    main()
