"""Kokoro with its weight-normed convolutions normalized once (worker/speech/kokoro_weights.py)
against normalized on every call (mlx-audio's own ConvWeighted), side by side in one process.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 python -m scripts.bench_kokoro_weights \
        --model KOKORO_DIR [--rounds 5] [--text "I'm sorry," --text "..."]

Each round speaks every text both ways, taking turns, through the worker's own path
(worker/speech/kokoro_speaker.py: its front end, mlx-audio's model per chunk, the fast CPU
operations), with the same seed; the two ways' audio must be equal bit for bit. Prints the
median wall time of each text each way and their ratio, after one untimed round.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

TEXTS = ["I'm sorry,", "The quick brown fox jumps over the lazy dog."]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a converted Kokoro checkpoint")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--text", action="append", help="what to speak (repeatable)")
    parser.add_argument("--voice", default=None, help="default: the checkpoint's")
    args = parser.parse_args(argv)

    import mlx.core as mx
    from mlx_audio.tts.utils import load_model

    from worker.speech import kokoro_weights
    from worker.speech.kokoro_speaker import KokoroSpeaker

    path = Path(args.model)
    speaker = KokoroSpeaker(load_model(str(path)), path)
    pack = speaker.pack(args.voice or speaker.default_voice)
    texts = args.text or TEXTS
    times: dict[tuple[str, bool], list[float]] = {}
    seconds: dict[str, float] = {}
    for round_ in range(args.rounds + 1):
        for text in texts:
            audio = {}
            for once in (False, True):
                (kokoro_weights.install if once else kokoro_weights.uninstall)()
                phonemes = speaker.phoneme_chunks(text, "a")
                mx.random.seed(round_)
                start = time.perf_counter()
                chunks = [chunk.audio for chunk in speaker._speak(phonemes, pack, 1.0)]
                mx.eval(chunks)
                if round_:
                    times.setdefault((text, once), []).append(time.perf_counter() - start)
                audio[once] = mx.concatenate(chunks)
            if not mx.array_equal(audio[False], audio[True]).item():
                raise SystemExit(f"not equal bit for bit: {text!r}")
            seconds[text] = audio[True].shape[0] / speaker.model.sample_rate
    kokoro_weights.install()
    print(f"{args.rounds} rounds, medians; every text's audio equal bit for bit both ways\n")
    print("| text | audio | normalized every call | normalized once | once / every call |")
    print("| --- | --- | --- | --- | --- |")
    for text in texts:
        every = statistics.median(times[text, False])
        once = statistics.median(times[text, True])
        print(f"| {text} | {seconds[text]:.2f} s | {every * 1000:.0f} ms | {once * 1000:.0f} ms "
              f"| {once / every:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
