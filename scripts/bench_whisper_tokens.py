"""Whisper: a transcription with mlx-audio's no-speech token lookup (the whole vocabulary copied
on every read) against the worker's looked-up-once id (worker/transcription/whisper_tokens.py).

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 python -m scripts.bench_whisper_tokens \\
        --model $(python -m worker.convert.packages whisper-tiny.en) [--runs 7]

One copy of the checkpoint built as the worker builds it (float32, the encoder's heads on two
streams on the CPU); runs alternate with and without the install, after one warm-up, each a
whole `generate` of a spoken sentence (espeak-ng, 16 kHz). Prints the medians, their ratio,
and whether the transcripts are equal (they must be).
"""

from __future__ import annotations

import argparse
import statistics
import time

from scripts.bench_whisper_encoder import SENTENCE, load, spoken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--runs", type=int, default=7, choices=range(1, 101), metavar="1-100")
    args = parser.parse_args()

    from worker.transcription import whisper_tokens

    model = load(args.model, True)
    audio = spoken(SENTENCE)
    model.generate(audio, fp16=False)
    times: dict[bool, list[float]] = {False: [], True: []}
    texts: dict[bool, str] = {}
    for _ in range(args.runs):
        for once in (False, True):
            (whisper_tokens.install if once else whisper_tokens.uninstall)()
            started = time.perf_counter()
            texts[once] = model.generate(audio, fp16=False).text
            times[once].append(time.perf_counter() - started)
    whisper_tokens.install()
    every, once = (statistics.median(times[k]) for k in (False, True))
    print("| no-speech id | transcription of a spoken sentence |")
    print("| --- | --- |")
    print(f"| looked up on every read (mlx-audio) | {every * 1000:.0f} ms |")
    print(f"| looked up once | {once * 1000:.0f} ms |")
    print(f"| once / every read | {once / every:.2f} |")
    print("transcripts equal:", texts[False] == texts[True], repr(texts[True]))


if __name__ == "__main__":
    main()
