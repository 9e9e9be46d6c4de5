"""Kokoro with and without one of the worker's bit-exact forms, side by side in one process.

    LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libopenblas.so.0 python -m scripts.bench_kokoro_forms \\
        --model KOKORO_DIR --form weights|side-stream [--rounds 5] [--text "I'm sorry," ...]

Forms: `weights`, the weight-normed convolutions normalized once (worker/speech/kokoro_weights.py)
against on every call (mlx-audio's own ConvWeighted); `side-stream`, the last resblock of each
generator stage on the side stream (worker/speech/kokoro_fast.py `to_side_stream`) against all
on one.
Each round speaks every text both ways, taking turns, through the worker's own path
(worker/speech/kokoro_speaker.py: its front end, mlx-audio's model per chunk, the fast CPU
operations, the other form as the worker has it), with the same seed; the two ways' audio must
be equal bit for bit. Prints the median wall time of each text each way and their ratio, after
one untimed round.
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
    parser.add_argument("--form", required=True, choices=["weights", "side-stream"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--text", action="append", help="what to speak (repeatable)")
    parser.add_argument("--voice", default=None, help="default: the checkpoint's")
    args = parser.parse_args(argv)

    import mlx.core as mx
    from mlx_audio.tts.utils import load_model

    from worker.speech import kokoro_fast, kokoro_weights
    from worker.speech.kokoro_speaker import KokoroSpeaker

    path = Path(args.model)
    speaker = KokoroSpeaker(load_model(str(path)), path)
    voice = args.voice or speaker.default_voice
    generator = speaker.model.decoder.generator

    def use(form: bool) -> None:
        if args.form == "weights":
            (kokoro_weights.install if form else kokoro_weights.uninstall)()
        elif form:
            kokoro_fast.to_side_stream(generator)
        else:
            for block in generator.resblocks:
                block.on_side_stream = False

    texts = args.text or TEXTS
    times: dict[tuple[str, bool], list[float]] = {}
    seconds: dict[str, float] = {}
    for round_ in range(args.rounds + 1):
        for text in texts:
            audio = {}
            for form in (False, True):
                use(form)
                mx.random.seed(round_)
                start = time.perf_counter()
                chunks = [chunk.audio for chunk in speaker.generate(text, voice, 1.0, "a")]
                mx.eval(chunks)
                if round_:
                    times.setdefault((text, form), []).append(time.perf_counter() - start)
                audio[form] = mx.concatenate(chunks)
            if not mx.array_equal(audio[False], audio[True]).item():
                raise SystemExit(f"not equal bit for bit: {text!r}")
            seconds[text] = audio[True].shape[0] / speaker.model.sample_rate
    without, with_ = {
        "weights": ("normalized every call", "normalized once"),
        "side-stream": ("one stream", "a block a stage on the side stream"),
    }[args.form]
    print(f"{args.rounds} rounds, medians; every text's audio equal bit for bit both ways\n")
    print(f"| text | audio | {without} | {with_} | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for text in texts:
        off = statistics.median(times[text, False])
        on = statistics.median(times[text, True])
        print(f"| {text} | {seconds[text]:.2f} s | {off * 1000:.0f} ms | {on * 1000:.0f} ms "
              f"| {on / off:.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
